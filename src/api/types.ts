// The admin API's JSON, as the wire carries it: field names exactly as the
// control plane sends them (the seed's snake_case). Declared here rather than
// imported from src/control so that ctl, the dashboard tests and the e2e tests
// depend on the wire, never on the server's internals; a lint rule keeps it so.
// Optional fields are the server's omitempty: absent means "not reported",
// which a reader must show as unknown, never as zero.
import type { ShadowRuleView, SplitTargetView } from './traffic-types.js';

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
  /** Where its requests go by weight (docs/splits-and-shadows.md); absent = its own replicas serve them. */
  split?: SplitTargetView[];
  /** What keeps a caller on one side of the split: request, key or user; absent with no split. */
  split_by?: 'request' | 'key' | 'user';
  /** The candidate a share of its requests is copied to; absent = none. */
  shadow?: ShadowRuleView;
  /** An `engine: remote` model's last probe (docs/remote-endpoints.md); absent = not a remote model. */
  remote?: RemoteHealthView;
}

/** A remote endpoint's or peer fleet's health as its last probe saw it. */
export interface RemoteHealthView {
  /** False = out of routing until a probe passes. */
  healthy: boolean;
  /** Why not, or 'not probed yet'; '' when healthy. */
  reason: string;
  /** A peer llmgw's ready replicas of the model, and the requests they run and queue; absent = not a peer (or it did not say). */
  ready?: number;
  running?: number;
  waiting?: number;
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
  /** The prefix cache's hit rate, 0..1, over the engine's recent lookups; absent = the engine does not report one (llama.cpp). */
  cache_hit_rate?: number;
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
  /** Why the model runs or does not, first sentence first: the cause in words, with the numbers behind it. Absent from an older control plane. */
  summary?: string[];
  /** The model's scaling.min; absent from an older control plane. */
  min_replicas?: number;
  /** Replicas that serve now; absent from an older control plane. */
  ready_replicas?: number;
  /** Per profile tried by the last failed pass: how many nodes fit it. Absent = nothing failed to place. */
  profiles?: ProfileFitCountView[];
  /** Replicas that count toward the wanted number but do not serve (pending, fetching, starting) or failed, and why; absent = none. */
  not_running?: NotRunningView[];
}

/** How many nodes fit one profile of a model in the last placement pass that failed for it. */
export interface ProfileFitCountView {
  profile: string;
  pool?: string;
  nodes_fit: number;
  node_count: number;
  /** Kubernetes-style: "0/3 nodes fit profile h100: 2 have no GPUs, 1 is cordoned". */
  line: string;
}

/** A replica of a model that does not serve, and what it waits for or why it failed. */
export interface NotRunningView {
  replica: string;
  profile: string;
  state: string;
  /** The nodes of its shards, rank order. */
  nodes: string[];
  /** Seconds since it entered this state. */
  since_seconds: number;
  /** In words: the engine's last error, the fetch it waits for, the engine it waits to answer. */
  reason: string;
  /** Consecutive failures; absent = none. */
  failures?: number;
  /** Seconds until a failed replica is tried again; absent = not waiting to be retried. */
  retry_in_seconds?: number;
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
  /**
   * Per node, the newest collect that asked it anything: what it removed,
   * refused and why, from the audit log. Absent = the control plane keeps no
   * audit log (no store); [] = no collect asked any node yet.
   */
  last_collect?: NodeLastCollectView[];
}

