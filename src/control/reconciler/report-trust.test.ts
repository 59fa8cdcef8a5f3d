// What a node's heartbeat may say of shards. Guards against issue 33: a node
// that joined with the shared join token and was never approved reported
// another node's replica with 1000 running and 1000 waiting, and the control
// plane took it: the router sent that replica nothing and the scaler grew the
// model to scaling.max. Its fetch progress could be forged the same way, and
// an approved node could do both.
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
import { ShardIndex } from './fold-report.js';
import { Reconciler } from './reconciler.js';
import { screenReport } from './report-trust.js';
import type { ReplicaRecord, ReplicaState, ShardRecord } from './types.js';
import { replicaRecord, shardRecord } from '../../../test/support/reconciler-records.js';

const shard = (id: string, over: Partial<ShardRecord> = {}): ShardRecord => shardRecord({ id, ...over });
const replica = (id: string, state: ReplicaState, shards: ShardRecord[]): ReplicaRecord =>
  replicaRecord(id, { state, shards });

// r0 on n1; r1 across n2 (rank 0, the API) and n1 (rank 1); r2 on n2.
const records: ReplicaRecord[] = [
  replica('r0', 'ready', [shard('a0')]),
  replica('r1', 'ready', [shard('b0', { nodeId: 'n2' }), shard('b1', { rank: 1 })]),
  replica('r2', 'fetching', [shard('c0', { nodeId: 'n2', state: 'fetching' })]),
];
const HUGE = { running: 1000, waiting: 1000, age_ms: 0 };

describe('screenReport', () => {
  it("believes a node's own shards, as reported and in order", () => {
    const own: ShardStatus[] = [
      {
        shard_id: 'a0',
        replica_id: 'r0',
        state: 'ready',
        endpoint: 'http://10.0.0.1:9000',
        load: { running: 2, waiting: 0, age_ms: 10 },
      },
      { shard_id: 'b1', replica_id: 'r1', state: 'ready' },
    ];
    expect(screenReport(records, 'n1', true, own)).toEqual({ believed: own, refused: [] });
  });

  it("refuses another node's shard whole: its state, its load and its fetch progress", () => {
    const forged: ShardStatus[] = [
      { shard_id: 'b0', replica_id: 'r1', state: 'failed', load: HUGE },
      { shard_id: 'c0', replica_id: 'r2', state: 'fetching', fetch: { bytes_done: 99, total_bytes: 100 } },
    ];
    const out = screenReport(records, 'n1', true, forged);
    expect(out.believed, 'nothing of n2 believed from n1').toEqual([]);
    expect(out.refused).toEqual([
      { shardId: 'b0', replicaId: 'r1', reason: 'not_assigned' },
      { shardId: 'c0', replicaId: 'r2', reason: 'not_assigned' },
    ]);
  });

  it("refuses its own shard under another replica's id: the load would land on that replica", () => {
    const out = screenReport(records, 'n1', true, [{ shard_id: 'a0', replica_id: 'r2', state: 'ready', load: HUGE }]);
    expect(out).toEqual({ believed: [], refused: [{ shardId: 'a0', replicaId: 'r2', reason: 'not_assigned' }] });
  });

  it('refuses a shard no replica has', () => {
    const out = screenReport(records, 'n1', true, [{ shard_id: 'gone', replica_id: 'r9', state: 'stopping' }]);
    expect(out).toEqual({ believed: [], refused: [{ shardId: 'gone', replicaId: 'r9', reason: 'unknown_shard' }] });
  });

  it('believes nothing from a node that waits for approval, not even of shards assigned to it', () => {
    const out = screenReport(records, 'n1', false, [{ shard_id: 'a0', replica_id: 'r0', state: 'failed', load: HUGE }]);
    expect(out).toEqual({ believed: [], refused: [{ shardId: 'a0', replicaId: 'r0', reason: 'node_pending' }] });
  });

  it("takes a replica's load only from its rank 0: a rank 1 shard's state is believed, its load is not", () => {
    const out = screenReport(records, 'n1', true, [
      { shard_id: 'b1', replica_id: 'r1', state: 'ready', endpoint: 'http://10.0.0.1:9001', load: HUGE },
    ]);
    expect(out.believed).toEqual([
      { shard_id: 'b1', replica_id: 'r1', state: 'ready', endpoint: 'http://10.0.0.1:9001' },
    ]);
    expect(out.refused).toEqual([{ shardId: 'b1', replicaId: 'r1', reason: 'not_api_shard' }]);
  });

  it('answers the same over a ShardIndex as over a walk of the records', () => {
    const index = new ShardIndex();
    const mixed: ShardStatus[] = [
      { shard_id: 'a0', replica_id: 'r0', state: 'ready' },
      { shard_id: 'b0', replica_id: 'r1', state: 'ready', load: HUGE },
      { shard_id: 'b1', replica_id: 'r1', state: 'ready', load: HUGE },
      { shard_id: 'zz', replica_id: 'r0', state: 'ready' },
    ];
    for (const node of ['n1', 'n2', 'n3'])
      expect(screenReport(records, node, true, mixed, index), node).toEqual(screenReport(records, node, true, mixed));
    expect(index.holding(records, 'c0')).toBe(2);
    expect(index.holding(records, 'nope')).toBeUndefined();
  });
});

