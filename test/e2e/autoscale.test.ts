// Autoscaling end to end with real processes: a control plane, two simulated
// agents and sim engines whose per-token delay keeps requests in flight. A
// load generator ramps up and stops; replicas go from min to what
// target_inflight implies and back after idle_timeout, and no request fails
// on the way, drains included. A model at zero starts one replica for twenty
// concurrent first requests and serves them all. Windows and timeouts are
// short in the catalog so the test is quick; every wait is a condition with
// a generous deadline, never a measured speed.
import { mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EventView, EventsView, ReplicaView } from '../../src/api/types.js';
import { killEnginesOf, startControl, stopAll, type ControlUrls } from '../support/processes.js';
import { JOIN, startSimAgent } from '../support/fleet.js';
import { waitFor } from '../support/wait.js';

const ADMIN = 'e2e-admin-token-0123456789abcdef';
const headers = { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json', 'x-llmgw-actor': 'e2e' };
const stateDirs: string[] = [];
let urls: ControlUrls;
let dir: string;

/** Engines of each agent get ports from their own slice of 28100-28299 (the fixed range this suite may use). */
function startAgent(id: string, first: number) {
  const stateDir = join(dir, id);
  stateDirs.push(stateDir);
  return startSimAgent(urls.agent, stateDir, id, { first, count: 100 });
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'llmgw-e2e-autoscale-'));
  const control = await startControl([
    '--store',
    `sqlite:${join(dir, 'db')}`,
    '--join-token',
    JOIN,
    '--admin-token',
    ADMIN,
    '--api-keys',
    'off',
    '--reconcile-interval',
    '300ms',
    '--log-level',
    'warn',
  ]);
  urls = control.urls;
  startAgent('a1', 28100);
  startAgent('a2', 28200);
  await waitFor('two nodes up', async () => {
    const nodes = (await (await fetch(`${urls.admin}/api/v1/nodes`, { headers })).json()) as { liveness: string }[];
    return nodes.length === 2 && nodes.every((n) => n.liveness === 'up') ? true : undefined;
  });
});

afterAll(async () => {
  await stopAll();
  killEnginesOf(stateDirs);
});

function weights(name: string): string {
  const w = join(dir, 'weights', name);
  mkdirSync(w, { recursive: true });
  return `file://${w}`;
}

async function addModel(def: Record<string, unknown>): Promise<void> {
  const res = await fetch(`${urls.admin}/api/v1/models`, { method: 'POST', headers, body: JSON.stringify(def) });
  expect(res.status, await res.clone().text()).toBe(200);
}

async function replicas(model: string): Promise<ReplicaView[]> {
  return (await (await fetch(`${urls.admin}/api/v1/replicas?model=${model}`, { headers })).json()) as ReplicaView[];
}

async function events(model: string): Promise<EventView[]> {
  return (
    (await (await fetch(`${urls.admin}/api/v1/events?model=${model}&limit=1000`, { headers })).json()) as EventsView
  ).events;
}

const COUNTING = new Set(['pending', 'fetching', 'starting', 'ready']);

