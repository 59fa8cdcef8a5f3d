// The admin API's JSON, as the wire carries it: field names exactly as the
// control plane sends them (the seed's snake_case). Declared here rather than
// imported from src/control so that ctl, the dashboard tests and the e2e tests
// depend on the wire, never on the server's internals; a lint rule keeps it so.
// Optional fields are the server's omitempty: absent means "not reported",
// which a reader must show as unknown, never as zero.

/** GET /api/v1/summary */
export interface SummaryView {
  models: { total: number; from_file: number; stored: number; not_placed: string[] };
  nodes: { total: number; by_state: Record<string, number>; by_liveness: Record<string, number> };
  replicas: { total: number; by_state: Record<string, number> };
  /** Sentences for whatever needs a person; empty = nothing does. */
  attention: string[];
  /** False when the control plane runs without a store: model writes are refused. */
  store: boolean;
}

/** GET /api/v1/nodes: one node. Zero or absent means "not reported", never "none". */
export interface NodeView {
  id: string;
  hostname?: string;
  mgmt_addr?: string;
  /** Admin state: ready, cordoned or draining. */
  state: string;
  /** up, stale or lost, from the last heartbeat. */
  liveness: string;
  labels?: Record<string, string>;
  gpu_total: number;
  gpu_free: number;
  /** RAM in GiB (rounded down); absent = the agent did not report it. */
  memory_gb?: number;
  /** RAM the kernel says is available (MemAvailable), GiB rounded down; absent = not reported. */
  memory_free_gb?: number;
  /** Paths of the weights the node reports; absent = it reported none or was not asked. */
  models_on_disk?: string[];
  /** Local filesystems holding weights, summed, GiB; absent = unknown (not a full disk). */
  disk_free_gb?: number;
  disk_total_gb?: number;
  gpu_classes?: string[];
  fabrics?: string[];
  /** "gpu 3: <first problem>" per GPU kept out of placement. */
  unhealthy_gpus?: string[];
  /** Set when the GPU probe itself failed: the node's GPUs are unknown. */
  gpu_probe_error?: string;
  /** "4s", "3m12s"; empty = no heartbeat yet. */
  last_seen_ago: string;
  agent_version?: string;
  replicas: number;
  /** Set while the node drains and a replica cannot be moved off it yet: why, in words. The replica keeps serving meanwhile. */
  drain_blocked?: string[];
  /** "pending" while the node waits for an admin's approval and takes no new replicas; absent = approved. */
  approval?: 'pending';
  /** What changed in the node's GPUs since it was approved, in words; absent = nothing. Cleared by approving it. */
  hardware_change?: string;
}

/** DELETE /api/v1/nodes/{id}: what was removed and what becomes of its replicas. */
export interface NodeRemovedView {
  removed: string;
  /** Replicas that had a shard on the node; the reconciler replaces them elsewhere as it would a lost node's. */
  replicas: number;
  note: string;
}

/** POST /api/v1/nodes/{id}/approve. */
export interface NodeApprovedView {
  approved: string;
  /** The GPUs the node is now approved with; absent = it has reported none yet. */
  hardware?: string;
}

/** A per-node join token as listed: never its secret. */
export interface JoinTokenView {
  id: string;
  node: string;
  /** RFC 3339. */
  expires_at: string;
  created_at: string;
  created_by: string;
  /** RFC 3339 of its use; absent = unused. */
  used_at?: string;
  /** unused, used or expired. */
  status: 'unused' | 'used' | 'expired';
}

/** POST /api/v1/join-tokens: the only time the secret is shown. */
export interface JoinTokenCreatedView extends JoinTokenView {
  token: string;
}

/** GET /api/v1/models: one model. */
export interface ModelView {
  name: string;
  aliases?: string[];
  source: string;
  min_replicas: number;
  max_replicas: number;
  ready_replicas: number;
  total_replicas: number;
  fallbacks?: string[];
  profiles: string[];
  /** The engine endpoints the model serves (chat, embeddings, rerank, …): declared, or what its profiles' engines serve. */
  endpoints: string[];
  /** "file": from the catalog file, read-only through the API; "store": added through the API. */
  origin?: 'file' | 'store';
}

