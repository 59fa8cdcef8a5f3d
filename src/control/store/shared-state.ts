// What several control-plane instances on one store tell each other through
// it: who leads (the leadership epoch), which instances are alive, the
// agents' shard reports for the leader, each router's use of each replica,
// and per-key rate-limit counts. Kept apart from store.ts because none of it
// is an operator's state: losing any of it costs seconds, never a replica.
import { sql } from 'kysely';
import type { ReplicaUse } from '../scaling/index.js';
import type { Store } from './store.js';

export interface Leadership {
  role: string;
  epoch: number;
  holder: string;
  acquiredAtMs: number;
}

/**
 * Takes the next epoch of `role` for `holder`: the row is created at epoch 1
 * or its epoch incremented, in one transaction. Call only while holding the
 * role's lock (the advisory lock): the increment is what fences the previous
 * holder's writes, and it waits for any of them still in flight (they hold
 * the row FOR SHARE) to commit first.
 */
export async function acquireEpoch(store: Store, role: string, holder: string, nowMs: number): Promise<number> {
  return store.db.transaction().execute(async (tx) => {
    const row = await tx
      .insertInto('leadership')
      .values({ name: role, epoch: 1, holder, acquired_at: nowMs })
      .onConflict((oc) => oc.column('name').doUpdateSet((eb) => ({ epoch: eb('leadership.epoch', '+', 1), holder, acquired_at: nowMs })))
      .returning('epoch')
      .executeTakeFirstOrThrow();
    return Number(row.epoch);
  });
}

/** The role's current holder and epoch; undefined = nobody has ever led it. */
export async function readLeadership(store: Store, role: string): Promise<Leadership | undefined> {
  const row = await store.db.selectFrom('leadership').selectAll().where('name', '=', role).executeTakeFirst();
  return row ? { role: row.name, epoch: Number(row.epoch), holder: row.holder, acquiredAtMs: Number(row.acquired_at) } : undefined;
}

export interface ControlPlaneRow {
  id: string;
  clientUrl: string | null;
  adminUrl: string | null;
  agentUrl: string | null;
  startedAtMs: number;
  lastSeenMs: number;
}

/** Records that an instance is alive (and where it listens); called about once a second by each. */
export async function touchControlPlane(store: Store, row: ControlPlaneRow): Promise<void> {
  const values = { client_url: row.clientUrl, admin_url: row.adminUrl, agent_url: row.agentUrl, last_seen: row.lastSeenMs };
  await store.db
    .insertInto('control_planes')
    .values({ id: row.id, started_at: row.startedAtMs, ...values })
    .onConflict((oc) => oc.column('id').doUpdateSet(values))
    .execute();
}

/** Instances seen since `sinceMs` (0 = every one ever recorded), id order. */
export async function listControlPlanes(store: Store, sinceMs = 0): Promise<ControlPlaneRow[]> {
  const rows = await store.db.selectFrom('control_planes').selectAll().where('last_seen', '>=', sinceMs).orderBy('id').execute();
  return rows.map((r) => ({ id: r.id, clientUrl: r.client_url, adminUrl: r.admin_url, agentUrl: r.agent_url, startedAtMs: Number(r.started_at), lastSeenMs: Number(r.last_seen) }));
}

/** Forgets instances not seen since `beforeMs`, so the list does not grow with every restart. */
export async function pruneControlPlanes(store: Store, beforeMs: number): Promise<void> {
  await store.db.deleteFrom('control_planes').where('last_seen', '<', beforeMs).execute();
  await store.db.deleteFrom('replica_use').where('updated_at', '<', beforeMs).execute();
}

export interface ShardReportRow {
  nodeId: string;
  instanceId: string;
  /** The agent's shard statuses as sent (unvalidated JSON; the leader reads them through the protocol's schema). */
  shards: unknown;
  atMs: number;
}

/** Keeps the newest shard report per node; an older one (from a slower instance) never replaces a newer. */
export async function saveShardReports(store: Store, reports: readonly ShardReportRow[]): Promise<void> {
  if (reports.length === 0) return;
  await store.db.transaction().execute(async (tx) => {
    for (const r of reports) {
      const values = { instance_id: r.instanceId, shards: JSON.stringify(r.shards), at: r.atMs };
      await tx
        .insertInto('shard_reports')
        .values({ node_id: r.nodeId, ...values })
        .onConflict((oc) => oc.column('node_id').doUpdateSet(values).where('shard_reports.at', '<=', r.atMs))
        .execute();
    }
  });
}

/** Reports newer than `afterMs` received by instances other than `instanceId`. */
export async function shardReportsSince(store: Store, afterMs: number, instanceId: string): Promise<ShardReportRow[]> {
  const rows = await store.db.selectFrom('shard_reports').selectAll().where('at', '>', afterMs).where('instance_id', '!=', instanceId).execute();
  return rows.map((r) => ({ nodeId: r.node_id, instanceId: r.instance_id, shards: JSON.parse(r.shards) as unknown, atMs: Number(r.at) }));
}

/** One instance's use of one replica (or, summed, every instance's). */
export interface ReplicaUseRow extends ReplicaUse {
  replicaId: string;
}