/** One chat completion through the router; resolves with the status and, for a failure, the body. */
async function chat(model: string, maxTokens: number): Promise<{ status: number; body: string }> {
  const res = await fetch(`${urls.client}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hello' }], max_tokens: maxTokens }),
  });
  const body = await res.text();
  return { status: res.status, body: res.status === 200 ? '' : body };
}

/** `workers` loops, each sending one request after another until stopped; every answer that is not 200 is kept. */
function load(model: string, workers: number, maxTokens: number) {
  let running = true;
  const failures: string[] = [];
  let served = 0;
  const loops = Array.from({ length: workers }, async () => {
    while (running) {
      const r = await chat(model, maxTokens).catch((err: unknown) => ({ status: 0, body: String(err) }));
      if (r.status === 200) served++;
      else failures.push(`${r.status} ${r.body}`);
    }
  });
  return {
    failures,
    served: () => served,
    async stop() {
      running = false;
      await Promise.all(loops);
    },
  };
}

describe('autoscaling end to end', () => {
  it('scales a busy model from min to what target_inflight implies, and back to min after the idle timeout, failing no request', async () => {
    // 20 tokens a second and 40 tokens a request: each request stays in flight about 2 s.
    await addModel({
      name: 'busy',
      source: weights('busy'),
      scaling: { min: 1, max: 4, target_inflight: 2, window: '2s', idle_timeout: '3s', cooldown: '1s' },
      profiles: [{ engine: 'sim', args: ['--tokens-per-second', '20'] }],
    });
    await waitFor('one ready replica of busy', async () => {
      const list = await replicas('busy');
      return list.length === 1 && list[0]!.state === 'ready' ? true : undefined;
    });

    // Eight requests in flight at all times over a target of two per replica: four replicas.
    const heavy = load('busy', 8, 40);
    const scaledUp = await waitFor(
      'busy scaled to 4 ready replicas',
      async () => {
        const list = await replicas('busy');
        return list.filter((r) => r.state === 'ready').length === 4 ? list : undefined;
      },
      90_000,
    );
    expect(new Set(scaledUp.map((r) => r.shards[0]!.node)).size, 'the new replicas spread over both nodes').toBe(2);
    await waitFor('the new replicas to serve', async () => (heavy.served() > 40 ? true : undefined), 60_000);
    await heavy.stop();
    expect(heavy.failures, 'no request failed while scaling up').toEqual([]);

    // A trickle goes on while the idle replicas drain: none of its requests may fail.
    const trickle = load('busy', 1, 4);
    await waitFor(
      'busy back to min (1) after the idle timeout',
      async () => {
        const list = await replicas('busy');
        return list.filter((r) => COUNTING.has(r.state)).length === 1 && list.every((r) => r.state !== 'draining')
          ? true
          : undefined;
      },
      90_000,
    );
    await trickle.stop();
    expect(trickle.served(), 'the trickle was served throughout').toBeGreaterThan(0);
    expect(trickle.failures, 'no request failed during scale-down').toEqual([]);

    const log = await events('busy');
    const scales = log.filter((e) => e.kind === 'scale').reverse();
    expect(scales[0], "the first decision is the model's min").toMatchObject({
      from: 0,
      to: 1,
      message: expect.stringContaining('scaling.min is 1'),
    });
    // Each step up is ceil(demand / target) for the demand it saw (the generator's ramp may show as more than one step).
    const ups = scales.slice(1).filter((e) => e.to! > e.from!);
    expect(ups.length, `scale-ups in the events: ${JSON.stringify(scales)}`).toBeGreaterThan(0);
    for (const e of ups)
      expect(e.message, 'every scale-up says what demand over which target').toMatch(
        /request\(s\) in flight or waiting over \d+ replica\(s\) stayed above target_inflight 2/,
      );
    expect(ups.at(-1)!.to, 'up to what eight requests over a target of two imply').toBe(4);
    expect(scales.at(-1), 'the last decision is back to min').toMatchObject({
      to: 1,
      message: expect.stringContaining('idle'),
    });
    expect(log.filter((e) => e.kind === 'drain').length, 'scale-down drained three replicas').toBeGreaterThanOrEqual(3);
  }, 240_000);

  it('starts exactly one replica of a model at zero for twenty concurrent first requests, serves them all, and goes back to zero', async () => {
    await addModel({
      name: 'cold',
      source: weights('cold'),
      // A high target: twenty waiting requests are one cold start, not a reason to scale up further.
      scaling: { min: 0, max: 3, target_inflight: 32, idle_timeout: '3s', cooldown: '1s' },
      profiles: [{ engine: 'sim', args: ['--startup-delay-ms', '1500'] }],
    });
    expect(await replicas('cold'), 'min 0: nothing runs before a request').toEqual([]);

    const answers = await Promise.all(Array.from({ length: 20 }, () => chat('cold', 4)));
    expect(
      answers.filter((a) => a.status !== 200),
      'every first request is served after the cold start',
    ).toEqual([]);

    const started = (await events('cold')).filter((e) => e.kind === 'scale' && (e.to ?? 0) > (e.from ?? 0));
    expect(started, 'one scale-up, from 0 to 1').toEqual([expect.objectContaining({ from: 0, to: 1 })]);
    const list = await replicas('cold');
    expect(
      list.filter((r) => COUNTING.has(r.state)).map((r) => r.state),
      'exactly one replica was started',
    ).toEqual(['ready']);

    await waitFor(
      'cold back to zero after the idle timeout',
      async () => ((await replicas('cold')).length === 0 ? true : undefined),
      60_000,
    );
    const last = (await events('cold')).find((e) => e.kind === 'scale');
    expect(last, 'the newest decision is back to zero').toMatchObject({ from: 1, to: 0 });
  }, 180_000);
});
