// Replicas and their shards, as the leading reconciler records them so a
// restarted control plane (or a new leader) can adopt what runs. Every write
// here is fenced: with a leader fence set on the connection, a control plane
// that no longer leads cannot write over its successor's work.
import type { StoreConnection } from './connection.js';
import type { ReplicasTable, ShardsTable } from './schema.js';

/** A replica as stored; states are not checked here (the reconciler reads them leniently). */
export interface ReplicaRow {
  id: string;
  model: string;
  profile: string;
  pool: string | null;
  fabric: string | null;
  state: string;
  endpoint: string | null;
  error: string | null;
  createdAtMs: number;
  lastUsedAtMs: number | null;
  failures: number;
  nextRetryAtMs: number | null;
  stateSinceMs: number;
  replaces: string | null;
  updatedAtMs: number;
  /** The engine's --api-key; null or absent = none. Never shown in a view or a log. */
  engineSecret?: string | null;
  /** Rank order. */
  shards: ShardRow[];
}

export interface ShardRow {
  id: string;
  nodeId: string;
  rank: number;
  gpuIndices: number[];
  state: string;
  error: string | null;
  endpoint: string | null;
}

/** What save() writes: the same shape, read-only, so the reconciler's records can be passed as they are. */
export type ReplicaWrite = Readonly<Omit<ReplicaRow, 'shards'>> & {
  readonly shards: readonly Readonly<Omit<ShardRow, 'gpuIndices'> & { gpuIndices: readonly number[] }>[];
};

export class ReplicaRepository {
  constructor(private readonly connection: StoreConnection) {}

  /** Every replica with its shards, id order. */
  async list(): Promise<ReplicaRow[]> {
    const replicas = await this.connection.db.selectFrom('replicas').selectAll().orderBy('id').execute();
    const shards = await this.connection.db
      .selectFrom('shards')
      .selectAll()
      .orderBy('replica_id')
      .orderBy('rank')
      .execute();
    const byReplica = new Map<string, ShardsTable[]>();
    for (const s of shards) {
      const list = byReplica.get(s.replica_id) ?? [];
      list.push(s);
      byReplica.set(s.replica_id, list);
    }
    return replicas.map((r) => toReplicaRow(r, byReplica.get(r.id) ?? []));
  }

  /** Inserts a new replica with its shards. */
  async insert(replica: ReplicaWrite): Promise<void> {
    await this.save([replica], []);
  }

  /**
   * Writes what a reconciler pass changed, in one transaction: each replica
   * in `upserts` replaces its stored row and shards (state, endpoint, error,
   * a retry's new shards), and each id in `removed` is deleted with its
   * shards. One transaction so a crash never leaves a replica without the
   * shards that make it up.
   */
  async save(upserts: readonly ReplicaWrite[], removed: readonly string[]): Promise<void> {
    if (upserts.length === 0 && removed.length === 0) return;
    await this.connection.db.transaction().execute(async (tx) => {
      await this.connection.checkFence(tx);
      if (removed.length) {
        await tx
          .deleteFrom('shards')
          .where('replica_id', 'in', [...removed])
          .execute();
        await tx
          .deleteFrom('replicas')
          .where('id', 'in', [...removed])
          .execute();
      }
      for (const r of upserts) {
        const row = {
          model: r.model,
          profile: r.profile,
          pool: r.pool,
          fabric: r.fabric,
          state: r.state,
          endpoint: r.endpoint,
          error: r.error,
          created_at: r.createdAtMs,
          last_used_at: r.lastUsedAtMs,
          failures: r.failures,
          next_retry_at: r.nextRetryAtMs,
          state_since: r.stateSinceMs,
          replaces: r.replaces,
          updated_at: r.updatedAtMs,
          engine_secret: r.engineSecret ?? null,
        };
        await tx
          .insertInto('replicas')
          .values({ id: r.id, ...row })
          .onConflict((oc) => oc.column('id').doUpdateSet(row))
          .execute();
        await tx.deleteFrom('shards').where('replica_id', '=', r.id).execute();
        if (r.shards.length) {
          await tx
            .insertInto('shards')
            .values(
              r.shards.map((s) => ({
                id: s.id,
                replica_id: r.id,
                node_id: s.nodeId,
                rank: s.rank,
                gpu_indices: JSON.stringify(s.gpuIndices),
                state: s.state,
                error: s.error,
                endpoint: s.endpoint,
              })),
            )
            .execute();
        }
      }
      await this.connection.announce(tx, 'replicas');
    });
  }

  /** Sets one replica's state (and error, when given); false when there is no such replica. */
  async setState(
    id: string,
    state: string,
    options: { error?: string | null; stateSinceMs?: number } = {},
  ): Promise<boolean> {
    const at = this.connection.now();
    return this.connection.db.transaction().execute(async (tx) => {
      await this.connection.checkFence(tx);
      const result = await tx
        .updateTable('replicas')
        .set({
          state,
          updated_at: at,
          state_since: options.stateSinceMs ?? at,
          ...(options.error === undefined ? {} : { error: options.error }),
        })
        .where('id', '=', id)
        .executeTakeFirst();
      await this.connection.announce(tx, 'replicas');
      return Number(result.numUpdatedRows) > 0;
    });
  }

  /** Sets one shard's state as its agent reported it; false when there is no such shard. */
  async setShardState(
    id: string,
    state: string,
    options: { error?: string | null; endpoint?: string | null } = {},
  ): Promise<boolean> {
    return this.connection.db.transaction().execute(async (tx) => {
      await this.connection.checkFence(tx);
      const result = await tx
        .updateTable('shards')
        .set({
          state,
          ...(options.error === undefined ? {} : { error: options.error }),
          ...(options.endpoint === undefined ? {} : { endpoint: options.endpoint }),
        })
        .where('id', '=', id)
        .executeTakeFirst();
      await this.connection.announce(tx, 'replicas');
      return Number(result.numUpdatedRows) > 0;
    });
  }
}

function toReplicaRow(r: ReplicasTable, shards: ShardsTable[]): ReplicaRow {
  return {
    id: r.id,
    model: r.model,
    profile: r.profile,
    pool: r.pool,
    fabric: r.fabric,
    state: r.state,
    endpoint: r.endpoint,
    error: r.error,
    createdAtMs: r.created_at,
    lastUsedAtMs: r.last_used_at,
    failures: r.failures,
    nextRetryAtMs: r.next_retry_at,
    stateSinceMs: r.state_since,
    replaces: r.replaces,
    updatedAtMs: r.updated_at,
    engineSecret: r.engine_secret,
    shards: shards
      .map((s) => ({
        id: s.id,
        nodeId: s.node_id,
        rank: s.rank,
        gpuIndices: JSON.parse(s.gpu_indices) as number[],
        state: s.state,
        error: s.error,
        endpoint: s.endpoint,
      }))
      .sort((a, b) => a.rank - b.rank),
  };
}