// The reconciler around the screen: what the router, the scaler and the views read after forged heartbeats.
describe('Reconciler.onShardReport', () => {
  const closers: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const c of closers.splice(0).reverse()) await c();
  });

  async function setup() {
    let clock = 1_000_000;
    const now = () => clock;
    const lines: { level: number; msg: string; node?: string; reason?: string }[] = [];
    const logger = pino(
      { level: 'info' },
      { write: (line: string) => void lines.push(JSON.parse(line) as (typeof lines)[number]) },
    );
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-report-trust-'));
    const store = await Store.open({ location: { kind: 'sqlite', path: join(dir, 'db') }, now });
    const catalog = await Catalog.create({ store });
    const inventory = await Inventory.create({
      store,
      now,
      staleAfterMs: 15_000,
      lostAfterMs: 60_000,
      flushIntervalMs: 0,
      joinApproval: 'manual',
    });
    const assignments = new AssignmentBoard(1);
    const registry = new Registry();
    let ids = 0;
    const reconciler = await Reconciler.create({
      catalog,
      inventory,
      assignments,
      store,
      now,
      logger,
      intervalMs: 60_000,
      registry,
      newId: (kind) => `${kind}-${ids++}`,
    });
    closers.push(async () => {
      await reconciler.stop();
      await inventory.close();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    });
    const joinNode = async (id: string) => {
      await inventory.join({ id, hostname: id, mgmtAddr: null, labels: {}, agentVersion: '1', protocolVersion: 1 });
      inventory.heartbeat(inventory.get(id)!, {
        report: { gpus: [{ index: 0, class: 'h100-80gb', problems: [] }], engines: [{ name: 'vllm' }] },
      });
    };
    await joinNode('real');
    await inventory.approve('real', 'test');
    await joinNode('evil');
    await catalog.add(
      {
        name: 'demo',
        source: 'hf://org/demo',
        scaling: { min: 1, max: 4, target_inflight: 1, window: '1s' },
        profiles: [{ name: 'gpu', engine: 'vllm', gpus: 1 }],
      },
      'test',
    );
    await reconciler.pass();
    const [placed] = reconciler.replicas();
    const real = assignments.get('real').shards[0]!;
    const own: ShardStatus = {
      shard_id: real.shard_id,
      replica_id: real.replica_id,
      state: 'ready',
      endpoint: 'http://10.0.0.1:9000',
    };
    reconciler.onShardReport(inventory.get('real')!, [own]);
    await reconciler.pass();
    const refusals = async (reason: string) =>
      (await registry.getSingleMetric('llmgw_agent_reports_refused_total')!.get()).values.find(
        (v) => v.labels.reason === reason,
      )?.value ?? NaN;
    return { inventory, reconciler, placed: placed!, own, lines, refusals, advance: (ms: number) => (clock += ms) };
  }

  it("takes no load, fetch progress or state from a pending node that names an approved node's replica, counts it and logs it once a minute", async () => {
    const t = await setup();
    expect(
      t.reconciler.view.ready('demo').map((r) => r.id),
      'the real node serves the replica',
    ).toEqual([t.placed.id]);
    expect(t.inventory.get('evil')!.approval).toBe('pending');
    const forged: ShardStatus[] = [
      { ...t.own, state: 'fetching', load: HUGE, fetch: { bytes_done: 99, total_bytes: 100 } },
    ];
    for (let i = 0; i < 5; i++) t.reconciler.onShardReport(t.inventory.get('evil')!, forged);
    await t.reconciler.pass();
    expect(t.reconciler.loadOf(t.placed.id), 'the router and the scaler see no forged load').toBeUndefined();
    expect(t.reconciler.view.ready('demo')[0], 'still routable, with no load').not.toHaveProperty('load');
    expect(t.reconciler.fetchProgress(t.own.shard_id), 'no forged progress').toBeUndefined();
    expect(
      t.reconciler.replicas().map((r) => [r.id, r.state]),
      "the state is the real node's",
    ).toEqual([[t.placed.id, 'ready']]);
    expect(await t.refusals('node_pending'), 'each forged status counted').toBe(5);
    const logged = () => t.lines.filter((l) => l.node === 'evil' && l.reason === 'node_pending');
    expect(logged(), 'one line for five heartbeats').toHaveLength(1);
    expect(logged()[0]!.msg).toContain('llmgw ctl nodes approve evil');
    t.advance(60_000);
    t.reconciler.onShardReport(t.inventory.get('evil')!, forged);
    expect(logged(), 'and one more a minute later').toHaveLength(2);
  });

  it('takes none of it from an approved node either, while the node the shard is assigned to is believed', async () => {
    const t = await setup();
    await t.inventory.approve('evil', 'test');
    const forged: ShardStatus[] = [{ ...t.own, state: 'failed', error: 'forged', load: HUGE }];
    t.reconciler.onShardReport(t.inventory.get('evil')!, forged);
    await t.reconciler.pass();
    expect(t.reconciler.loadOf(t.placed.id)).toBeUndefined();
    expect(
      t.reconciler.replicas().map((r) => [r.id, r.state, r.error]),
      "not failed by another node's word",
    ).toEqual([[t.placed.id, 'ready', null]]);
    expect(await t.refusals('not_assigned')).toBe(1);
    expect(
      t.lines.filter((l) => l.node === 'evil' && l.reason === 'not_assigned' && l.level === 40),
      'logged as a warning',
    ).toHaveLength(1);

    // The rule is the shard's owner, not a blanket refusal: the real node's own sample is taken.
    t.reconciler.onShardReport(t.inventory.get('real')!, [{ ...t.own, load: { running: 3, waiting: 1, age_ms: 0 } }]);
    expect(t.reconciler.loadOf(t.placed.id)).toMatchObject({ running: 3, waiting: 1 });
    expect(await t.refusals('node_pending'), 'the other reasons stay at 0').toBe(0);
  });

  it('holds what a node that went back to pending (its GPUs changed) says of its own shards until it is approved again', async () => {
    const t = await setup();
    const real = t.inventory.get('real')!;
    real.approval = 'pending';
    const failed: ShardStatus[] = [{ ...t.own, state: 'failed', error: 'oom' }];
    t.reconciler.onShardReport(real, failed);
    await t.reconciler.pass();
    expect(
      t.reconciler.replicas().map((r) => [r.id, r.state]),
      'held: the replica stays as last believed',
    ).toEqual([[t.placed.id, 'ready']]);
    await t.inventory.approve('real', 'test');
    t.reconciler.onShardReport(real, failed);
    await t.reconciler.pass();
    expect(
      t.reconciler.replicas().map((r) => [r.id, r.state]),
      'approved, its word counts again',
    ).toEqual([[t.placed.id, 'failed']]);
  });
});
