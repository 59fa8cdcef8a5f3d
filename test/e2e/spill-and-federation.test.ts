// Spill-over and federation end to end (issue 38): two real llmgw fleets on
// loopback, each a `llmgw control` with a simulated agent and sim engines.
// Fleet A's local models are capped at one request at a time; fleet B is
// their peer (`api: llmgw`), reached with an API key fleet B issued. Guards
// against: requests past local capacity queueing locally although a remote
// has room; a request log that does not say which rule sent a request
// where; `when: cold` holding requests while a local replica starts; `never`
// spilling; a peer whose capacity and load are not read from its API, or
// whose own queue does not change where fleet A sends requests. Everything
// is asserted on states and counts (the request log, usage as billed), never
// on durations: a test waits for a state (a queue seen) before it acts.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ModelView, ReplicaView, RequestsView, UsageView } from '../../src/api/index.js';
import { startOneNodeFleet, type OneNodeFleet } from '../support/one-node.js';
import { waitFor } from '../support/wait.js';
import { runCtlCli } from './ctl-support.js';

let peer: OneNodeFleet;
let local: OneNodeFleet;

/** One request at a time, 20 tokens a second: a request of 120 tokens holds the engine for about 6 s. */
const capped = ['--max-concurrency', '1', '--tokens-per-second', '20'];

beforeAll(async () => {
  peer = await startOneNodeFleet({
    name: 'peer',
    portRange: '27850-27899',
    // fleet-a: what fleet A is given; direct: this test's own requests to the peer, billed apart.
    keys: ['fleet-a', 'direct'],
    models: (dir) => [
      { name: 'big', source: `file://${dir}`, scaling: { min: 1 }, profiles: [{ engine: 'sim', args: [] }] },
      { name: 'small', source: `file://${dir}`, scaling: { min: 1 }, profiles: [{ engine: 'sim', args: capped }] },
    ],
  });
  local = await startOneNodeFleet({
    name: 'spill',
    portRange: '27650-27699',
    keys: ['client'],
    // Probed often, so that the peer's load is read soon after it changes.
    controlArgs: ['--remote-probe-interval', '300ms'],
    models: (dir) => {
      const keyFile = join(dir, 'peer.key');
      writeFileSync(keyFile, `${peer.keys['fleet-a']!.secret}\n`, { mode: 0o600 });
      const source = `file://${dir}`;
      const remote = (model: string) => [
        { engine: 'remote', remote: { url: peer.clientUrl, model, api: 'llmgw', api_key_file: keyFile } },
      ];
      const sim = (args: string[]) => [{ engine: 'sim', args }];
      return [
        { name: 'peer-big', profiles: remote('big') },
        { name: 'peer-small', profiles: remote('small') },
        {
          name: 'busy',
          source,
          scaling: { min: 1 },
          profiles: sim(capped),
          spill: { to: 'peer-big', when: 'saturated', max_queue: '100ms' },
        },
        { name: 'held', source, scaling: { min: 1 }, profiles: sim(capped), spill: { to: 'peer-big', when: 'never' } },
        {
          name: 'crowded',
          source,
          scaling: { min: 1 },
          profiles: sim(capped),
          spill: { to: 'peer-small', when: 'saturated', max_queue: '100ms' },
        },
        // Started on demand, and slow to start: requests meanwhile go to the peer.
        {
          name: 'cold',
          source,
          scaling: { min: 0, max: 1 },
          profiles: sim(['--startup-delay-ms', '15000']),
          spill: { to: 'peer-big', when: 'cold' },
        },
      ];
    },
  });
}, 300_000);

afterAll(async () => {
  await local?.stop();
  await peer?.stop();
});

/** A chat request to a fleet's client listener, tagged with an x-request-id to find its record. */
async function chat(
  fleet: OneNodeFleet,
  key: string,
  model: string,
  maxTokens: number,
  id?: string,
): Promise<{ status: number; text: string }> {
  const res = await fetch(`${fleet.clientUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${fleet.keys[key]!.secret}`,
      'content-type': 'application/json',
      ...(id ? { 'x-request-id': id } : {}),
    },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hello' }], max_tokens: maxTokens }),
  });
  return { status: res.status, text: await res.text() };
}