export interface ShardFetchView {
  bytes_done: number;
  /** Absent = the size is not known yet. */
  total_bytes?: number;
  bytes_per_second?: number;
  percent?: number;
}

export interface ShardView {
  id: string;
  node: string;
  rank: number;
  gpus: number[];
  state: string;
  error?: string;
  /** Present while the shard fetches weights. */
  fetch?: ShardFetchView;
}

/** GET /api/v1/replicas: one replica. */
export interface ReplicaView {
  id: string;
  model: string;
  profile: string;
  state: string;
  pool?: string;
  fabric?: string;
  endpoint?: string;
  age_seconds: number;
  /** -1 = the router has reported no use, which is not the same as idle. */
  idle_seconds: number;
  error?: string;
  shards: ShardView[];
  /**
   * The engine's load at its agent's last read of its metrics; absent = not
   * reported (not ready, metrics off, an engine or agent that does not say).
   */
  load?: ReplicaLoadView;
}

export interface ReplicaLoadView {
  /** Requests the engine is generating for. */
  running: number;
  /** Requests queued inside the engine for a free sequence. */
  waiting: number;
  /** KV-cache use, 0..1; absent = the engine does not report it (llama.cpp). */
  kv_usage?: number;
  /** How old the sample is; the router stops using one after a few seconds (see the README's routing section). */
  age_ms: number;
}

export interface RejectionView {
  profile: string;
  pool?: string;
  node?: string;
  reason: string;
}

/** GET /api/v1/explain-placement?model= */
export interface ExplainView {
  model: string;
  /** True when the model has replicas that count. */
  placed: boolean;
  /** Absent when placement was never attempted or nothing failed. */
  rejections?: RejectionView[];
}

/** POST /api/v1/nodes/{id}/state */
export interface NodeStateView {
  id: string;
  state: string;
}

/** The words the server accepts for a node's admin state. */
export type NodeStateWord = 'ready' | 'uncordon' | 'cordoned' | 'cordon' | 'draining' | 'drain';

export interface OrphanEntry {
  path: string;
  cache_name: string;
  /** Absent: the agent did not report a size. */
  size_bytes?: number;
  source?: string;
  /** Epoch ms of the last use the agent knows of; absent = unknown. */
  last_used_ms?: number;
}

export interface NodeOrphans {
  node: string;
  entries: OrphanEntry[];
  /** Sum of the sizes that were reported; entries without a size add nothing. */
  reclaimable_bytes: number;
}

/** GET /api/v1/weights/orphans */
export interface OrphansView {
  nodes: NodeOrphans[];
  total_bytes: number;
}

export interface NodeCollectSummary {
  node: string;
  asked: OrphanEntry[];
  asked_bytes: number;
  removed: { path: string; bytes_freed: number }[];
  refused: { path: string; check: string; reason: string }[];
  /** Set when the node could not be asked, and why. */
  unreachable?: string;
}

/** POST /api/v1/weights/collect */
export interface CollectSummary {
  nodes: NodeCollectSummary[];
  asked: number;
  removed: number;
  refused: number;
  unreachable: number;
  bytes_freed: number;
}

/** POST /api/v1/models */
export interface AddedView {
  added: string;
}

/** DELETE /api/v1/models/{name} */
export interface RemovedView {
  removed: string;
}

/**
 * A model definition as an operator writes it (YAML or JSON). Only the fields
 * a client must see are typed; the control plane validates the whole of it.
 */
export interface ModelDefinition {
  name: string;
  source: string;
  profiles: Array<{ engine: string; [field: string]: unknown }>;
  [field: string]: unknown;
}

/** One replica a plan would create: where its shards would run. */
export interface PlannedReplicaView {
  profile: string;
  pool?: string;
  shards: { node: string; rank: number; gpus: number[] }[];
}

/** POST /api/v1/models/plan: per model, what adding it now would place. */
export interface ModelPlanView {
  name: string;
  /** Replicas the model wants at once (scaling.min). */
  wanted: number;
  /** Fewer than `wanted` means the rest could not be placed; `explain` says why. */
  placed: PlannedReplicaView[];
  explain?: string;
}

