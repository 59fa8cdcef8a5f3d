// The models added through the admin API (file models are never stored):
// their definitions as validated, and who added them. The catalog reads them
// at start and on every change another instance announces.
import { LlmgwError } from '../../errors/index.js';
import { actorText } from '../../http/actor.js';
import { type AuditInput, insertAudit } from './audit.js';
import type { StoreConnection } from './connection.js';

export interface StoredModel {
  name: string;
  definition: unknown;
  createdAt: number;
  createdBy: string;
  updatedAt: number;
}

export class ModelRepository {
  constructor(private readonly connection: StoreConnection) {}

  /** Every stored model, name order. */
  async list(): Promise<StoredModel[]> {
    const rows = await this.connection.db.selectFrom('models').selectAll().orderBy('name').execute();
    return rows.map((r) => ({
      name: r.name,
      definition: JSON.parse(r.definition) as unknown,
      createdAt: r.created_at,
      createdBy: r.created_by,
      updatedAt: r.updated_at,
    }));
  }

  /**
   * Inserts a model and its audit row in one transaction, so a model never
   * exists without the record of who added it. Throws LLMGW_CATALOG_CONFLICT
   * when the name is already stored (another control plane won the race).
   */
  async insert(name: string, definition: unknown, audit: AuditInput): Promise<void> {
    const at = this.connection.now();
    await this.connection.db.transaction().execute(async (tx) => {
      const existing = await tx.selectFrom('models').select('name').where('name', '=', name).executeTakeFirst();
      if (existing) throw new LlmgwError('LLMGW_CATALOG_CONFLICT', `a model named "${name}" already exists`);
      await tx
        .insertInto('models')
        .values({
          name,
          definition: JSON.stringify(definition),
          created_at: at,
          created_by: actorText(audit.actor),
          updated_at: at,
        })
        .execute();
      await insertAudit(tx, at, audit);
      await this.connection.announce(tx, 'catalog');
    });
  }

  /** Deletes a model and records it; false when there was no such model (nothing written). */
  async delete(name: string, audit: AuditInput): Promise<boolean> {
    const at = this.connection.now();
    return this.connection.db.transaction().execute(async (tx) => {
      const result = await tx.deleteFrom('models').where('name', '=', name).executeTakeFirst();
      if (Number(result.numDeletedRows) === 0) return false;
      await insertAudit(tx, at, audit);
      await this.connection.announce(tx, 'catalog');
      return true;
    });
  }
}
