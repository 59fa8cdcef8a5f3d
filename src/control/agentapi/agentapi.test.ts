// The heartbeat long-poll, over a real socket: a heartbeat that knows the
// current generation is held until the generation moves. Regression: the
// wait listened for the request's 'close', which Node emits as soon as the
// body is read, so every heartbeat was answered at once and each agent
// polled in a tight loop (about 40 heartbeats a second instead of one per 5 s).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { Agent, request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { compileControlOptions } from '../config/index.js';
import { ControlPlane } from '../control-plane.js';
import { createJsonApp } from '../../http/index.js';
import { Inventory } from '../inventory/index.js';
import { Store } from '../store/index.js';
import { AssignmentBoard } from './assignments.js';
import { registerAgentApi } from './routes.js';
import { waitFor } from '../../../test/support/wait.js';

const JOIN = 'join-token-for-tests-0123456789';
let plane: ControlPlane | null = null;
afterEach(async () => {
  await plane?.close();
  plane = null;
});

describe('heartbeat long-poll', () => {
  it('holds a heartbeat with the current generation until the generation moves', async () => {
    plane = await ControlPlane.create(
      compileControlOptions({
        store: 'none',
        join_token: JOIN,
        client_addr: '127.0.0.1:0',
        admin_addr: '127.0.0.1:0',
        agent_addr: '127.0.0.1:0',
      }),
      {
        logger: pino({ level: 'silent' }),
      },
    );
    const urls = await plane.listen();
    const joined = await request(`${urls.agent}/agent/v1/join`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ join_token: JOIN, node_id: 'n1' }),
    });
    const { credential } = (await joined.body.json()) as { credential: string };
    const beat = (extra: Record<string, unknown>) =>
      request(`${urls.agent}/agent/v1/heartbeat`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${credential}` },
        body: JSON.stringify({ node_id: 'n1', ...extra }),
      });
    const first = (await (await beat({})).body.json()) as { generation: number };

    let answered = false;
    const held = beat({ known_generation: first.generation, wait_ms: 30_000 }).then(async (res) => {
      answered = true;
      return (await res.body.json()) as { generation: number };
    });
    // A heartbeat answered at once would have landed long before this second one returns.
    await (await beat({})).body.json();
    await (await beat({})).body.json();
    expect(answered, 'a heartbeat with the current generation is held, not answered at once').toBe(false);

    plane.assignments.bump('n1');
    const answer = await held;
    expect(answer.generation).toBe(first.generation + 1);
  });
});

/** A real board that counts the waits it held and those that ended. */
class WatchedBoard extends AssignmentBoard {
  started = 0;
  ended = 0;
  override async waitForChange(
    nodeId: string,
    known: number,
    waitMs: number,
    onCancel?: (cancel: () => void) => () => void,
  ): Promise<void> {
    this.started++;
    try {
      await super.waitForChange(nodeId, known, waitMs, onCancel);
    } finally {
      this.ended++;
    }
  }
}

describe('a held heartbeat and its response', () => {
  // The wait listens for the response's close so that an agent that went away
  // does not keep a waiter for the whole wait_ms; the listener must go once
  // the wait ends, or each heartbeat on a kept-alive socket would add one.
  it('ends the wait when the agent goes away, and leaves no close listener on an answered one', async () => {
    const inventory = await Inventory.create({
      store: null,
      now: () => Date.now(),
      staleAfterMs: 15_000,
      lostAfterMs: 60_000,
    });
    const board = new WatchedBoard(1);
    const app = createJsonApp({ logger: pino({ level: 'silent' }), bodyLimitBytes: 1 << 20 });
    registerAgentApi(app, { inventory, assignments: board, joinToken: JOIN, heartbeatIntervalMs: 1000 });
    // Counted once the route has answered: a listener still there then is one the route left behind.
    const closeListeners: number[] = [];
    app.addHook('onResponse', async (req, reply) => {
      if (req.url.endsWith('/heartbeat')) closeListeners.push(reply.raw.listenerCount('close'));
    });
    const base = await app.listen({ host: '127.0.0.1', port: 0 });
    // Its own connections, closed before the app: after an abort undici may open another, which would hold app.close().
    const dispatcher = new Agent();
    try {
      const joined = await app.inject({
        method: 'POST',
        url: '/agent/v1/join',
        payload: { join_token: JOIN, node_id: 'n1' },
      });
      const { credential } = joined.json<{ credential: string }>();
      const beat = (extra: Record<string, unknown>, signal?: AbortSignal) =>
        request(`${base}/agent/v1/heartbeat`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${credential}` },
          body: JSON.stringify({ node_id: 'n1', ...extra }),
          dispatcher,
          ...(signal ? { signal } : {}),
        });
      const { generation } = (await (await beat({})).body.json()) as { generation: number };
      const until = (what: string, ok: () => boolean) => waitFor(what, ok, { timeoutMs: 20_000, intervalMs: 10 });

      // Held, then answered by a change.
      const held = beat({ known_generation: generation, wait_ms: 60_000 });
      await until('the heartbeat is held', () => board.started === 1);
      board.bump('n1');
      expect(((await (await held).body.json()) as { generation: number }).generation).toBe(generation + 1);
      await until('both answers are counted', () => closeListeners.length === 2);
      expect(closeListeners[1], 'a held heartbeat leaves as many close listeners as one answered at once').toBe(
        closeListeners[0],
      );

      // Held, then the agent goes away: the wait ends long before its 60 s.
      const gone = new AbortController();
      const abandoned = beat({ known_generation: generation + 1, wait_ms: 60_000 }, gone.signal).catch(() => 'aborted');
      await until('the second heartbeat is held', () => board.started === 2);
      gone.abort();
      expect(await abandoned).toBe('aborted');
      await until('the abandoned wait ends', () => board.ended === 2);
    } finally {
      await dispatcher.destroy();
      await app.close();
      await inventory.close();
    }
  });
});

