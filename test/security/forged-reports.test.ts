// A node's heartbeat steering the fleet, replayed against a real control
// plane (join_approval: manual) and a real simulated agent over loopback.
// The attack (issue 33, finding 3): a node that joined with the shared join
// token and was never approved sent heartbeats naming another node's replica
// with `load: {running: 1000, waiting: 1000}` and that node's fetching shard
// with forged progress. The control plane took both: the router sent the
// replica nothing, the scaler grew the model to scaling.max ("2000 request(s)
// in flight or waiting") and the replica view showed the forged download.
// Once approved, the same node could do the same. Each phase asserts that
// the heartbeats were taken as heartbeats (the node is up) and that nothing
// they said of the other node's shards reached the router, the scaler or
// the views, and that the refusals were counted and logged once.
import { createServer, type Server } from 'node:http';
import { mkdtempSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { EventsView } from '../../src/api/index.js';
import { ADMIN, Fleet, JOIN } from '../faults/fleet-support.js';
import { killEnginesOf, stopAll } from '../support/processes.js';
import { waitFor } from '../support/wait.js';

const SIZE = 4 << 20;
const HUGE = { running: 1000, waiting: 1000, age_ms: 0 };
let server: Server | undefined;
let release: () => void = () => {};
let fleet: Fleet | undefined;
/** Forged heartbeat loops still running: stopped before the processes they call. */
const forgers = new Set<() => Promise<void>>();

afterAll(async () => {
  for (const stop of forgers) await stop();
  release();
  await stopAll();
  if (fleet) killEnginesOf(fleet.stateDirs);
  server?.close();
});

/** A weight server that sends half the file at once and the rest only at release(): a shard that stays fetching at 50%. */
async function halfServed(): Promise<string> {
  const released = new Promise<void>((resolve) => (release = resolve));
  server = createServer((req, res) => {
    res.writeHead(200, { 'content-length': String(SIZE), 'accept-ranges': 'bytes' });
    res.write(Buffer.alloc(SIZE / 2, 1));
    void released.then(() => res.end(Buffer.alloc(SIZE / 2, 1)));
  });
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/weights.gguf`;
}

async function agentCall(
  f: Fleet,
  path: string,
  body: unknown,
  credential?: string,
): Promise<{ status: number; text: string }> {
  const res = await fetch(`${f.agentUrl}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(credential ? { authorization: `Bearer ${credential}` } : {}) },
    body: JSON.stringify(body),
  });
  return { status: res.status, text: await res.text() };
}

async function metricsText(f: Fleet): Promise<string> {
  return (await fetch(`${f.admin}/metrics`, { headers: { authorization: `Bearer ${ADMIN}` } })).text();
}

async function refused(f: Fleet, reason: string): Promise<number> {
  const m = new RegExp(`^llmgw_agent_reports_refused_total\\{reason="${reason}"\\} (\\d+)$`, 'm').exec(
    await metricsText(f),
  );
  return Number(m?.[1] ?? 0);
}

/** Returns once the control plane has run `passes` more reconciler passes: time passing, measured by the system itself. */
async function afterPasses(f: Fleet, passes: number): Promise<void> {
  const count = async () => Number(/^llmgw_reconciler_passes_total (\d+)$/m.exec(await metricsText(f))?.[1] ?? 0);
  const from = await count();
  await waitFor(`${passes} reconciler passes`, async () => ((await count()) >= from + passes ? true : undefined));
}

/** A sim engine's count of tokens it generated, from its own /metrics. */
async function generated(endpoint: string): Promise<number> {
  const text = await (await fetch(`${endpoint}/metrics`)).text();
  return Number(
    text
      .split('\n')
      .find((l) => l.startsWith('vllm:generation_tokens_total'))
      ?.split(' ')
      .pop() ?? 'NaN',
  );
}

/**
 * Heartbeats from the forged node every 100 ms until stopped, each naming
 * the real node's shards with a huge load and forged progress. Every answer
 * is kept: a refused heartbeat would mean the attack never reached the fold.
 */
function forge(f: Fleet, credential: string, shards: unknown[]): { stop: () => Promise<void>; statuses: number[] } {
  const statuses: number[] = [];
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      // 0: no answer at all, which the caller's check on the statuses reports.
      statuses.push(
        await agentCall(f, '/agent/v1/heartbeat', { node_id: 'evil', shards }, credential).then(
          (r) => r.status,
          () => 0,
        ),
      );
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  })();
  const stop = async () => {
    stopped = true;
    await loop;
    forgers.delete(stop);
  };
  forgers.add(stop);
  return { statuses, stop };
}