/** Replaces this instance's use rows with `use` (replicas it no longer tracks are deleted). */
export async function saveReplicaUse(store: Store, instanceId: string, use: readonly ReplicaUseRow[], nowMs: number): Promise<void> {
  await store.db.transaction().execute(async (tx) => {
    const ids = use.map((u) => u.replicaId);
    let stale = tx.deleteFrom('replica_use').where('instance_id', '=', instanceId);
    if (ids.length) stale = stale.where('replica_id', 'not in', ids);
    await stale.execute();
    for (const u of use) {
      const values = { in_flight: u.inFlight, last_used_at: u.lastUsedAtMs, updated_at: nowMs };
      await tx
        .insertInto('replica_use')
        .values({ instance_id: instanceId, replica_id: u.replicaId, ...values })
        .onConflict((oc) => oc.columns(['instance_id', 'replica_id']).doUpdateSet(values))
        .execute();
    }
  });
}

/** Replaces this instance's held-request counts per model (models with none held are left out). */
export async function saveModelDemand(store: Store, instanceId: string, queued: ReadonlyMap<string, number>, nowMs: number): Promise<void> {
  await store.db.transaction().execute(async (tx) => {
    await tx.deleteFrom('model_demand').where('instance_id', '=', instanceId).execute();
    const rows = [...queued].filter(([, n]) => n > 0).map(([model, n]) => ({ instance_id: instanceId, model, queued: n, updated_at: nowMs }));
    if (rows.length) await tx.insertInto('model_demand').values(rows).execute();
  });
}

/** Held requests per model summed over every instance's rows written since `sinceMs`. */
export async function sumModelDemand(store: Store, sinceMs: number): Promise<Map<string, number>> {
  const rows = await store.db
    .selectFrom('model_demand')
    .select(['model', sql<number>`sum(queued)`.as('queued')])
    .where('updated_at', '>=', sinceMs)
    .groupBy('model')
    .execute();
  return new Map(rows.map((r) => [r.model, Number(r.queued)]));
}

/** In flight summed and last use maxed over every instance's rows written since `sinceMs` (older rows are dead instances'). */
export async function sumReplicaUse(store: Store, sinceMs: number): Promise<Map<string, ReplicaUseRow>> {
  const rows = await store.db
    .selectFrom('replica_use')
    .select(['replica_id', sql<number>`sum(in_flight)`.as('in_flight'), sql<number | null>`max(last_used_at)`.as('last_used_at')])
    .where('updated_at', '>=', sinceMs)
    .groupBy('replica_id')
    .execute();
  return new Map(rows.map((r) => [r.replica_id, { replicaId: r.replica_id, inFlight: Number(r.in_flight), lastUsedAtMs: r.last_used_at === null ? null : Number(r.last_used_at) }]));
}

export interface RateCount {
  keyId: string;
  /** Epoch ms, a multiple of the window length. */
  windowStartMs: number;
  requests: number;
  tokens: number;
}

/**
 * Adds this instance's counts to the shared ones and returns the totals of
 * every window of those keys (null = of every key) at or after `sinceMs`
 * (all instances' counts, this batch's included), in one transaction.
 */
export async function addRateCounts(store: Store, adds: readonly RateCount[], keyIds: readonly string[] | null, sinceMs: number): Promise<RateCount[]> {
  return store.db.transaction().execute(async (tx) => {
    for (const a of adds) {
      await tx
        .insertInto('rate_windows')
        .values({ key_id: a.keyId, window_start: a.windowStartMs, requests: a.requests, tokens: a.tokens })
        .onConflict((oc) =>
          oc.columns(['key_id', 'window_start']).doUpdateSet((eb) => ({
            requests: eb('rate_windows.requests', '+', a.requests),
            tokens: eb('rate_windows.tokens', '+', a.tokens),
          })),
        )
        .execute();
    }
    if (keyIds !== null && keyIds.length === 0) return [];
    let query = tx.selectFrom('rate_windows').selectAll().where('window_start', '>=', sinceMs);
    if (keyIds !== null) query = query.where('key_id', 'in', [...keyIds]);
    const rows = await query.execute();
    return rows.map((r) => ({ keyId: r.key_id, windowStartMs: Number(r.window_start), requests: Number(r.requests), tokens: Number(r.tokens) }));
  });
}

/** Deletes windows that ended before `beforeMs`; any instance may call it, it is idempotent. */
export async function pruneRateCounts(store: Store, beforeMs: number): Promise<void> {
  await store.db.deleteFrom('rate_windows').where('window_start', '<', beforeMs).execute();
}

/** Replaces the leader's notes for `role` (unvalidated JSON; readers check what they need). */
export async function saveLeaderNotes(store: Store, role: string, body: unknown, epoch: number, nowMs: number): Promise<void> {
  const values = { body: JSON.stringify(body), epoch, updated_at: nowMs };
  await store.db
    .insertInto('leader_notes')
    .values({ name: role, ...values })
    .onConflict((oc) => oc.column('name').doUpdateSet(values))
    .execute();
}

/** The leader's notes for `role`; undefined = none written yet. */
export async function readLeaderNotes(store: Store, role: string): Promise<{ body: unknown; epoch: number; updatedAtMs: number } | undefined> {
  const row = await store.db.selectFrom('leader_notes').selectAll().where('name', '=', role).executeTakeFirst();
  return row ? { body: JSON.parse(row.body) as unknown, epoch: Number(row.epoch), updatedAtMs: Number(row.updated_at) } : undefined;
}
