// The deadlines an agent gives its calls to a control plane. Regression: a
// heartbeat waited its long-poll plus a fixed 10 s for an answer, so a link
// that dropped packets (no RST, no error) was noticed only after the node had
// gone stale, or lost with a short node_lost_after, and its replicas were
// replaced although another control plane was a URL away.
import { mkdtempSync } from 'node:fs';
import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { LlmgwError } from '../errors/index.js';
import type { NodeReport } from '../protocol/index.js';
import { Agent, compileAgentOptions } from './agent.js';
import { saveIdentity } from './identity.js';
import {
  answerSlackMs,
  callControl,
  controlDispatcher,
  DEFAULT_JOIN_DEADLINE_MS,
  heartbeatDeadlineMs,
  joinDeadlineMs,
  linkDeadlineAt,
  type LinkTiming,
  MAX_ANSWER_SLACK_MS,
  MIN_ANSWER_SLACK_MS,
  pollWaitMs,
  retryDelayMs,
  staleWindowMs,
} from './control-link.js';

/** The control plane's defaults: node_stale_after 15s, an interval of a third of it. */
const defaults: LinkTiming = { staleAfterMs: 15_000, intervalMs: 5_000, deadlineMs: null };

describe('call deadlines derived from the stale window', () => {
  it('fit the poll wait, the answer and a failover to the next control plane inside the stale window', () => {
    for (const staleAfterMs of [1_000, 3_000, 15_000, 60_000]) {
      const t: LinkTiming = {
        staleAfterMs,
        intervalMs: Math.max(100, Math.min(5000, Math.floor(staleAfterMs / 3))),
        deadlineMs: null,
      };
      const wait = pollWaitMs(t);
      const deadline = heartbeatDeadlineMs(wait, t);
      expect(deadline, `stale ${staleAfterMs} ms: the heartbeat gives up before the node goes stale`).toBeLessThan(
        staleAfterMs,
      );
      // What is left after giving up is at least the slack again: time to connect to and report to the next one.
      expect(staleAfterMs - deadline, `stale ${staleAfterMs} ms: room left to fail over`).toBeGreaterThanOrEqual(
        Math.min(answerSlackMs(wait, t), MAX_ANSWER_SLACK_MS),
      );
    }
  });

  it('with the defaults (15 s stale, 5 s interval): a 5 s poll answered within 5 s more', () => {
    expect(pollWaitMs(defaults)).toBe(5_000);
    expect(answerSlackMs(5_000, defaults)).toBe(5_000);
    expect(heartbeatDeadlineMs(5_000, defaults)).toBe(10_000);
  });

  it('a heartbeat answered at once (no poll) still gets the slack, never less than 250 ms nor more than 10 s', () => {
    expect(heartbeatDeadlineMs(0, defaults), 'half of the 15 s window, capped').toBe(7_500);
    expect(answerSlackMs(0, { staleAfterMs: 600_000, intervalMs: 5_000, deadlineMs: null })).toBe(MAX_ANSWER_SLACK_MS);
    expect(
      answerSlackMs(300, { staleAfterMs: 400, intervalMs: 100, deadlineMs: null }),
      'a tiny window is not allowed to make healthy calls fail',
    ).toBe(MIN_ANSWER_SLACK_MS);
  });

  it('without an announced window (an older control plane), works to three intervals, as a control plane derives its interval', () => {
    const older: LinkTiming = { staleAfterMs: null, intervalMs: 2_000, deadlineMs: null };
    expect(staleWindowMs(older)).toBe(6_000);
    expect(pollWaitMs(older)).toBe(2_000);
    expect(heartbeatDeadlineMs(2_000, older)).toBe(4_000);
  });

  it('never asks a control plane to hold a heartbeat for more than a third of the window, whatever interval it announces', () => {
    expect(pollWaitMs({ staleAfterMs: 3_000, intervalMs: 5_000, deadlineMs: null })).toBe(1_000);
  });

  it("uses the operator's --control-deadline as it is, for heartbeats past their wait and for joins", () => {
    const t: LinkTiming = { ...defaults, deadlineMs: 1_500 };
    expect(heartbeatDeadlineMs(5_000, t)).toBe(6_500);
    expect(joinDeadlineMs(t)).toBe(1_500);
    expect(joinDeadlineMs(defaults), 'absent: joins get 10 s').toBe(DEFAULT_JOIN_DEADLINE_MS);
  });
});

