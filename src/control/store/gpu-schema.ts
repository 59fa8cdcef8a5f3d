// GPU-hours, cost and tokens per replica, beside model_gpu_cost's per model:
// with several processes on one store (control planes, `llmgw gateway`),
// none knows every token a replica served in an interval, so a replica's
// rate is read from what they all added up here (src/control/budgets/
// gpu-meter.ts). Its own file because it is the meter's table alone.
import type { Kysely, Migration } from 'kysely';

/** One replica's GPU totals since metering began; the leader adds hours and cost, every process its tokens. */
export interface ReplicaGpuCostTable {
  replica_id: string;
  model: string;
  gpu_hours: number;
  cost_usd: number;
  tokens: number;
  updated_at: number;
}

/** 0026_usage_replica: usage names the replica that served it, so GPU cost is measured per replica. */
export function replicaGpuCostMigration(): Migration {
  return {
    async up(db: Kysely<unknown>) {
      await db.schema
        .createTable('replica_gpu_cost')
        .addColumn('replica_id', 'text', (c) => c.primaryKey())
        .addColumn('model', 'text', (c) => c.notNull())
        .addColumn('gpu_hours', 'double precision', (c) => c.notNull().defaultTo(0))
        .addColumn('cost_usd', 'double precision', (c) => c.notNull().defaultTo(0))
        .addColumn('tokens', 'bigint', (c) => c.notNull().defaultTo(0))
        .addColumn('updated_at', 'bigint', (c) => c.notNull())
        .execute();
    },
  };
}