/** What one node did the last time collect asked it. */
export interface NodeLastCollectView {
  node: string;
  /** RFC 3339, UTC. */
  at: string;
  /** Who ran the collect, as the audit log has it. */
  actor: string;
  removed: string[];
  refused: { path: string; check: string; reason: string }[];
  /** Set when the node could not be asked, and why. */
  unreachable?: string;
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
  /** Per profile in order of preference: the nodes that could take a shard now and why each other one could not; absent from an older control plane. */
  fit?: ProfileFitView[];
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
  /** The team whose limits cap the key's; absent from a control plane without teams. */
  team?: string;
  /** Its requests' class when a model queues them (docs/fair-share.md); absent from control planes before it. */
  priority?: 'interactive' | 'batch';
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
  /** Absent = `default`. The key may narrow the team's limits, never widen them. */
  team?: string;
  /** Absent = interactive. */
  priority?: 'interactive' | 'batch';
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
  /** US dollars at the model's price when it was used; absent from a control plane before prices. */
  cost_usd?: number;
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

/**
 * GET /api/v1/nodes/{id}: one node, its replicas, and the operator's two
 * questions about it: why it runs nothing (`idle`) and what its drain waits
 * for (`drain_waits`).
 */
export interface NodeDetailView {
  node: NodeView;
  /** Replicas with a shard on this node. */
  replicas: ReplicaView[];
  /** Sentences, the cause first: why it is idle, what its drain waits for; empty = it serves and nothing holds it back. */
  summary: string[];
  /** Present when no replica runs on the node. */
  idle?: NodeIdleView;
  /** Present while the node drains: one entry per replica still on it. [] = nothing left, the drain is done. */
  drain_waits?: DrainWaitView[];
}

export interface NodeIdleView {
  /** Why no replica is here, most decisive first: the node's own state, then model by model. */
  reasons: string[];
  /** Every model in the catalog, and whether this node could take a replica of it now. */
  models: NodeModelFitView[];
}

export interface NodeModelFitView {
  model: string;
  /** True when placement would put a replica of it on this node now, were one wanted. */
  fits: boolean;
  /** Replicas of the model that count (pending to ready) and the nodes they are on. */
  replicas: number;
  nodes: string[];
  /** The model's scaling.min. */
  min_replicas: number;
  /** Why it is not here, in words ("needs 2 GPUs…", "its 1 replica runs on n1", "wants none (min 0)"). */
  reason: string;
}

/** A replica still on a draining node, and what the drain waits for before it goes. */
export interface DrainWaitView {
  replica: string;
  model: string;
  state: string;
  /** In words, with the numbers: a replacement being placed or started, requests in flight, the deadline. */
  waits_for: string;
  /** Seconds it has been in its state. */
  since_seconds: number;
  /** The replacement placed elsewhere; absent = none yet. */
  replacement?: string;
  replacement_state?: string;
  /** Requests the router has in flight on it; absent = none reported. */
  in_flight?: number;
  /** Seconds until the drain deadline stops it regardless; only once it is marked draining. */
  deadline_in_seconds?: number;
}

/** GET /api/v1/audit: one admin write (or node join), with who did it. */
export interface AuditEntryView {
  /** Grows with time. */
  id: number;
  /** RFC 3339, UTC. */
  at: string;
  /** The identity the request proved: admin-token, dashboard:<session>, node:<id>, loopback-no-token. */
  actor: string;
  /** What the caller called itself (X-Llmgw-Actor, ctl's --actor); absent = nothing. */
  actor_label?: string;
  /** model.add, model.remove, node.state, node.approve, node.remove, node.join, join_token.create, key.create, key.revoke, weights.collect, … */
  action: string;
  /** The model name, node id, key id or `*` the action was about. */
  target: string;
  /** The change in words, with its before and after where the record has them. */
  summary: string;
  /** The record as written: before/after (`from`, `to`), the definition added or removed, what a collect removed. */
  detail: Record<string, unknown>;
}

/** GET /api/v1/audit[?since=][&actor=][&action=][&target=][&limit=]: newest first. */
export interface AuditView {
  entries: AuditEntryView[];
  /** False when this control plane has no store: nothing is recorded, and `entries` is empty for that reason. */
  recorded: boolean;
}

/** One upstream attempt of a request: which replica, on which nodes, and how it ended. */
export interface RequestAttemptView {
  /** The model the replica serves: the requested one, or a fallback. */
  model: string;
  replica: string;
  /** The nodes of the replica's shards; absent = not known to this router. */
  nodes?: string[];
  /** answered: the engine's answer went to the client (whatever its status); failed: before the first byte, and the next attempt was tried. */
  outcome: 'answered' | 'failed';
  /** Why it failed, in words (connection refused, 503 from the engine, …); absent when answered. */
  reason?: string;
  /** The engine's HTTP status; absent = none came (a connection error). */
  status?: number;
  duration_ms: number;
  /** When it was sent, ms after the request arrived; absent = not recorded. */
  start_ms?: number;
  /** The backoff waited before it, ms; absent = none. */
  backoff_ms?: number;
  /** Why this replica: every candidate's score and the rule that picked it; absent = not recorded. */
  choice?: RequestChoiceView;
  /** The routing rule that sent this attempt where it went (a spill-over, …); absent = the model's own replicas. */
  rule?: string;
}

/** The chooser's reasons for one attempt. */
export interface RequestChoiceView {
  /**
   * The rule that picked the winner: only-candidate, least-load,
   * least-load-tie (equal lowest, one at random), two-choices
   * (least-inflight), prefix-owner, prefix-next (the owner was over the
   * load bound), prefix-all-over.
   */
  by: string;
  candidates: {
    replica: string;
    /** The score compared, in requests, lower is better (expected load; in-flight under least-inflight). */
    load: number;
    /** True = from a fresh engine sample; absent = this router's in-flight count. */
    sampled?: boolean;
    /** Expected prefix-cache hit, 0..1; absent = not estimated. */
    expected_hit?: number;
  }[];
  /** Prefix routing: the ring's owner of the prompt prefix, and the load bound; absent otherwise. */
  ring_owner?: string;
  bound?: number;
}

/** One step of a request's life, in the order they happened. */
export interface RequestEventView {
  /** ms after the request arrived. */
  at_ms: number;
  /**
   * arrived, admitted, queued, limited, cold_hold, cold_ready, cold_gave_up,
   * cold_skipped, backoff, chosen, failed, answered, fallback, first_token,
   * broken, tokens, cost, refused, done.
   */
  kind: string;
  /** The step in plain words, with its numbers. */
  says: string;
  /** The attempt it belongs to, 1-based; absent = none. */
  attempt?: number;
}

/**
 * GET /api/v1/requests/{id}: one request as the router that served it
 * recorded it. The log is kept in memory per control plane (the last
 * `capacity` requests): with several, ask the one whose listener answered.
 */
export interface RequestRecordView {
  /** The x-request-id the router sent back. */
  id: string;
  /**
   * How many other requests in the log carried the same id (a client that
   * reuses its x-request-id); this is the newest of them, and
   * GET /api/v1/requests?id= lists them all. Absent = none.
   */
  same_id?: number;
  /** RFC 3339, UTC: when it arrived. */
  at: string;
  /** The model as the client named it resolved to its canonical name. */
  model: string;
  endpoint: string;
  stream: boolean;
  /** The API key's prefix; absent = no key (a loopback router without keys). */
  key?: string;
  /** The status the client got; 499 = the client went away first. */
  status: number;
  /** ok, or the failure's kind: client_gone, timed_out, no_replica, upstream_failed, engine_error, rate_limited. */
  outcome: string;
  /** Why it failed, in words; absent when it succeeded. */
  cause?: string;
  /** The replica that answered; absent = none did. */
  replica?: string;
  nodes?: string[];
  /** Set when a fallback answered instead of the model asked for. */
  fallback?: string;
  attempts: RequestAttemptView[];
  /** How long it waited for a replica of a model at zero to start; absent = it did not wait. */
  held_ms?: number;
  duration_ms: number;
  /** Time to the first byte of the answer; absent = none came. */
  ttft_ms?: number;
  /** As the engine counted them; absent = not reported. */
  prompt_tokens?: number;
  completion_tokens?: number;
  /** How admission went; absent = not recorded. */
  admission?: { outcome: 'admitted' | 'limited' | 'queued'; done_ms: number; queued_ms?: number; limit?: string };
  /** The cold hold; absent = it was not held. */
  cold?: { model: string; start_ms: number; held_ms: number; end: string; replica?: string };
  /** In the currency of the price table; absent = no price for the model. */
  cost?: number;
  /** The routing rule that sent the request where it went; absent = none. */
  rule?: string;
  /** Its OpenTelemetry trace id; absent = not traced. */
  trace_id?: string;
}

/** GET /api/v1/requests/{id}: the record, with its timeline. */
export interface RequestDetailView extends RequestRecordView {
  timeline: RequestEventView[];
}

/** GET /api/v1/requests[?model=][&status=][&failed=true][&limit=]: newest first, from this control plane's memory. */
export interface RequestsView {
  requests: RequestRecordView[];
  /** This control plane's instance id: the log is its own. */
  instance: string;
  /** How many requests the log holds now, and at most. */
  kept: number;
  capacity: number;
}

/** One weights entry on a node's disk, and which model wants it. */
export interface DiskWeightsView {
  path: string;
  /** Absent = the agent did not report a size. */
  size_bytes?: number;
  /** cache: fetched by llmgw (collect may remove it); model_dir: the operator's, never deleted. */
  kind: 'cache' | 'model_dir';
  source?: string;
  /** Catalog models whose source this is; empty = no model wants it (an orphan, for a cache entry). */
  models: string[];
  /** RFC 3339 of the last use the agent knows of; absent = unknown. */
  last_used?: string;
}

/** One filesystem of a node, and what fills it. */
export interface DiskUseView {
  mount_point: string;
  fs_type?: string;
  /** A network filesystem: its space is not this node's to spend, and placement never counts it. */
  shared: boolean;
  /** Absent = not reported (unknown, not zero). */
  total_bytes?: number;
  free_bytes?: number;
  used_bytes?: number;
  /** The agent's directories (cache, model dirs) on this filesystem. */
  paths: string[];
  /** The weights on this filesystem, largest first. */
  weights: DiskWeightsView[];
  /** Sums of the sizes reported: weights some model wants, and cache entries none wants (collect reclaims these). */
  wanted_bytes: number;
  orphan_bytes: number;
  /** Operator's model directories no model names. */
  unused_model_dir_bytes: number;
  /** Used space that is not weights llmgw knows of (logs, other files); absent when used is not known. */
  other_bytes?: number;
}

/** GET /api/v1/nodes/{id}/disks: where this node's disk went. */
export interface NodeDisksView {
  node: string;
  disks: DiskUseView[];
  /** Weights on no filesystem the agent reported. */
  elsewhere: DiskWeightsView[];
  /** Sentences: each filesystem's use split into weights by model, orphans and the rest. */
  summary: string[];
}

/** One profile of a planned model: which nodes could take a shard of it now, and why the others could not. */
export interface ProfileFitView {
  profile: string;
  engine: string;
  /** Nodes per replica; above 1 a replica also needs that many fitting nodes on one fabric. */
  shards: number;
  fits: string[];
  rejected: { node: string; reasons: string[] }[];
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
