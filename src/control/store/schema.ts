// The store's tables as Kysely sees them. One schema for SQLite and Postgres:
// times are epoch milliseconds in bigint columns, structured values are JSON
// text, so that neither dialect's special types leak into the code above.
import type { Generated } from 'kysely';

export interface ModelsTable {
  name: string;
  /** The definition as validated and normalised, JSON text. */
  definition: string;
  created_at: number;
  created_by: string;
  updated_at: number;
}

export interface AuditLogTable {
  id: Generated<number>;
  at: number;
  /** From X-Llmgw-Actor, or "unknown". */
  actor: string;
  /** A verb such as "model.add", "node.state". */
  action: string;
  /** The object acted on: a model name, a node id. */
  target: string;
  /** What changed, JSON text; never a secret. */
  detail: string;
}

export interface Database {
  models: ModelsTable;
  audit_log: AuditLogTable;
}