/** Requests that hold a capped engine; their answers are awaited at the end, never timed. */
function hold(fleet: OneNodeFleet, key: string, model: string, n: number, maxTokens: number): Promise<number[]> {
  return Promise.all(Array.from({ length: n }, () => chat(fleet, key, model, maxTokens).then((r) => r.status)));
}

/** Waits until the model's local replica reports a queue to its agent (the same sample the router reads). */
function queueSeen(fleet: OneNodeFleet, model: string): Promise<true> {
  return waitFor(`a queue on ${model}'s replica`, async () => {
    const { body } = await fleet.api<ReplicaView[]>('GET', `/api/v1/replicas?model=${model}`);
    return body.some((r) => r.state === 'ready' && (r.load?.waiting ?? 0) >= 1) ? true : undefined;
  });
}

/** The record of the request with this x-request-id in fleet A's request log. */
async function record(id: string) {
  const { body } = await local.api<RequestsView>('GET', `/api/v1/requests?id=${encodeURIComponent(id)}`);
  expect(body.requests.length, `a record of ${id}`).toBe(1);
  return body.requests[0]!;
}

/** Requests fleet B billed to fleet A's key for `model`, once its counts reach `atLeast`. */
async function peerUsage(model: string, atLeast = 0): Promise<number> {
  const keyId = peer.keys['fleet-a']!.id;
  return waitFor(`the peer's usage of ${model} to reach ${atLeast}`, async () => {
    const { body } = await peer.api<UsageView[]>('GET', '/api/v1/usage');
    const n = body.filter((u) => u.key_id === keyId && u.model === model).reduce((sum, u) => sum + u.requests, 0);
    return n >= atLeast ? n : undefined;
  });
}

async function remoteView(model: string): Promise<ModelView['remote']> {
  const { body } = await local.api<ModelView[]>('GET', '/api/v1/models');
  return body.find((m) => m.name === model)?.remote;
}

describe('a peer llmgw as a federated remote', () => {
  it("reads the peer's models, capacity and load from its API, and routes to it with the peer's own key", async () => {
    const seen = await waitFor('a probe of the peer', async () => {
      const v = await remoteView('peer-big');
      return v?.ready !== undefined ? v : undefined;
    });
    expect(seen).toEqual({ healthy: true, reason: '', ready: 1, running: 0, waiting: 0 });
    expect((await remoteView('busy')) === undefined, 'a local model has no remote health').toBe(true);
    const env = { LLMGW_ADMIN_URL: local.adminUrl, LLMGW_ADMIN_TOKEN: local.adminToken };
    const ctl = await runCtlCli(['model', 'peer-big'], { env, timeoutMs: 120_000 });
    expect(ctl.code, ctl.stderr).toBe(0);
    expect(ctl.stdout, 'ctl shows what was read of the peer').toContain(
      'remote     in routing; peer: 1 ready, 0 running, 0 waiting',
    );

    const before = await peerUsage('big');
    const res = await chat(local, 'client', 'peer-big', 4, 'fed-1');
    expect(res.status, res.text).toBe(200);
    const r = await record('fed-1');
    expect(r.replica, 'served by the peer as one more replica set').toBe('remote:peer-big');
    expect(await peerUsage('big', before + 1), 'billed by the peer to the key it issued to fleet A').toBe(before + 1);
  }, 120_000);

  it("stays local while the peer's own fleet queues: the peer's load changes what this fleet does", async () => {
    // Fill the peer's one-at-a-time model directly, then this fleet's, both to a queue.
    const peerHolds = hold(peer, 'direct', 'small', 4, 200);
    const seenQueue = await waitFor("the peer's queue read by this fleet's probe", async () => {
      const v = await remoteView('peer-small');
      return (v?.waiting ?? 0) >= 1 ? v : undefined;
    });
    expect(seenQueue!.healthy).toBe(true);
    const localHolds = hold(local, 'client', 'crowded', 2, 60);
    await queueSeen(local, 'crowded');
    const before = await peerUsage('small');

    const res = await chat(local, 'client', 'crowded', 4, 'crowded-1');
    expect(res.status, res.text).toBe(200);
    const r = await record('crowded-1');
    expect(r.replica?.startsWith('remote:'), `served by ${r.replica}`).toBe(false);
    expect(r.attempts[0]?.rule, 'the rule names the queue at the peer').toMatch(
      /^local \(predicted wait .+ > 100 ms; peer-small queues \d+ too\)$/,
    );
    expect(await localHolds).toEqual([200, 200]);
    expect(await peerHolds).toEqual([200, 200, 200, 200]);
    expect(await peerUsage('small'), 'nothing of this fleet reached the queueing peer').toBe(before);
  }, 300_000);
});