describe('a call cut short by news', () => {
  it('leaves its deadline to the next call, so a silent link is noticed however often the agent is poked', () => {
    expect(linkDeadlineAt(1_000, 700, null), "nothing pending: the call's own").toBe(1_700);
    expect(linkDeadlineAt(1_400, 700, 1_700), "the pending call's, sooner").toBe(1_700);
    expect(linkDeadlineAt(1_400, 200, 1_700), "this call's own, when sooner").toBe(1_600);
  });
});

describe('retry pacing', () => {
  it('moves to each other control plane at once, then backs off with jitter from 250 ms up to an interval', () => {
    expect(
      [1, 2, 3].map((f) => retryDelayMs(f, 3, 5_000, 0.5)),
      'three control planes: the first two failures move on at once',
    ).toEqual([0, 0, 125]);
    expect(
      [1, 2, 3, 4, 5, 6, 7, 8, 12].map((f) => retryDelayMs(f, 1, 5_000, 0.5)),
      'half of a ceiling that doubles',
    ).toEqual([125, 250, 500, 1000, 2000, 2500, 2500, 2500, 2500]);
    expect(retryDelayMs(9, 1, 300, 0.999), 'never longer than the interval').toBeLessThan(300);
    expect(retryDelayMs(1, 1, 5_000, 0), 'never a spin, even at the bottom of the jitter').toBeGreaterThan(0);
  });
});

describe('--control-deadline', () => {
  const base = { stateDir: '/tmp/unused', nodeId: 'n1', control: ['http://127.0.0.1:8082'] };
  it('is read as a duration; absent is null (derived)', () => {
    expect(compileAgentOptions({ ...base, controlDeadline: '2s' }).controlDeadlineMs).toBe(2_000);
    expect(compileAgentOptions(base).controlDeadlineMs).toBeNull();
  });
  it('refuses zero and nonsense, saying what to give', () => {
    expect(() => compileAgentOptions({ ...base, controlDeadline: '0s' })).toThrow(
      /--control-deadline 0s would give up on every call at once/,
    );
    expect(() => compileAgentOptions({ ...base, controlDeadline: 'soon' })).toThrow(/--control-deadline/);
  });
});

describe('a call to a control plane that stops answering', () => {
  // A server that accepts and reads but never answers: to the client, exactly a link that drops every packet after the request.
  const held: Socket[] = [];
  let silent: Server | undefined;
  afterAll(() => {
    for (const s of held) s.destroy();
    silent?.close();
  });

  it('is given up on at its deadline with LLMGW_CONTROL_UNANSWERED naming the control plane, and its connection is dropped', async () => {
    silent = createServer((socket) => {
      held.push(socket);
      socket.resume();
    });
    await new Promise<void>((resolve) => silent!.listen(0, '127.0.0.1', resolve));
    const port = (silent.address() as { port: number }).port;
    const dispatcher = controlDispatcher({ ca: null, connectTimeoutMs: 1_000 });
    const started = Date.now();
    const err = await callControl(`http://127.0.0.1:${port}/agent/v1/heartbeat`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{}',
      signal: new AbortController().signal,
      deadlineMs: 300,
      dispatcher,
    }).catch((e: unknown) => e);
    expect(err, 'a typed error, not a hang').toBeInstanceOf(LlmgwError);
    expect((err as LlmgwError).code).toBe('LLMGW_CONTROL_UNANSWERED');
    expect((err as LlmgwError).message).toContain(`http://127.0.0.1:${port} did not answer within 300 ms`);
    expect(Date.now() - started, 'given up on at the deadline, not at a transport timeout').toBeLessThan(5_000);
    // The socket is destroyed so that the next call does not queue behind it.
    await expect.poll(() => held.every((s) => s.destroyed || s.readableEnded), { timeout: 5_000 }).toBe(true);
    await dispatcher.destroy();
  });

  it('stopped by its caller is not blamed on the link', async () => {
    const port = (silent!.address() as { port: number }).port;
    const stop = new AbortController();
    const pending = callControl(`http://127.0.0.1:${port}/x`, {
      method: 'GET',
      headers: {},
      signal: stop.signal,
      deadlineMs: 5_000,
    });
    setTimeout(() => stop.abort(), 50);
    const err = await pending.catch((e: unknown) => e);
    expect(err instanceof LlmgwError && err.code === 'LLMGW_CONTROL_UNANSWERED', 'an abort is not a cut link').toBe(
      false,
    );
  });
});

