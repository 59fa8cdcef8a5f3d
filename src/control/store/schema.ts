// The store's tables as Kysely sees them. One schema for SQLite and Postgres:
// times are epoch milliseconds in bigint columns, structured values are JSON
// text, so that neither dialect's special types leak into the code above.
import type { Generated } from 'kysely';
import type { BudgetSpendTable, BudgetsTable, ModelGpuCostTable, TeamsTable } from './teams-schema.js';
import type { BatchesTable, BatchLinesTable, FilesTable } from './batches-schema.js';
import type { PeopleTable, PersonTokensTable } from './people-schema.js';
import type { RemoteCredentialsTable } from './remote-credentials.js';
import type { ReplicaGpuCostTable } from './gpu-schema.js';

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
  /**
   * Who acted, as authenticated: `admin-token`, `dashboard:<session hash
   * prefix>`, `loopback-no-token`, `node:<id>`. Rows written before
   * 0010_audit_identity hold the caller's own X-Llmgw-Actor here instead.
   */
  actor: string;
  /** What the caller called itself (X-Llmgw-Actor, a dashboard login's address); null = nothing said, or a row from before 0010. */
  actor_label: string | null;
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
  /**
   * The nonce the management token is derived from (see
   * inventory/node-secrets.ts); null = none yet (a row migrated from a
   * plaintext token: the next heartbeat issues one).
   */
  mgmt_nonce: string | null;
  /** SHA-256 hex of the management token; the token itself is never stored. */
  mgmt_token_hash: string | null;
  /** approved | pending: pending nodes take no placements until an admin approves them. */
  approval: string;
  /** The GPU fingerprint the node was approved with; null = none reported yet. */
  approved_hardware: string | null;
  /** What changed in the node's hardware since approval, in words; null = nothing. */
  hardware_change: string | null;
  /** Epoch ms an admin removed the node; null = not removed. A removed row frees its id and holds no credential. */
  removed_at: number | null;
  agent_version: string | null;
  protocol_version: number | null;
  /** The newest NodeReport, JSON text; null = none yet. */
  report: string | null;
  joined_at: number;
  /** Epoch ms of the last change other than a heartbeat's liveness: what other instances re-read the row for. */
  updated_at: number;
  /** One more on every write to the row: a reader that merged this version has nothing new to read. */
  version: Generated<number>;
}

/** Each node's newest heartbeat any control plane saved; no row = none since joining. Apart so a heartbeat writes a few bytes, not the node's row. */
export interface NodeLastSeenTable {
  id: string;
  last_seen: number;
}

/** Per-node join tokens: single use, expiring, stored only as a hash. */
export interface JoinTokensTable {
  id: string;
  /** The only node id this token admits. */
  node: string;
  /** SHA-256 hex of the token. */
  hash: string;
  expires_at: number;
  created_at: number;
  created_by: string;
  /** Epoch ms it was used; null = unused. */
  used_at: number | null;
}

/** One running copy of a model; see the reconciler's ReplicaRecord for what each field means. */
export interface ReplicasTable {
  id: string;
  model: string;
  profile: string;
  pool: string | null;
  fabric: string | null;
  /** pending | fetching | starting | ready | draining | stopping | failed. */
  state: string;
  endpoint: string | null;
  error: string | null;
  created_at: number;
  /** Null = the router has reported no use. */
  last_used_at: number | null;
  failures: number;
  next_retry_at: number | null;
  /** When the state last changed (drain and stop deadlines count from it). */
  state_since: number;
  /** The replica this one replaces on a draining node; null = none. */
  replaces: string | null;
  updated_at: number;
  /** The engine's --api-key, which the router sends; null = none (made before secrets, or a store before 0012). */
  engine_secret: string | null;
}

/** The part of a replica on one node; deleted with its replica. */
export interface ShardsTable {
  id: string;
  replica_id: string;
  node_id: string;
  rank: number;
  /** JSON array of GPU indices. */
  gpu_indices: string;
  state: string;
  error: string | null;
  endpoint: string | null;
}

export interface ApiKeysTable {
  id: string;
  name: string;
  prefix: string;
  /** SHA-256 hex of the secret; the secret itself is shown once and never stored. */
  hash: string;
  /** JSON array of model names; null = every model. */
  allowed_models: string | null;
  requests_per_minute: number | null;
  tokens_per_minute: number | null;
  expires_at: number | null;
  created_at: number;
  created_by: string;
  revoked_at: number | null;
  /** The team the key belongs to (0017); 'default' for keys made before teams. */
  team: Generated<string>;
  /** Its requests' class when a model queues them (0021): 'batch', or null = interactive. */
  priority: Generated<string | null>;
}

/** Totals per key and model since the key was made; 'anonymous' when the listener runs without keys. */
export interface UsageTable {
  key_id: string;
  model: string;
  /** The API called (chat, rerank, messages, …; see catalog/endpoints.ts); 'unknown' for rows from before 0013. */
  endpoint: string;
  requests: number;
  errors: number;
  prompt_tokens: number;
  completion_tokens: number;
  updated_at: number;
  /** What the usage cost in US dollars at the model's price (0018); 0 for rows from before, and for models without one. */
  cost_usd: Generated<number>;
}