export interface ModelPlansView {
  models: ModelPlanView[];
}

/** GET /api/v1/replicas/{id}/log: the newest lines of one shard's engine log, as its node keeps it. */
export interface ModelLogView {
  replica: string;
  shard: string;
  rank: number;
  node: string;
  lines: string[];
}

/** GET /api/v1/keys: one API key; the secret is never listed. */
export interface KeyView {
  id: string;
  name: string;
  /** The secret's first characters, for telling keys apart. */
  prefix: string;
  state: 'active' | 'revoked' | 'expired';
  /** Null = every model. */
  allowed_models: string[] | null;
  /** Null = no limit. */
  requests_per_minute: number | null;
  tokens_per_minute: number | null;
  /** Null = never. */
  expires_at: string | null;
  created_at: string;
  created_by: string;
  revoked_at: string | null;
}

/** POST /api/v1/keys: the new key, with its secret shown this once. */
export interface CreatedKeyView extends KeyView {
  secret: string;
  note: string;
}

/** POST /api/v1/keys: what may be asked for. */
export interface NewKey {
  name: string;
  allowed_models?: string[] | null;
  requests_per_minute?: number | null;
  tokens_per_minute?: number | null;
  expires_at?: string | null;
}

/** GET /api/v1/usage: totals per key, model and endpoint since the store was made. */
export interface UsageView {
  key_id: string;
  model: string;
  /** The API called (chat, completions, embeddings, rerank, score, transcriptions, tokenize, detokenize, messages, responses); 'unknown' for what was counted before usage was kept per endpoint. */
  endpoint: string;
  requests: number;
  errors: number;
  prompt_tokens: number;
  completion_tokens: number;
}

/**
 * GET /api/v1/events: one thing the fleet did on its own, and why. Kinds:
 * scale (from → to wanted replicas), node_joined, node_state, node_back,
 * node_stale, node_lost, drain, replica_placed, replica_ready,
 * replica_failed, replica_lost, placement_failed; a reader shows a kind it does not know as it is.
 * Absent fields are not about that (no model for a node joining; from and
 * to only on scale).
 */
export interface EventView {
  /** Grows with time: `?after=<id>` asks for newer ones only. */
  id: number;
  /** RFC 3339, UTC. */
  at: string;
  kind: string;
  model?: string;
  node?: string;
  replica?: string;
  from?: number;
  to?: number;
  message: string;
}

/** GET /api/v1/events[?model=M][&limit=N][&after=ID]: newest first. */
export interface EventsView {
  events: EventView[];
}

/** GET /api/v1/control-planes: one instance. With one instance (SQLite) it is alone, leading, without an epoch. */
export interface ControlPlaneView {
  id: string;
  /** The admin listener's URL as the instance bound it; absent = not listening yet. */
  address?: string;
  client_url?: string;
  agent_url?: string;
  is_leader: boolean;
  /** The leadership epoch; present only on the leader of several instances. */
  epoch?: number;
  /** ISO time of the instance's last sync with the store. */
  last_seen: string;
  /** Seconds since last_seen by the answering instance's clock; more than a few = the instance is gone. */
  last_seen_seconds: number;
  /** True for the instance that answered. */
  self: boolean;
}

/** GET /api/v1/nodes with filters and a page; every field absent = every node, as before. */
export interface NodeListQuery {
  /** Admin states (ready, cordoned, draining), livenesses (up, stale, lost) or pending; one kind's words are alternatives, kinds must all hold. */
  state?: string[];
  /** key=value (or a key alone for any value); all must match. */
  labels?: string[];
  /** Part of the id, hostname or a GPU class, any case. */
  q?: string;
  /** At most this many (1 to 1000); absent = every match. */
  limit?: number;
  /** Only nodes after this id: the previous page's last. */
  after?: string;
}

/** One page of the node list, with what the page headers said. */
export interface NodeListPage {
  nodes: NodeView[];
  /** Nodes that match in all (X-Total-Count); null = not said: a control plane older than paging, which sent every node unfiltered. */
  total: number | null;
  /** The `after` of the next page (from Link rel="next"); null = this is the last. */
  next: string | null;
}