describe('forged shard reports', () => {
  it("a pending node, and then an approved one, cannot set another node's replica load or fetch progress", async () => {
    const source = await halfServed();
    fleet = new Fleet(mkdtempSync(join(tmpdir(), 'llmgw-security-forged-')), 28350);
    const f = fleet;
    const control = await f.startControl([
      '--reconcile-interval',
      '300ms',
      '--join-approval',
      'manual',
      '--allow-http-sources',
    ]);
    f.startAgent('real', ['--allow-http-sources']);
    await waitFor('the real node joined', async () =>
      (await f.nodes()).some((n) => n.id === 'real') ? true : undefined,
    );
    expect((await f.api('POST', '/api/v1/nodes/real/approve')).status).toBe(200);
    await f.nodesUp(1);
    const key = (await f.api<{ secret: string }>('POST', '/api/v1/keys', { name: 'client' })).body.secret;

    // Two replicas, so that the router has a choice to steer; target_inflight 1 and a 1 s window, so a forged 2000 would scale within seconds.
    await f.addModel({
      name: 'steered',
      scaling: { min: 2, max: 4, target_inflight: 1, window: '1s' },
      profiles: [{ engine: 'sim' }],
    });
    const [target, other] = (await f.ready('steered', 2)).sort((a, b) => (a.id < b.id ? -1 : 1));
    const pair = [target!.id, other!.id].sort();
    const res = await f.api('POST', '/api/v1/models', { name: 'slow', source, profiles: [{ engine: 'sim' }] });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const slow = await waitFor('the slow model fetching at 50%', async () => {
      const [r] = await f.replicas('slow');
      return r?.state === 'fetching' && r.shards[0]?.fetch?.percent === 50 ? r : undefined;
    });

    // The forged node: the shared join token and raw HTTP, never approved.
    const joined = await agentCall(f, '/agent/v1/join', { join_token: JOIN, node_id: 'evil', hostname: 'evil' });
    expect(joined.status, joined.text).toBe(200);
    const credential = (JSON.parse(joined.text) as { credential: string }).credential;
    const shards = [
      { shard_id: target!.shards[0]!.id, replica_id: target!.id, state: 'ready', load: HUGE },
      {
        shard_id: slow.shards[0]!.id,
        replica_id: slow.id,
        state: 'fetching',
        fetch: { bytes_done: SIZE - 1, total_bytes: SIZE },
      },
    ];

    /** What must hold while the forged node reports: the router, the scaler and the views go by the real node alone. */
    const holds = async (phase: string) => {
      // The scaler decides every pass; eight passes (2.4 s) span the 1 s window twice over.
      await afterPasses(f, 8);
      const replicas = (await f.replicas('steered')).filter((r) =>
        ['pending', 'fetching', 'starting', 'ready'].includes(r.state),
      );
      expect(replicas.map((r) => r.id).sort(), `${phase}: the scaler kept the model at its two replicas`).toEqual(pair);
      const events = (await f.api<EventsView>('GET', '/api/v1/events?model=steered')).body.events;
      expect(
        events.filter((e) => e.kind === 'scale' && (e.to ?? 0) > 2),
        `${phase}: no scale-up`,
      ).toEqual([]);
      const shown = (await f.replicas('steered')).find((r) => r.id === target!.id);
      expect(shown?.load?.running ?? 0, `${phase}: no forged load in the replica view`).toBeLessThan(1000);
      const fetching = (await f.replicas('slow'))[0];
      expect(fetching?.shards[0]?.fetch, `${phase}: the real node's progress, not the forged one`).toMatchObject({
        bytes_done: SIZE / 2,
        percent: 50,
      });
      // Routing: the forged load would score the target at 3000 and send it nothing; both are idle, so a request goes to either.
      const before = await generated(target!.endpoint!);
      for (let i = 0; i < 20; i++) {
        const chat = await fetch(`${control.urls.client}/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'steered', max_tokens: 2, messages: [{ role: 'user', content: 'hi' }] }),
        });
        expect(chat.status, `${phase}: ${await chat.clone().text()}`).toBe(200);
        await chat.text();
      }
      expect(
        await generated(target!.endpoint!),
        `${phase}: requests still reach the replica the forged node named`,
      ).toBeGreaterThan(before);
    };
    const logLines = (reason: string) =>
      control.lines.filter((l) => l.includes('"node":"evil"') && l.includes(`"reason":"${reason}"`));

    // Pending.
    const startedMs = Date.now();
    const pending = forge(f, credential, shards);
    await waitFor('the forged node up (its heartbeats are taken)', async () =>
      (await f.nodes()).find((n) => n.id === 'evil')?.liveness === 'up' ? true : undefined,
    );
    expect((await f.nodes()).find((n) => n.id === 'evil')?.approval).toBe('pending');
    await holds('pending');
    await pending.stop();
    expect(
      pending.statuses.every((s) => s === 200),
      `every forged heartbeat answered 200: ${pending.statuses.join(',')}`,
    ).toBe(true);
    expect(await refused(f, 'node_pending'), 'refusals counted').toBeGreaterThanOrEqual(2 * pending.statuses.length);
    const minutes = 1 + Math.floor((Date.now() - startedMs) / 60_000);
    expect(
      logLines('node_pending').length,
      `logged once a minute, not per heartbeat (${pending.statuses.length} sent)`,
    ).toBeGreaterThanOrEqual(1);
    expect(logLines('node_pending').length).toBeLessThanOrEqual(minutes);

    // Approved: an admin let it in, and it keeps naming the other node's shards.
    expect((await f.api('POST', '/api/v1/nodes/evil/approve')).status).toBe(200);
    const approvedAtMs = Date.now();
    const approved = forge(f, credential, shards);
    await holds('approved');
    await approved.stop();
    expect(approved.statuses.every((s) => s === 200)).toBe(true);
    expect(await refused(f, 'not_assigned'), 'refusals counted').toBeGreaterThanOrEqual(2 * approved.statuses.length);
    expect(logLines('not_assigned').length).toBeGreaterThanOrEqual(1);
    expect(logLines('not_assigned').length).toBeLessThanOrEqual(1 + Math.floor((Date.now() - approvedAtMs) / 60_000));

    // The real node's word still counts: released, its shard finishes fetching and the replica is ready.
    release();
    await f.ready('slow', 1);
  }, 240_000);
});
