// Requests each router holds per model while no replica can take them, one
// row set per instance, so the leader starts replicas for the whole fleet's
// waiting demand rather than its own.
import { sql } from 'kysely';
import type { StoreConnection } from './connection.js';

export class ModelDemandRepository {
  constructor(private readonly connection: StoreConnection) {}

  /** Replaces this instance's held-request counts per model (models with none held are left out). */
  async save(instanceId: string, queued: ReadonlyMap<string, number>, nowMs: number): Promise<void> {
    await this.connection.db.transaction().execute(async (tx) => {
      await tx.deleteFrom('model_demand').where('instance_id', '=', instanceId).execute();
      const rows = [...queued]
        .filter(([, n]) => n > 0)
        .map(([model, n]) => ({ instance_id: instanceId, model, queued: n, updated_at: nowMs }));
      if (rows.length) await tx.insertInto('model_demand').values(rows).execute();
    });
  }

  /** Held requests per model summed over every instance's rows written since `sinceMs`. */
  async sum(sinceMs: number): Promise<Map<string, number>> {
    const rows = await this.connection.db
      .selectFrom('model_demand')
      .select(['model', sql<number>`sum(queued)`.as('queued')])
      .where('updated_at', '>=', sinceMs)
      .groupBy('model')
      .execute();
    return new Map(rows.map((r) => [r.model, Number(r.queued)]));
  }
}
