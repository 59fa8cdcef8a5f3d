// What a follower instance sees of the leader's work, through the store
// alone: nodes that joined on the leader, the replicas it placed (told to an
// agent that heartbeats to the follower, so the agent keeps running them),
// their readiness for routing, and admin states. A follower writes no
// replica and runs no pass: two writers would fight over every record.
// Two stacks over one SQLite file stand in for two instances on one
// Postgres: the hooks under test (Reconciler.reload, leads, Inventory.refresh)
// do not depend on the dialect.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { ShardStatus } from '../../protocol/index.js';
import { AssignmentBoard } from '../agentapi/index.js';
import { Catalog } from '../catalog/index.js';
import { Inventory } from '../inventory/index.js';
import { Reconciler } from '../reconciler/index.js';
import { Store } from '../store/index.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

let clock = 1_000_000;
const now = () => clock;

async function instance(dir: string, leads: boolean | undefined, storeLagMs = 0) {
  const store = await Store.open({ location: { kind: 'sqlite', path: join(dir, 'db') }, now });
  const catalog = await Catalog.create({ store });
  const inventory = await Inventory.create({
    store,
    now,
    staleAfterMs: 15_000,
    lostAfterMs: 60_000,
    flushIntervalMs: 0,
    storeLagMs,
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
    newId: (kind) => `${kind}-${ids++}`,
    ...(leads === undefined ? {} : { leads: () => leads }),
  });
  cleanups.push(async () => {
    await reconciler.stop();
    await inventory.close();
    await store.close();
  });
  return { store, catalog, inventory, assignments, reconciler };
}

/** The one node both tests join, as its agent would. */
const N1 = { id: 'n1', hostname: 'n1', mgmtAddr: null, labels: {}, agentVersion: '1', protocolVersion: 1 };

const demo = { name: 'demo', source: 'hf://org/demo', profiles: [{ name: 'gpu', engine: 'vllm', gpus: 1 }] };

describe('a follower instance', () => {
  it('serves what the leader placed, from the store, and writes nothing itself', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-follower-'));
    cleanups.push(async () => rmSync(dir, { recursive: true, force: true }));
    const leader = await instance(dir, undefined);
    const follower = await instance(dir, false);

    await leader.inventory.join(N1);
    leader.inventory.heartbeat(leader.inventory.get('n1')!, {
      report: { gpus: [{ index: 0, class: 'h100-80gb', problems: [] }], engines: [{ name: 'vllm' }] },
    });
    await leader.inventory.flush();
    await leader.catalog.add(demo, 'test');
    await leader.reconciler.pass();
    const [placed] = leader.reconciler.replicas();
    expect(placed).toMatchObject({ model: 'demo', state: 'pending' });

    await follower.inventory.refresh();
    await follower.catalog.reload();
    await follower.reconciler.reload();
    expect(
      follower.inventory.get('n1'),
      'a node that joined on the leader is known here, so its agent may heartbeat here',
    ).toMatchObject({ lastSeenMs: clock });
    expect(follower.reconciler.replicas().map((r) => r.id)).toEqual([placed!.id]);
    expect(
      follower.assignments.get('n1').shards.map((s) => s.shard_id),
      'an agent heartbeating to the follower is told to run the shard, not to stop it',
    ).toEqual(placed!.shards.map((s) => s.id));

    // The agent reports to the follower: nothing is written, no pass runs.
    const shardId = placed!.shards[0]!.id;
    const ready: ShardStatus[] = [
      { shard_id: shardId, replica_id: placed!.id, state: 'ready', endpoint: 'http://n1:9000' },
    ];
    follower.reconciler.onShardReport(follower.inventory.get('n1')!, ready);
    follower.reconciler.notify();
    // A pass notify() started would begin on the next setImmediate turn; let that turn come, and
    // reload() below queues behind any such pass, so no wall-clock wait is needed.
    await new Promise((r) => setImmediate(r));
    await follower.reconciler.reload();
    expect((await follower.store.replicas.list())[0]!.state, 'the follower wrote nothing').toBe('pending');
    expect(follower.reconciler.view.ready('demo')).toEqual([]);

    // The leader hears the report (through the store, in a cluster) and writes; the follower routes on it.
    leader.reconciler.onShardReport(leader.inventory.get('n1')!, ready);
    await leader.reconciler.pass();
    await follower.reconciler.reload();
    expect(
      follower.reconciler.view.ready('demo'),
      "readiness for routing comes from the store, with the leader's engine secret and the profile's engine",
    ).toEqual([
      {
        id: placed!.id,
        endpoint: 'http://n1:9000',
        draining: false,
        engineSecret: placed!.engineSecret,
        engine: 'vllm',
        nodes: ['n1'],
      },
    ]);
    expect(placed!.engineSecret, 'the leader made one').toMatch(/^llmgw-es-[A-Za-z0-9_-]{43}$/);

    // A load sample received by another instance and passed on through the store (dated by when that instance got it):
    // the follower routes by it without any store write of its own.
    const loaded: ShardStatus[] = [{ ...ready[0]!, load: { running: 2, waiting: 5, kv_usage: 0.75, age_ms: 200 } }];
    follower.reconciler.onShardReport(follower.inventory.get('n1')!, loaded, clock - 100);
    expect(follower.reconciler.view.ready('demo')[0]?.load, "the follower's router reads the sample").toEqual({
      running: 2,
      waiting: 5,
      kvUsage: 0.75,
      sampledAtMs: clock - 300,
    });

    // Admin state set through the leader; a newer heartbeat here is never moved back by an older stored one.
    clock += 5000;
    follower.inventory.heartbeat(follower.inventory.get('n1')!, {});
    await follower.inventory.flush(); // two handles on one SQLite file in one process: one writer at a time
    await leader.inventory.setState('n1', 'cordoned', 'test');
    const changes: string[] = [];
    follower.inventory.onChange((_id, why) => changes.push(why));
    await follower.inventory.refresh();
    expect(follower.inventory.get('n1')).toMatchObject({ adminState: 'cordoned', lastSeenMs: clock });
    expect(
      changes.some((w) => w.includes('cordoned')),
      `the change is announced: ${changes.join('; ')}`,
    ).toBe(true);
  });

  it("judges a node heard only through the store with the store's lag added, and one heard here without", async () => {
    // Replays a CI failure: an agent whose control plane dropped off the network failed over inside its own
    // window, yet the other instance had called it stale, because the last heartbeat it could read was
    // already seconds old in the store.
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-follower-'));
    cleanups.push(async () => rmSync(dir, { recursive: true, force: true }));
    const lag = 4_000;
    const heard = await instance(dir, undefined, lag);
    const other = await instance(dir, false, lag);
    await heard.inventory.join(N1);
    heard.inventory.heartbeat(heard.inventory.get('n1')!, {});
    await heard.inventory.flush();
    await other.inventory.refresh();
    const liveness = () => [
      heard.inventory.liveness(heard.inventory.get('n1')!),
      other.inventory.liveness(other.inventory.get('n1')!),
    ];

    clock += 15_000 + lag - 1;
    expect(liveness(), 'past the window where it was heard; inside window and lag through the store').toEqual([
      'stale',
      'up',
    ]);
    clock += 1;
    expect(liveness(), 'past both').toEqual(['stale', 'stale']);

    // It fails over: heard here now, so this instance no longer allows for the store.
    other.inventory.heartbeat(other.inventory.get('n1')!, {});
    expect(liveness()[1]).toBe('up');
    clock += 15_000;
    expect(liveness()[1], 'a heartbeat heard here is judged on the window alone').toBe('stale');
  });
});
