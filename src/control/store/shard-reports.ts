// The agents' shard reports, passed through the store from whichever
// instance a node's heartbeat reached to the leader, which folds them into
// its replicas. Only the newest report per node is kept.
import type { StoreConnection } from './connection.js';

export interface ShardReportRow {
  nodeId: string;
  instanceId: string;
  /** The agent's shard statuses as sent (unvalidated JSON; the leader reads them through the protocol's schema). */
  shards: unknown;
  atMs: number;
}

/** Reports per statement: four parameters each, well inside SQLite's and Postgres's limits. */
const REPORTS_PER_STATEMENT = 500;

export class ShardReportRepository {
  constructor(private readonly connection: StoreConnection) {}

  /**
   * Keeps the newest shard report per node; an older one (from a slower
   * instance) never replaces a newer. One statement per few hundred reports:
   * a statement each was a round trip per node, most of what a busy
   * instance spent on the store. Each node at most once per call (Postgres
   * refuses an upsert that touches one row twice).
   */
  async save(reports: readonly ShardReportRow[]): Promise<void> {
    if (reports.length === 0) return;
    await this.connection.db.transaction().execute(async (tx) => {
      for (let i = 0; i < reports.length; i += REPORTS_PER_STATEMENT) {
        const rows = reports
          .slice(i, i + REPORTS_PER_STATEMENT)
          .map((r) => ({ node_id: r.nodeId, instance_id: r.instanceId, shards: JSON.stringify(r.shards), at: r.atMs }));
        await tx
          .insertInto('shard_reports')
          .values(rows)
          .onConflict((oc) =>
            oc
              .column('node_id')
              .doUpdateSet((eb) => ({
                instance_id: eb.ref('excluded.instance_id'),
                shards: eb.ref('excluded.shards'),
                at: eb.ref('excluded.at'),
              }))
              .whereRef('shard_reports.at', '<=', 'excluded.at'),
          )
          .execute();
      }
    });
  }

  /** Reports newer than `afterMs` received by instances other than `instanceId`. */
  async since(afterMs: number, instanceId: string): Promise<ShardReportRow[]> {
    const rows = await this.connection.db
      .selectFrom('shard_reports')
      .selectAll()
      .where('at', '>', afterMs)
      .where('instance_id', '!=', instanceId)
      .execute();
    return rows.map((r) => ({
      nodeId: r.node_id,
      instanceId: r.instance_id,
      shards: JSON.parse(r.shards) as unknown,
      atMs: Number(r.at),
    }));
  }
}