describe('spill-over to the peer', () => {
  it('sends requests past local capacity to the peer, each record naming the rule', async () => {
    const holds = hold(local, 'client', 'busy', 3, 120);
    await queueSeen(local, 'busy');
    const before = await peerUsage('big');
    const spilled = 4;
    for (let i = 0; i < spilled; i++) {
      const res = await chat(local, 'client', 'busy', 4, `sat-${i}`);
      expect(res.status, res.text).toBe(200);
      const r = await record(`sat-${i}`);
      expect(r.replica, `sat-${i} went to the peer`).toBe('remote:peer-big');
      expect(r.attempts[0]?.rule).toMatch(/^spill:saturated \(predicted wait .+ > 100 ms\) -> peer-big$/);
    }
    expect(await holds, 'the requests already queued locally were answered locally').toEqual([200, 200, 200]);
    expect(await peerUsage('big', before + spilled), 'the peer served exactly the spilled requests').toBe(
      before + spilled,
    );
  }, 300_000);

  it('never spills a model whose policy is never, however long its queue', async () => {
    const holds = hold(local, 'client', 'held', 2, 60);
    await queueSeen(local, 'held');
    const before = await peerUsage('big');
    const res = await chat(local, 'client', 'held', 4, 'never-1');
    expect(res.status, res.text).toBe(200);
    const r = await record('never-1');
    expect(r.replica?.startsWith('remote:'), `served by ${r.replica}`).toBe(false);
    expect(r.attempts.map((a) => a.rule)).toEqual(['local (spill: never)']);
    expect(await holds).toEqual([200, 200]);
    expect(await peerUsage('big'), 'nothing reached the peer').toBe(before);
  }, 300_000);

  it('sends requests to the peer while a cold local replica starts, and local once it is ready', async () => {
    const { body: none } = await local.api<ReplicaView[]>('GET', '/api/v1/replicas?model=cold');
    expect(none, 'cold starts at zero').toEqual([]);
    const res = await chat(local, 'client', 'cold', 4, 'cold-1');
    expect(res.status, res.text).toBe(200);
    const first = await record('cold-1');
    expect(first.replica).toBe('remote:peer-big');
    expect(first.attempts[0]?.rule).toBe('spill:cold (no local replica ready) -> peer-big');
    expect(first.held_ms, 'not held for the cold start').toBeUndefined();
    // The request asked for a local replica; the reconciler places it on its next pass.
    const starting = await waitFor('a local replica of cold', async () => {
      const { body } = await local.api<ReplicaView[]>('GET', '/api/v1/replicas?model=cold');
      return body.length ? body : undefined;
    });
    expect(starting.length, 'one replica started for it').toBe(1);
    expect(starting[0]!.state, 'the sim takes 15 s to start').not.toBe('ready');
    const meanwhile = await chat(local, 'client', 'cold', 4, 'cold-2');
    expect(meanwhile.status, meanwhile.text).toBe(200);
    const second = await record('cold-2');
    expect([second.replica, second.attempts[0]?.rule], 'sent to the peer while the local replica starts').toEqual([
      'remote:peer-big',
      'spill:cold (no local replica ready) -> peer-big',
    ]);

    await waitFor(
      'the local replica of cold to be ready',
      async () => {
        const { body } = await local.api<ReplicaView[]>('GET', '/api/v1/replicas?model=cold');
        return body.some((r) => r.state === 'ready') ? true : undefined;
      },
      120_000,
    );
    const again = await chat(local, 'client', 'cold', 4, 'cold-3');
    expect(again.status, again.text).toBe(200);
    const third = await record('cold-3');
    expect(third.replica?.startsWith('remote:'), `served by ${third.replica}`).toBe(false);
    expect(third.attempts[0]?.rule).toMatch(/^local /);
  }, 300_000);
});
