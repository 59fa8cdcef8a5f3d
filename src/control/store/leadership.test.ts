// Epoch fencing at the store, the guard behind leader election: a control
// plane that led, was paused (GC, a stopped VM, a cut network) and wakes up
// after another instance took the lead must not be able to write replicas or
// shards. Without the fence it would undo its successor's work, e.g. delete a
// replica the new leader just started, costing a running engine.
import { sql } from 'kysely';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { StaleLeaderError } from '../../errors/index.js';
import { createTestDatabase, describePostgres, type TestDatabase } from '../../../test/support/postgres.js';
import { waitFor } from '../../../test/support/wait.js';
import type { ReplicaWrite } from './replicas.js';
import { Store } from './store.js';

function replica(id: string, state: string): ReplicaWrite {
  return {
    id,
    model: 'm',
    profile: 'p',
    pool: null,
    fabric: null,
    state,
    endpoint: null,
    error: null,
    createdAtMs: 1,
    lastUsedAtMs: null,
    failures: 0,
    nextRetryAtMs: null,
    stateSinceMs: 1,
    replaces: null,
    updatedAtMs: 1,
    shards: [{ id: `${id}-s0`, nodeId: 'n1', rank: 0, gpuIndices: [0], state: 'pending', error: null, endpoint: null }],
  };
}

describePostgres('leadership epochs fence replica writes (two Store handles on one Postgres)', () => {
  let db: TestDatabase;
  let old: Store;
  let fresh: Store;
  let oldEpoch: number | null = null;
  let freshEpoch: number | null = null;
  const staleSeen: StaleLeaderError[] = [];

  beforeAll(async () => {
    db = await createTestDatabase();
    old = await Store.open({ location: { kind: 'postgres', url: db.url } });
    fresh = await Store.open({ location: { kind: 'postgres', url: db.url } });
    old.setLeaderFence({ role: 'reconciler', epoch: () => oldEpoch, onStale: (err) => staleSeen.push(err) });
    fresh.setLeaderFence({ role: 'reconciler', epoch: () => freshEpoch });
  });

  afterAll(async () => {
    await old?.close();
    await fresh?.close();
    await db?.drop();
  });

  it('refuses a write from an instance that holds no epoch', async () => {
    await expect(old.replicas.save([replica('rep-0', 'pending')], [])).rejects.toMatchObject({
      code: 'LLMGW_STALE_LEADER',
    });
  });

  it('lets the holder of the current epoch write, and refuses it once another instance acquired a newer one', async () => {
    oldEpoch = await old.leadership.acquireEpoch('reconciler', 'cp-old', 1000);
    expect(oldEpoch).toBe(1);
    await old.replicas.save([replica('rep-1', 'pending')], []);

    freshEpoch = await fresh.leadership.acquireEpoch('reconciler', 'cp-new', 2000);
    expect(freshEpoch, 'each acquisition increments the epoch').toBe(2);
    expect(await fresh.leadership.read('reconciler')).toMatchObject({ epoch: 2, holder: 'cp-new' });
    await fresh.replicas.save([replica('rep-1', 'ready')], []);

    // The paused leader wakes up, still believing it holds epoch 1, and tries to remove the replica.
    const err = await old.replicas.save([], ['rep-1']).catch((e: unknown) => e);
    expect(err, 'the stale write is refused with a typed error').toBeInstanceOf(StaleLeaderError);
    expect(err).toMatchObject({ code: 'LLMGW_STALE_LEADER', heldEpoch: 1, currentEpoch: 2 });
    expect(staleSeen.length, 'the stale instance is told, so it steps down').toBe(1);
    await expect(old.replicas.setState('rep-1', 'failed')).rejects.toBeInstanceOf(StaleLeaderError);
    await expect(old.replicas.setShardState('rep-1-s0', 'failed')).rejects.toBeInstanceOf(StaleLeaderError);

    const rows = await fresh.replicas.list();
    expect(
      rows.map((r) => [r.id, r.state, r.shards[0]?.state]),
      "the new leader's work is intact",
    ).toEqual([['rep-1', 'ready', 'pending']]);
  });

  it('makes an acquisition wait for a write of the old epoch in flight, so the new leader reads it', async () => {
    // The old leader's write holds the leadership row FOR SHARE until it commits; the increment queues behind it.
    oldEpoch = await old.leadership.acquireEpoch('reconciler', 'cp-old', 3000);
    const order: string[] = [];
    let lockTaken!: () => void;
    const locked = new Promise<void>((resolve) => (lockTaken = resolve));
    const slow = old.connection.db.transaction().execute(async (tx) => {
      await tx.selectFrom('leadership').select('epoch').where('name', '=', 'reconciler').forShare().execute();
      lockTaken();
      // Write only once Postgres shows the acquisition queued on a lock in this database: proof that it waits, not a guess at how long it takes.
      await waitFor(
        'the new leader waiting on the leadership row',
        async () => {
          const { rows } = await sql<{
            n: number;
          }>`select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`.execute(
            old.connection.db,
          );
          return rows[0]!.n > 0 ? true : undefined;
        },
        10_000,
      );
      await tx
        .insertInto('replicas')
        .values({ ...row('rep-late') })
        .execute();
      order.push('old write');
    });
    await locked;
    const acquiring = fresh.leadership.acquireEpoch('reconciler', 'cp-new', 4000).then((epoch) => {
      order.push('new epoch');
      return epoch;
    });
    await slow;
    freshEpoch = await acquiring;
    expect(order, 'the acquisition ended only after the in-flight write').toEqual(['old write', 'new epoch']);
    expect((await fresh.replicas.list()).map((r) => r.id)).toContain('rep-late');
  });
});

function row(id: string) {
  return {
    id,
    model: 'm',
    profile: 'p',
    pool: null,
    fabric: null,
    state: 'pending',
    endpoint: null,
    error: null,
    created_at: 1,
    last_used_at: null,
    failures: 0,
    next_retry_at: null,
    state_since: 1,
    replaces: null,
    updated_at: 1,
  };
}
