// Each router's use of each replica (requests in flight, last use), one row
// per instance and replica, so the leader scales and stops idle replicas on
// the whole fleet's traffic rather than its own.
import { sql } from 'kysely';
import type { ReplicaUse } from '../scaling/index.js';
import type { StoreConnection } from './connection.js';

/** One instance's use of one replica (or, summed, every instance's). */
export interface ReplicaUseRow extends ReplicaUse {
  replicaId: string;
}

export class ReplicaUseRepository {
  constructor(private readonly connection: StoreConnection) {}

  /** Replaces this instance's use rows with `use` (replicas it no longer tracks are deleted). */
  async save(instanceId: string, use: readonly ReplicaUseRow[], nowMs: number): Promise<void> {
    await this.connection.db.transaction().execute(async (tx) => {
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

  /** In flight summed and last use maxed over every instance's rows written since `sinceMs` (older rows are dead instances'). */
  async sum(sinceMs: number): Promise<Map<string, ReplicaUseRow>> {
    const rows = await this.connection.db
      .selectFrom('replica_use')
      .select([
        'replica_id',
        sql<number>`sum(in_flight)`.as('in_flight'),
        sql<number | null>`max(last_used_at)`.as('last_used_at'),
      ])
      .where('updated_at', '>=', sinceMs)
      .groupBy('replica_id')
      .execute();
    return new Map(
      rows.map((r) => [
        r.replica_id,
        {
          replicaId: r.replica_id,
          inFlight: Number(r.in_flight),
          lastUsedAtMs: r.last_used_at === null ? null : Number(r.last_used_at),
        },
      ]),
    );
  }

  /** Forgets rows not written since `beforeMs` (instances gone), pruned with the instances' own rows. */
  async prune(beforeMs: number): Promise<void> {
    await this.connection.db.deleteFrom('replica_use').where('updated_at', '<', beforeMs).execute();
  }
}