/** One entry of the events log; see src/control/events for the kinds. */
export interface EventsTable {
  id: Generated<number>;
  at: number;
  kind: string;
  /** Null = not about one model (a node joining). */
  model: string | null;
  node: string | null;
  replica: string | null;
  /** Replica counts of a scaling decision; null for other kinds. */
  from_count: number | null;
  to_count: number | null;
  message: string;
}

/** Who leads a singleton role ('reconciler'); the epoch grows on every acquisition and fences a stale leader's writes. */
export interface LeadershipTable {
  name: string;
  epoch: number;
  /** The control plane's instance id. */
  holder: string;
  acquired_at: number;
}

/** One row per control-plane instance that has run against this store; last_seen says whether it still does. */
export interface ControlPlanesTable {
  id: string;
  /** Listener URLs as the instance bound them; null = not listening yet. */
  client_url: string | null;
  admin_url: string | null;
  agent_url: string | null;
  started_at: number;
  last_seen: number;
}

/** The newest shard statuses an agent reported to some instance, for the leader to apply. */
export interface ShardReportsTable {
  node_id: string;
  instance_id: string;
  /** JSON array of ShardStatus as the agent sent it. */
  shards: string;
  at: number;
}

/** Each instance's router use of each replica; the leader sums in_flight over fresh rows. */
export interface ReplicaUseTable {
  instance_id: string;
  replica_id: string;
  in_flight: number;
  /** Null = this instance never used it. */
  last_used_at: number | null;
  updated_at: number;
}

/** Requests admitted and tokens charged per key per minute (window_start: epoch ms, a multiple of 60 000), summed over instances. */
export interface RateWindowsTable {
  key_id: string;
  window_start: number;
  requests: number;
  tokens: number;
}

/** What the leader of a role knows that followers show: for 'reconciler', its last pass's rejections and blocked drains (JSON). */
export interface LeaderNotesTable {
  name: string;
  body: string;
  /** The epoch of the leader that wrote it. */
  epoch: number;
  updated_at: number;
}

/** Requests an instance holds per model while no replica is ready; the leader sums fresh rows for scaling from zero. */
export interface ModelDemandTable {
  instance_id: string;
  model: string;
  queued: number;
  updated_at: number;
}

/** A dashboard login; the cookie carries the id, the store only its SHA-256. */
export interface DashboardSessionsTable {
  id_hash: string;
  csrf_token: string;
  /** Where the person logged in from, `dashboard:<remote address>`: the label beside the session's audit identity. */
  actor: string;
  created_at: number;
  /** Written at most about once a minute per session: idle expiry is hours. */
  last_seen: number;
  /** The person signed in (0019); null = the admin token's login, no person. */
  person: string | null;
  /** Their role at sign-in (0019); null = admin (sessions made before people were admin-token logins). */
  role: string | null;
  /** JSON array of a team-admin's teams (0019); null = none. */
  teams: string | null;
}

/** A kept Responses API response (src/control/responses); only its key reads it. */
export interface ResponsesTable {
  /** The API key that made it; 'anonymous' when the listener asks no key. With `id`, the primary key. */
  key_id: string;
  /** `resp_…`, the router's own (random, 128 bits), as the client saw it; rows kept before 0016 may hold an engine's. */
  id: string;
  /** The id the engine gave it when the engine answered natively and its id was replaced; null otherwise. */
  engine_id: string | null;
  model: string;
  created_at_ms: number;
  /** Past this it is never returned, and the next sweep deletes it. */
  expires_at_ms: number;
  /** The size of `body` in UTF-8 bytes: what counts against the key's cap. */
  bytes: number;
  /** JSON: {"response": the Response object, "items": the conversation after it}. */
  body: string;
}

/** Which kept response an output item is in, for item_reference inputs; per key, as the responses are. */
export interface ResponseItemsTable {
  key_id: string;
  item_id: string;
  response_id: string;
}

export interface Database {
  files: FilesTable;
  batches: BatchesTable;
  batch_lines: BatchLinesTable;
  remote_credentials: RemoteCredentialsTable;
  teams: TeamsTable;
  budgets: BudgetsTable;
  budget_spend: BudgetSpendTable;
  model_gpu_cost: ModelGpuCostTable;
  replica_gpu_cost: ReplicaGpuCostTable;
  responses: ResponsesTable;
  response_items: ResponseItemsTable;
  dashboard_sessions: DashboardSessionsTable;
  people: PeopleTable;
  person_tokens: PersonTokensTable;
  model_demand: ModelDemandTable;
  events: EventsTable;
  leader_notes: LeaderNotesTable;
  leadership: LeadershipTable;
  control_planes: ControlPlanesTable;
  shard_reports: ShardReportsTable;
  replica_use: ReplicaUseTable;
  rate_windows: RateWindowsTable;
  api_keys: ApiKeysTable;
  usage: UsageTable;
  models: ModelsTable;
  audit_log: AuditLogTable;
  nodes: NodesTable;
  node_last_seen: NodeLastSeenTable;
  join_tokens: JoinTokensTable;
  replicas: ReplicasTable;
  shards: ShardsTable;
}