describe('an agent whose control planes stop answering', () => {
  // Servers that accept and read but never answer: links whose packets are dropped after the handshake.
  const held: Socket[] = [];
  const servers: Server[] = [];
  afterAll(() => {
    for (const s of held) s.destroy();
    for (const s of servers) s.close();
  });
  /** Connections each silent server has accepted, by its URL. */
  const accepted = new Map<string, number>();
  const silentServer = async (): Promise<string> => {
    let url = '';
    const server = createServer((socket) => {
      held.push(socket);
      accepted.set(url, (accepted.get(url) ?? 0) + 1);
      socket.resume();
    });
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
    return url;
  };
  /** An agent that has joined already (its identity saved), heartbeating every 300 ms to `controls`, with a null probe and no management API. */
  const joinedAgent = (controls: string[]): Agent => {
    const stateDir = mkdtempSync(join(tmpdir(), 'llmgw-agent-deadline-'));
    saveIdentity(stateDir, { node_id: 'n1', credential: 'c', mgmt_token: 'm' });
    return new Agent(compileAgentOptions({ control: controls, nodeId: 'n1', stateDir, heartbeatInterval: '300ms' }), {
      probe: async () => ({}) as NodeReport,
      mgmt: false,
      logger: pino({ level: 'silent' }),
    });
  };

  it('never gives up on a control plane that answers, however often news pokes it', async () => {
    // Regression: after a poke cut the held heartbeat short, the next one was held again (the news flag
    // was cleared) yet inherited the cut call's deadline; poked every second, as load samples do on a
    // busy node, an agent gave up on a healthy control plane every deadline and failed over.
    let answered = 0;
    const healthy: HttpServer = createHttpServer((req, res) => {
      let body = '';
      req.on('data', (chunk: Buffer) => (body += chunk.toString()));
      req.on('end', () => {
        const { wait_ms: waitMs } = JSON.parse(body) as { wait_ms?: number };
        const timer = setTimeout(() => {
          answered++;
          res
            .writeHead(200, { 'content-type': 'application/json' })
            .end(JSON.stringify({ node_id: 'n1', generation: 1, shards: [], heartbeat_interval_ms: 300 }));
        }, waitMs ?? 0);
        res.on('close', () => clearTimeout(timer));
      });
    });
    await new Promise<void>((resolve) => healthy.listen(0, '127.0.0.1', resolve));
    const agent = joinedAgent([`http://127.0.0.1:${(healthy.address() as { port: number }).port}`]);
    await agent.start();
    const news = setInterval(() => agent.poke(), 120);
    try {
      // Window 900 ms, deadline 450 ms after each call: a dozen deadlines pass while it is poked.
      await expect
        .poll(() => answered, { timeout: 15_000, message: 'heartbeats answered while poked' })
        .toBeGreaterThanOrEqual(25);
      expect(agent.unanswered, 'no call to a control plane that answers is given up on').toBe(0);
    } finally {
      clearInterval(news);
      await agent.stop();
      healthy.closeAllConnections();
      healthy.close();
    }
  });

  it('gives up on each by its deadline and moves to the next, even while news pokes it every 50 ms', async () => {
    // Regression: each poke cut the held heartbeat short and the next one started a fresh deadline, so an agent whose
    // engines reported load every second never noticed a dead control plane, and its node went stale.
    const urls = [await silentServer(), await silentServer()];
    const agent = joinedAgent(urls);
    await agent.start();
    const news = setInterval(() => agent.poke(), 50);
    try {
      // Window 900 ms (three intervals, none announced); deadline 450 ms; so both are given up on within seconds.
      await expect
        .poll(() => agent.unanswered, { timeout: 15_000, message: 'calls given up on at their deadline' })
        .toBeGreaterThanOrEqual(2);
      expect(accepted.get(urls[1]!), 'it moved to the second control plane').toBeGreaterThanOrEqual(1);
    } finally {
      clearInterval(news);
      await agent.stop();
    }
  });
});
