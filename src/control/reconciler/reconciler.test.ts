import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import type { ShardStatus } from '../../protocol/index.js';
import { AssignmentBoard } from '../agentapi/index.js';
import { Catalog } from '../catalog/index.js';
import { Inventory } from '../inventory/index.js';
import { Store } from '../store/index.js';
import type { ReplicaDirectory } from '../../gateway/index.js';
import type { NewEvent } from '../events/events.js';
import type { DemandSnapshot, ReplicaUse } from '../scaling/index.js';
import { Reconciler, type ReconcilerOptions } from './reconciler.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** A control plane's reconciler with its real neighbours over one SQLite file; `reopen` starts a second one on it, as a restart would. */
async function setup(reuse?: string, extra: Partial<ReconcilerOptions> = {}, startMs = 1_000_000) {
  const dir = reuse ?? mkdtempSync(join(tmpdir(), 'llmgw-reconciler-'));
  if (!reuse) cleanups.push(async () => rmSync(dir, { recursive: true, force: true }));
  let clock = startMs;
  const now = () => clock;
  const store = await Store.open({ location: { kind: 'sqlite', path: join(dir, 'db') }, now });
  const catalog = await Catalog.create({ store });
  const inventory = await Inventory.create({
    store,
    now,
    staleAfterMs: 15_000,
    lostAfterMs: 60_000,
    flushIntervalMs: 0,
  });
  const assignments = new AssignmentBoard(1);
  let ids = 0;
  const reconciler = await Reconciler.create({
    catalog,
    inventory,
    assignments,
    store,
    now,
    logger: pino({ level: 'silent' }),
    intervalMs: 60_000,
    newId: (kind) => `${kind}-${dir.slice(-6)}-${ids++}`,
    ...extra,
  });
  cleanups.push(async () => {
    await reconciler.stop();
    await inventory.close();
    await store.close();
  });
  return {
    dir,
    store,
    catalog,
    inventory,
    assignments,
    reconciler,
    advance: (ms: number) => (clock += ms),
    /** An agent joining and reporting a node with `gpus` healthy GPUs and the sim engine. */
    async node(id: string, gpus = 2) {
      await inventory.join({ id, hostname: id, mgmtAddr: null, labels: {}, agentVersion: '1', protocolVersion: 1 });
      inventory.heartbeat(inventory.get(id)!, {
        report: {
          gpus: Array.from({ length: gpus }, (_, index) => ({ index, class: 'h100-80gb', problems: [] })),
          engines: [{ name: 'sim' }, { name: 'vllm' }],
        },
      });
    },
    heartbeat(id: string) {
      inventory.heartbeat(inventory.get(id)!, {});
    },
    /** The agent on `nodeId` reports every shard it was assigned in `state`. */
    async report(nodeId: string, state: ShardStatus['state'], endpoint?: (shardId: string) => string) {
      const shards: ShardStatus[] = assignments.get(nodeId).shards.map((a) => ({
        shard_id: a.shard_id,
        replica_id: a.replica_id,
        state,
        ...(endpoint ? { endpoint: endpoint(a.shard_id) } : {}),
      }));
      reconciler.onShardReport(inventory.get(nodeId)!, shards);
      await reconciler.pass();
    },
  };
}

/** A first control plane whose demo replica is placed on n1 and reported ready at http://n1:9000. */
async function servingDemo() {
  const first = await setup();
  await first.node('n1');
  await first.catalog.add(demo, 'test');
  await first.reconciler.pass();
  await first.report('n1', 'ready', () => 'http://n1:9000');
  return first;
}

const demo = {
  name: 'demo',
  aliases: ['d'],
  source: 'hf://org/demo',
  profiles: [{ name: 'gpu', engine: 'vllm', gpus: 1, args: ['--x'], env: { A: '1' } }],
};

