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

export interface NodesTable {
  id: string;
  hostname: string | null;
  mgmt_addr: string | null;
  /** JSON object of label -> value. */
  labels: string;
  /** ready | cordoned | draining: set by an operator, kept across restarts. */
  admin_state: string;
  /** SHA-256 hex of the node credential; the credential itself is never stored. */
  credential_hash: string;
  /** What the control plane presents to the agent's management API. */
  mgmt_token: string;
  agent_version: string | null;
  protocol_version: number | null;
  /** Epoch ms of the newest heartbeat any control plane received; null = none since joining. */
  last_seen: number | null;
  /** The newest NodeReport, JSON text; null = none yet. */
  report: string | null;
  joined_at: number;
  updated_at: number;
}

export interface Database {
  models: ModelsTable;
  audit_log: AuditLogTable;
  nodes: NodesTable;
}