describe('heartbeats an instance cannot save', () => {
  it('are refused with 503 once the store has been away long enough, so agents move to another control plane', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-agentapi-'));
    const store = await Store.open({ location: { kind: 'sqlite', path: join(dir, 'db') } });
    let now = 1_000_000;
    const inventory = await Inventory.create({
      store,
      now: () => now,
      staleAfterMs: 15_000,
      lostAfterMs: 60_000,
      flushIntervalMs: 0,
    });
    const app = createJsonApp({ logger: pino({ level: 'silent' }), bodyLimitBytes: 1 << 20 });
    registerAgentApi(app, {
      inventory,
      assignments: new AssignmentBoard(1),
      joinToken: JOIN,
      heartbeatIntervalMs: 1000,
      refuseHeartbeatsUnsavedForMs: 7_500,
    });
    try {
      const joined = await app.inject({
        method: 'POST',
        url: '/agent/v1/join',
        payload: { join_token: JOIN, node_id: 'n1' },
      });
      const { credential } = joined.json<{ credential: string }>();
      const beat = () =>
        app.inject({
          method: 'POST',
          url: '/agent/v1/heartbeat',
          headers: { authorization: `Bearer ${credential}` },
          payload: { node_id: 'n1' },
        });
      expect((await beat()).statusCode).toBe(200);

      await store.close();
      expect((await beat()).statusCode, 'the first heartbeat the store misses is still answered').toBe(200);
      await inventory.flush();
      now += 7_000;
      expect((await beat()).statusCode, 'within the allowance').toBe(200);
      now += 1_000;
      const refused = await beat();
      expect(refused.statusCode).toBe(503);
      expect(refused.json<{ error: string }>().error).toMatch(
        /not been able to save heartbeats to the store for 8 s.*heartbeat to another control plane/,
      );
    } finally {
      await app.close();
      await inventory.close().catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