describe('Reconciler', () => {
  it('places a model, delivers its shard to the agent, and marks it ready from the agent report', async () => {
    const t = await setup();
    await t.node('n1');
    await t.catalog.add(demo, 'test');
    await t.reconciler.pass();

    const [replica] = t.reconciler.replicas();
    expect(replica).toMatchObject({ model: 'demo', profile: 'gpu', state: 'pending' });
    const { shards } = t.assignments.get('n1');
    expect(shards).toEqual([
      {
        shard_id: replica!.shards[0]!.id,
        replica_id: replica!.id,
        model: 'demo',
        aliases: ['d'],
        source: 'hf://org/demo',
        profile: { name: 'gpu', engine: 'vllm', gpus: 1, shards: 1, args: ['--x'], env: { A: '1' } },
        rank: 0,
        gpu_indices: [0],
        peers: [],
        engine_secret: replica!.engineSecret,
      },
    ]);

    await t.report('n1', 'fetching');
    expect(t.reconciler.replicas()[0]!.state).toBe('fetching');
    await t.report('n1', 'ready', () => 'http://n1:9000');
    expect(t.reconciler.replicas()[0]).toMatchObject({ state: 'ready', endpoint: 'http://n1:9000' });
    expect(t.reconciler.replicaCounts().get('demo')).toEqual({ ready: 1, total: 1 });
    expect(t.reconciler.nodeUsage().get('n1')).toEqual({ replicas: 1, gpusInUse: new Set([0]) });
    expect((await t.store.replicas.list())[0], 'the store holds what the agent reported').toMatchObject({
      state: 'ready',
      endpoint: 'http://n1:9000',
    });
  });

  it("gives the router each ready replica's engine load, dated by its age, and drops it when the agent stops sending one", async () => {
    const t = await setup();
    await t.node('n1');
    await t.catalog.add(demo, 'test');
    await t.reconciler.pass();
    await t.report('n1', 'ready', () => 'http://n1:9000');
    expect(t.reconciler.view.ready('demo')[0], 'no sample yet').not.toHaveProperty('load');
    const [a] = t.assignments.get('n1').shards;
    const status: ShardStatus = {
      shard_id: a!.shard_id,
      replica_id: a!.replica_id,
      state: 'ready',
      endpoint: 'http://n1:9000',
    };
    t.reconciler.onShardReport(t.inventory.get('n1')!, [
      { ...status, load: { running: 3, waiting: 2, kv_usage: 0.5, age_ms: 400 } },
    ]);
    expect(t.reconciler.view.ready('demo')[0]?.load, 'read 400 ms before the heartbeat arrived').toEqual({
      running: 3,
      waiting: 2,
      kvUsage: 0.5,
      sampledAtMs: 1_000_000 - 400,
    });
    // A report the store passed on late, older than what is held: ignored.
    t.reconciler.onShardReport(
      t.inventory.get('n1')!,
      [{ ...status, load: { running: 9, waiting: 9, age_ms: 0 } }],
      1_000_000 - 1000,
    );
    expect(t.reconciler.view.ready('demo')[0]?.load?.running).toBe(3);
    t.reconciler.onShardReport(t.inventory.get('n1')!, [status]);
    expect(t.reconciler.view.ready('demo')[0], 'the engine stopped answering its metrics').not.toHaveProperty('load');
  });

  it("gives the router where each ready replica's engine publishes its KV events, and drops it when the agent stops saying", async () => {
    const t = await setup();
    await t.node('n1');
    await t.catalog.add(demo, 'test');
    await t.reconciler.pass();
    await t.report('n1', 'ready', () => 'http://n1:9000');
    expect(t.reconciler.view.ready('demo')[0], 'an engine that publishes nothing').not.toHaveProperty('kvEvents');
    const [a] = t.assignments.get('n1').shards;
    const status: ShardStatus = {
      shard_id: a!.shard_id,
      replica_id: a!.replica_id,
      state: 'ready',
      endpoint: 'http://n1:9000',
    };
    const kv = { kind: 'zmq', endpoint: 'tcp://n1:9001', replayEndpoint: 'tcp://n1:9002', topic: 'kv-events' } as const;
    t.reconciler.onShardReport(t.inventory.get('n1')!, [{ ...status, kv_events: kv }]);
    expect(t.reconciler.view.ready('demo')[0]?.kvEvents).toEqual(kv);
    t.reconciler.onShardReport(t.inventory.get('n1')!, [status]);
    expect(t.reconciler.view.ready('demo')[0]).not.toHaveProperty('kvEvents');
  });

  // Engines took no credential: anyone who reached an engine port skipped keys, limits and accounting (issue 17).
  it('makes each replica a secret of its own, sends it to the agent and the router, and keeps it across a restart', async () => {
    const first = await setup();
    await first.node('n1');
    await first.catalog.add({ ...demo, scaling: { min: 2 } }, 'test');
    await first.reconciler.pass();
    const secrets = first.reconciler.replicas().map((r) => r.engineSecret);
    expect(secrets).toHaveLength(2);
    for (const secret of secrets)
      expect(secret, '32 random bytes, base64url, behind llmgw-es-').toMatch(/^llmgw-es-[A-Za-z0-9_-]{43}$/);
    expect(new Set(secrets).size, 'one secret per replica').toBe(2);
    expect(
      first.assignments
        .get('n1')
        .shards.map((a) => a.engine_secret)
        .sort(),
    ).toEqual([...secrets].sort());
    await first.report('n1', 'ready', (shard) => `http://n1:${shard.endsWith('0') ? 9000 : 9001}`);
    expect(
      first.reconciler.view
        .ready('demo')
        .map((r) => r.engineSecret)
        .sort(),
      "the router's view carries it",
    ).toEqual([...secrets].sort());
    await first.reconciler.stop();

    const second = await setup(first.dir);
    expect(
      second.reconciler.replicas().map((r) => r.engineSecret),
      'a restarted control plane can still call the engines',
    ).toEqual(secrets);
    expect(
      second.assignments
        .get('n1')
        .shards.map((a) => a.engine_secret)
        .sort(),
      'and an agent that restarted hears it again',
    ).toEqual([...secrets].sort());
  });

  it('counts its passes, their actions and its replicas by state in Prometheus metrics', async () => {
    const registry = new Registry();
    const t = await setup(undefined, { registry });
    await t.node('n1');
    await t.catalog.add(demo, 'test');
    await t.reconciler.pass();
    await t.report('n1', 'ready', () => 'http://n1:9000');
    const text = await registry.metrics();
    expect(text).toContain('llmgw_reconciler_passes_total 2');
    expect(text).toContain('llmgw_reconciler_actions_total{action="create"} 1');
    expect(text).toContain('llmgw_reconciler_pass_seconds_count 2');
    expect(text).toContain('llmgw_replicas{model="demo",state="ready"} 1');
    expect(text, 'the gauge is the records now, not a stale pending').not.toContain('state="pending"');
  });

  it('a restarted control plane adopts the replicas in its store and tells agents to keep them', async () => {
    const first = await servingDemo();
    const before = first.reconciler.replicas();
    await first.reconciler.stop();

    const second = await setup(first.dir);
    expect(second.reconciler.replicas(), 'the records come back from the store').toEqual(before);
    // The node is known from the store but has not reported since this control plane started; its shards are published anyway.
    expect(
      second.assignments.get('n1').shards.map((s) => s.shard_id),
      'published before any pass',
    ).toEqual([before[0]!.shards[0]!.id]);
    second.heartbeat('n1');
    const plan = await second.reconciler.pass();
    expect(plan.actions, 'nothing is placed again').toEqual([]);
  });

  // Guards the restart race (issue 35): a replica stored as ready was routed to before its agent, restarted too, had
  // started its engine again, and clients got 502 connection refused instead of being held as for a cold start.
  it('routes to a replica stored as ready only once its agent confirms it since the restart, and holds requests meanwhile', async () => {
    const first = await servingDemo();
    expect(first.reconciler.view.ready('demo'), 'ready before the restart').toHaveLength(1);
    await first.reconciler.stop();

    const second = await setup(first.dir, {}, 1_000_000 + 30_000);
    const woken: number[] = [];
    second.reconciler.view.subscribe(() => woken.push(woken.length));
    expect(second.reconciler.replicas()[0]!.state, 'the store still says ready').toBe('ready');
    expect(second.reconciler.view.ready('demo'), 'not routed to on the stored state alone').toEqual([]);
    expect(second.reconciler.view.demand('demo'), 'a request is held: the replica is coming').toBe(true);
    expect(second.reconciler.view.describe('demo')).toBe('1 ready but not yet confirmed by its agent');

    // The restarted agent's first heartbeat: it runs nothing yet, though its node is fresh again.
    second.heartbeat('n1');
    second.reconciler.onShardReport(second.inventory.get('n1')!, []);
    await second.reconciler.pass();
    expect(second.reconciler.view.ready('demo'), 'a fresh agent that runs nothing confirms nothing').toEqual([]);

    await second.report('n1', 'starting');
    expect(second.reconciler.view.ready('demo')).toEqual([]);
    const wokenBefore = woken.length;
    await second.report('n1', 'ready', () => 'http://n1:9100');
    expect(
      second.reconciler.view.ready('demo').map((r) => r.endpoint),
      'routed once reported ready, at the endpoint the agent gave now',
    ).toEqual(['http://n1:9100']);
    expect(woken.length, 'held requests are woken').toBeGreaterThan(wokenBefore);

    await second.report('n1', 'starting');
    expect(second.reconciler.view.ready('demo'), 'a report that it is no longer ready stops routing at once').toEqual(
      [],
    );
  });

  it('a restarted control plane routes at once to replicas its agents still run when they report them ready', async () => {
    const first = await servingDemo();
    await first.reconciler.stop();

    const second = await setup(first.dir, {}, 1_000_000 + 30_000);
    second.heartbeat('n1');
    const replica = second.reconciler.replicas()[0]!;
    second.reconciler.onShardReport(second.inventory.get('n1')!, [
      { shard_id: replica.shards[0]!.id, replica_id: replica.id, state: 'ready', endpoint: 'http://n1:9000' },
    ]);
    expect(
      second.reconciler.view.ready('demo').map((r) => r.id),
      'the engine kept running: no restart, no record change',
    ).toEqual([replica.id]);
  });

  it('a follower routes on the stored state of a node whose heartbeat came after it started, when no report reached it', async () => {
    const first = await servingDemo();
    await first.reconciler.stop();

    const second = await setup(first.dir, { leads: () => false }, 1_000_000 + 30_000);
    expect(second.reconciler.view.ready('demo'), 'the last heartbeat is older than this process').toEqual([]);
    second.advance(1_000);
    second.heartbeat('n1');
    expect(
      second.reconciler.view.ready('demo'),
      'a heartbeat since it started: the leader it reports to keeps the records',
    ).toHaveLength(1);
  });

  it('a control plane restarted after a long outage gives every node its lost window again before replacing anything', async () => {
    const first = await setup();
    await first.node('n1');
    await first.node('n2');
    await first.catalog.add(demo, 'test');
    await first.reconciler.pass();
    const replicaNode = first.reconciler.replicas()[0]!.shards[0]!.nodeId;
    await first.report(replicaNode, 'ready', () => 'http://n:9000');
    const before = first.reconciler.replicas();
    await first.reconciler.stop();

    // Ten minutes down: no heartbeat could reach it, which says nothing of the nodes.
    const second = await setup(first.dir, {}, 1_000_000 + 10 * 60_000);
    const n1 = second.inventory.get('n1')!;
    expect(second.inventory.liveness(n1), 'not heard from yet: stale, not lost').toBe('stale');
    expect((await second.reconciler.pass()).actions, 'nothing is marked lost or placed again').toEqual([]);
    second.heartbeat(replicaNode);
    expect((await second.reconciler.pass()).actions).toEqual([]);
    expect(second.reconciler.replicas()).toEqual(before);
    const silent = replicaNode === 'n1' ? 'n2' : 'n1';
    second.advance(60_000);
    second.heartbeat(replicaNode);
    expect(
      second.inventory.liveness(second.inventory.get(silent)!),
      'silent for the whole window since the restart',
    ).toBe('lost');
  });

  it('keeps the GPUs of a stopping replica while its agent reports the engine still stopping, and gives them to another model once it is gone', async () => {
    const t = await setup();
    await t.node('n1', 1);
    await t.catalog.add(demo, 'test');
    await t.reconciler.pass();
    await t.report('n1', 'ready', () => 'http://n1:9000');
    const [old] = t.reconciler.replicas();
    await t.catalog.remove('demo', 'test');
    await t.catalog.add({ ...demo, name: 'next', aliases: [] }, 'test');
    await t.reconciler.pass();
    expect(t.reconciler.replicas().map((r) => [r.model, r.state])).toEqual([['demo', 'stopping']]);

    const stillStopping = () =>
      t.reconciler.onShardReport(t.inventory.get('n1')!, [
        { shard_id: old!.shards[0]!.id, replica_id: old!.id, state: 'stopping' },
      ]);
    stillStopping();
    await t.reconciler.pass();
    stillStopping();
    await t.reconciler.pass();
    expect(
      t.reconciler.replicas().map((r) => [r.model, r.state]),
      'the engine still holds the GPU: nothing else is placed on it',
    ).toEqual([['demo', 'stopping']]);

    t.reconciler.onShardReport(t.inventory.get('n1')!, []);
    await t.reconciler.pass();
    await t.reconciler.pass();
    expect(t.reconciler.replicas().map((r) => [r.model, r.state])).toEqual([['next', 'pending']]);
  });

  it('replaces the replica of a lost node and forgets the old one', async () => {
    const t = await setup();
    await t.node('a');
    await t.catalog.add(demo, 'test');
    await t.reconciler.pass();
    const first = t.reconciler.replicas()[0]!;
    await t.node('b');
    t.advance(61_000);
    t.heartbeat('b');
    const plan = await t.reconciler.pass();
    expect(plan.actions.map((a) => a.kind)).toEqual(['markLost', 'create']);
    expect(t.assignments.get('b').shards, 'the replacement went to b').toHaveLength(1);
    expect(t.reconciler.replicas().find((r) => r.id === first.id)).toMatchObject({
      state: 'stopping',
      error: 'node a lost',
    });
    await t.reconciler.pass();
    expect(
      t.reconciler.replicas().map((r) => r.id),
      'the lost replica is forgotten',
    ).not.toContain(first.id);
  });

  // Placement nodes are kept between passes (PlacementNodeCache): one kept
  // past a new report would leave the model unplaced on a node that now fits it.
  it('places on what a node reports now, not on what it reported at the last pass', async () => {
    const t = await setup();
    await t.node('n1', 0);
    await t.catalog.add(demo, 'test');
    await t.reconciler.pass();
    expect(t.reconciler.replicas(), 'a node without GPUs takes no GPU replica').toEqual([]);
    t.inventory.heartbeat(t.inventory.get('n1')!, {
      report: { gpus: [{ index: 0, class: 'h100-80gb', problems: [] }], engines: [{ name: 'vllm' }] },
    });
    await t.reconciler.pass();
    expect(
      t.reconciler.replicas().map((r) => r.shards[0]?.nodeId),
      'placed once the node reports a GPU',
    ).toEqual(['n1']);
  });

  it('marks a replica failed from an agent report and keeps the error for the operator', async () => {
    const t = await setup();
    await t.node('n1');
    await t.catalog.add(demo, 'test');
    await t.reconciler.pass();
    const shard = t.assignments.get('n1').shards[0]!;
    t.reconciler.onShardReport(t.inventory.get('n1')!, [
      { shard_id: shard.shard_id, replica_id: shard.replica_id, state: 'failed', error: 'CUDA out of memory' },
    ]);
    await t.reconciler.pass();
    expect(t.reconciler.replicas()[0]).toMatchObject({
      state: 'failed',
      failures: 1,
      error: 'shard 0 on node n1 failed: CUDA out of memory',
    });
    expect(t.assignments.get('n1').shards, 'a failed replica is no longer assigned, so the agent stops it').toEqual([]);
  });

  it('keeps a replica whose agent is restarting its crashed engine in place: starting, the error kept, still assigned', async () => {
    // Guards the double restart: the agent restarting a crashed engine in a second while the control plane failed
    // the replica, told the agent to stop it, and placed it again after a 10 s backoff.
    const t = await setup();
    await t.node('n1');
    await t.catalog.add(demo, 'test');
    await t.reconciler.pass();
    const shard = t.assignments.get('n1').shards[0]!;
    const report: ShardStatus = {
      shard_id: shard.shard_id,
      replica_id: shard.replica_id,
      state: 'failed',
      error: 'engine was killed by SIGKILL',
      restarts: 0,
      restarting: true,
    };
    t.reconciler.onShardReport(t.inventory.get('n1')!, [report]);
    await t.reconciler.pass();
    expect(t.reconciler.replicas()[0]).toMatchObject({ state: 'starting', failures: 0 });
    expect(t.reconciler.replicas()[0]!.shards[0]).toMatchObject({
      state: 'starting',
      error: 'engine was killed by SIGKILL',
    });
    expect(t.assignments.get('n1').shards, 'still assigned: the agent keeps restarting it').toHaveLength(1);
    // Past its in-place budget the agent reports a plain failure: then it is the replica's.
    t.reconciler.onShardReport(t.inventory.get('n1')!, [{ ...report, restarting: undefined }]);
    await t.reconciler.pass();
    expect(t.reconciler.replicas()[0]).toMatchObject({ state: 'failed', failures: 1 });
  });

  it('explains a model that fits nowhere', async () => {
    const t = await setup();
    await t.node('n1', 0);
    await t.catalog.add(demo, 'test');
    await t.reconciler.pass();
    expect(t.reconciler.replicas()).toEqual([]);
    expect(t.reconciler.explain('demo')?.rejections.map((r) => r.code)).toEqual(['no_gpus']);
  });

  it('drains a node make-before-break through agent reports, and forgets the old replica once its agent stops it', async () => {
    const t = await setup();
    await t.node('a', 1);
    await t.catalog.add(demo, 'test');
    await t.reconciler.pass();
    await t.report('a', 'ready', () => 'http://a:1');
    const old = t.reconciler.replicas()[0]!;
    await t.node('b', 1);
    await t.inventory.setState('a', 'draining', 'test');

    await t.reconciler.pass();
    expect(t.assignments.get('b').shards, 'the replacement is assigned to b first').toHaveLength(1);
    expect(t.assignments.get('a').shards, 'the old replica keeps running meanwhile').toHaveLength(1);
    await t.report('b', 'starting');
    expect(t.reconciler.replicas().find((r) => r.id === old.id)!.state).toBe('ready');

    await t.report('b', 'ready', () => 'http://b:1');
    expect(
      t.reconciler.replicas().find((r) => r.id === old.id)!.state,
      'the replacement is ready: the old one drains',
    ).toBe('draining');
    t.advance(1_000);
    await t.reconciler.pass();
    expect(t.reconciler.replicas().find((r) => r.id === old.id)!.state, 'nothing in flight: stopped').toBe('stopping');
    expect(t.assignments.get('a').shards, 'the agent on a is told to stop it').toEqual([]);

    // The agent on a no longer reports the shard: it has stopped, and the record goes.
    t.reconciler.onShardReport(t.inventory.get('a')!, []);
    await t.reconciler.pass();
    expect(t.reconciler.replicas().map((r) => [r.state, r.shards[0]!.nodeId])).toEqual([['ready', 'b']]);
    expect(
      (await t.store.replicas.list()).map((r) => r.id),
      'and the store forgets it too',
    ).toEqual([t.reconciler.replicas()[0]!.id]);
  });

  it('answers the router: ready replicas with their endpoints, why none is ready, and a wake-up when one becomes ready', async () => {
    const t = await setup();
    const directory: ReplicaDirectory = t.reconciler.view;
    await t.node('n1');
    await t.catalog.add(demo, 'test');
    expect(directory.describe('demo')).toBe('the reconciler has not placed one yet');
    await t.reconciler.pass();
    expect(directory.ready('demo')).toEqual([]);
    expect(directory.describe('demo')).toBe('1 pending');
    expect(directory.demand('demo'), 'a replica is on its way').toBe(true);

    let woken = 0;
    const unsubscribe = directory.subscribe!(() => woken++);
    await t.report('n1', 'ready', () => 'http://n1:9000');
    expect(woken).toBeGreaterThan(0);
    unsubscribe();
    expect(directory.ready('demo')).toEqual([
      {
        id: t.reconciler.replicas()[0]!.id,
        endpoint: 'http://n1:9000',
        draining: false,
        engineSecret: t.reconciler.replicas()[0]!.engineSecret,
        engine: 'vllm',
        nodes: ['n1'],
      },
    ]);
  });

  it('tells the router a model that fits nowhere will not come', async () => {
    const t = await setup();
    await t.node('n1', 0);
    await t.catalog.add(demo, 'test');
    await t.reconciler.pass();
    expect(t.reconciler.view.demand('demo')).toBe(false);
    expect(t.reconciler.view.describe('demo')).toMatch(
      /^none can be placed \(1 rejection\(s\); first: .+\); see explain-placement$/,
    );
  });

  it('previews a new model around the replicas scaling keeps, and applies nothing', async () => {
    const t = await setup();
    const demand: DemandSnapshot = { replicas: new Map(), queued: new Map([['demo', 3]]) };
    t.reconciler.attachDemand(() => demand);
    await t.node('n1', 1);
    await t.catalog.add({ ...demo, scaling: { min: 0, max: 1 } }, 'test');
    await t.reconciler.pass();
    expect(
      t.reconciler.replicas().map((r) => r.model),
      'scaled from zero: demo holds the one GPU',
    ).toEqual(['demo']);

    const other = t.catalog.validate({
      name: 'other',
      source: 'hf://org/other',
      profiles: [{ engine: 'vllm', gpus: 1 }],
    });
    const plan = t.reconciler.preview([other]);
    expect(
      plan.actions.filter((a) => a.kind === 'create' && a.model === 'other'),
      'the GPU demo was scaled onto is not offered',
    ).toEqual([]);
    expect(
      plan.actions.filter((a) => a.kind === 'stop' || a.kind === 'drain'),
      'demo is kept at the number scaling gave it',
    ).toEqual([]);
    expect(
      t.reconciler.replicas().map((r) => r.model),
      'a preview changes nothing',
    ).toEqual(['demo']);
  });

  it('after a restart gives an idle replica the whole idle_timeout again: the outage was not idleness', async () => {
    const first = await setup();
    await first.node('n1');
    await first.catalog.add({ ...demo, scaling: { min: 0, max: 2, idle_timeout: '5m' } }, 'test');
    first.reconciler.attachDemand((): DemandSnapshot => ({ replicas: new Map(), queued: new Map([['demo', 1]]) }));
    await first.reconciler.pass();
    await first.report('n1', 'ready', () => 'http://n1:9000');
    const [replica] = first.reconciler.replicas();
    await first.reconciler.stop();

    // Down for ten minutes, twice idle_timeout: no request could reach the replica meanwhile.
    const second = await setup(first.dir, {}, 1_000_000 + 10 * 60_000);
    second.reconciler.attachDemand((): DemandSnapshot => ({ replicas: new Map(), queued: new Map() }));
    second.heartbeat('n1');
    await second.reconciler.pass();
    expect(
      second.reconciler.replicas().map((r) => [r.id, r.state]),
      'kept, not drained at the first pass',
    ).toEqual([[replica!.id, 'ready']]);
    second.advance(5 * 60_000);
    second.heartbeat('n1');
    await second.reconciler.pass();
    expect(second.reconciler.replicas()[0]!.state, 'idle for idle_timeout since the restart: drained').toBe('draining');
  });

  it('an instance that leads again forgets its first stint: the scaler adopts what the other leader scaled to, and idleness counts from the takeover', async () => {
    let leads = true;
    const t = await setup(undefined, { leads: () => leads });
    const use = new Map<string, ReplicaUse>();
    t.reconciler.attachDemand((): DemandSnapshot => ({ replicas: use, queued: new Map() }));
    await t.node('n1', 4);
    await t.catalog.add({ ...demo, scaling: { min: 1, max: 3, target_inflight: 4, idle_timeout: '10m' } }, 'test');
    await t.reconciler.pass();
    await t.report('n1', 'ready', () => 'http://n1:1');
    const [one] = t.reconciler.replicas();

    // Deposed; the other leader scales demo to 3 and this instance, following, reloads them from the store.
    leads = false;
    t.advance(60_000);
    const copy = (i: number) => ({
      ...one!,
      id: `other-${i}`,
      createdAtMs: 1_060_000,
      stateSinceMs: 1_060_000,
      shards: one!.shards.map((s) => ({ ...s, id: `other-sh-${i}`, gpuIndices: [i] })),
    });
    await t.store.replicas.save([copy(1), copy(2)], []);
    await t.reconciler.reload();

    // Hours later, under load that needs all three, it leads again, as Cluster.takeOver does it.
    t.advance(3 * 3_600_000);
    t.heartbeat('n1');
    for (const r of t.reconciler.replicas())
      use.set(r.id, { inFlight: r.id === one!.id ? 4 : 3, lastUsedAtMs: 1_000_000 + 60_000 + 3 * 3_600_000 });
    leads = true;
    t.reconciler.beginLeading();
    const plan = await t.reconciler.pass();
    expect(plan.actions, 'its old wanted number (1) is not applied').toEqual([]);
    expect(t.reconciler.replicas().map((r) => r.state)).toEqual(['ready', 'ready', 'ready']);

    // No use heard at all (requests went through an instance that died with the old leader): a full idle_timeout from the takeover.
    use.clear();
    t.advance(9 * 60_000);
    t.heartbeat('n1');
    await t.reconciler.pass();
    expect(
      t.reconciler.replicas().filter((r) => r.state === 'draining'),
      'nine minutes into the stint: nothing idle yet',
    ).toEqual([]);
  });

  it('starts one replica for a model at zero however many requests wait, records why, and drains it back to zero when idle', async () => {
    const events: NewEvent[] = [];
    const t = await setup(undefined, { events: { record: (e) => events.push(e) } });
    const demand: { replicas: Map<string, ReplicaUse>; queued: Map<string, number> } = {
      replicas: new Map(),
      queued: new Map(),
    };
    t.reconciler.attachDemand((): DemandSnapshot => demand);
    await t.node('n1', 4);
    await t.catalog.add(
      { ...demo, scaling: { min: 0, max: 3, idle_timeout: '3s', cooldown: '1s', target_inflight: 4 } },
      'test',
    );
    await t.reconciler.pass();
    expect(t.reconciler.replicas(), 'min 0: nothing runs before a request').toEqual([]);

    // Twenty requests arrive at once: each asks, the router holds them all.
    const answers = Array.from({ length: 20 }, () => t.reconciler.view.demand('demo'));
    expect(answers.every(Boolean), 'each held request is told a replica is coming').toBe(true);
    demand.queued.set('demo', 20);
    await t.reconciler.pass();
    await t.reconciler.pass();
    expect(
      t.reconciler.replicas().map((r) => r.state),
      'one replica for twenty requests',
    ).toEqual(['pending']);
    expect(events.filter((e) => e.kind === 'scale')).toEqual([
      expect.objectContaining({
        model: 'demo',
        from: 0,
        to: 1,
        message: expect.stringMatching(/no replica.*20 requests wait/),
      }),
    ]);

    await t.report('n1', 'ready', () => 'http://n1:9000');
    const [replica] = t.reconciler.replicas();
    demand.queued.clear();
    demand.replicas.set(replica!.id, { inFlight: 1, lastUsedAtMs: 1_000_000 });
    t.advance(10_000);
    await t.reconciler.pass();
    expect(t.reconciler.replicas()[0]!.state, 'busy, so not idle whatever the clock says').toBe('ready');

    demand.replicas.set(replica!.id, { inFlight: 0, lastUsedAtMs: 1_010_000 });
    t.advance(3_000);
    await t.reconciler.pass();
    expect(t.reconciler.replicas()[0]!.state, 'idle for idle_timeout: drained first').toBe('draining');
    expect(events.map((e) => e.kind)).toEqual(['scale', 'replica_placed', 'replica_ready', 'scale', 'drain']);
    expect(events[1]).toMatchObject({
      model: 'demo',
      replica: replica!.id,
      node: 'n1',
      message: expect.stringMatching(/placed on node n1/),
    });
    expect(events[2]).toMatchObject({
      model: 'demo',
      replica: replica!.id,
      message: expect.stringMatching(/is ready on n1, \d+s after it was placed$/),
    });
    expect(events[3]).toMatchObject({ from: 1, to: 0, message: expect.stringMatching(/idle for 3s/) });
    t.advance(1);
    await t.reconciler.pass();
    expect(t.reconciler.replicas()[0]!.state, 'nothing in flight: stopped').toBe('stopping');
  });
});
