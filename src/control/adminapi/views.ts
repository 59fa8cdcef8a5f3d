// The admin API's views: the JSON shapes of the seed (field names exactly as
// it has them), built in process from the control plane's state. Exported as
// functions because the dashboard renders the same data server-side; going
// back out through HTTP for what this process already holds would add a way
// for the two to disagree.
import type {
  ExplainView,
  ModelView,
  NodeDetailView,
  NodeView,
  RemoteHealthView,
  ReplicaView,
  ShardView,
  SummaryView,
} from '../../api/types.js';
import type { Catalog } from '../catalog/index.js';
import { fabricNames, type Inventory, localDisk, type Node } from '../inventory/index.js';
import { toRejectionViews } from '../placement/index.js';
import {
  type BlockedDrain,
  COUNTING_STATES,
  type ModelRejections,
  type ReplicaRecord,
  toPlacementNode,
} from '../reconciler/index.js';
import { drainWaits, modelWhy, nodeIdle, nodeSummary } from './why.js';
import type { ReplicaLoad } from '../scaling/index.js';

/** Replica counts per model, from whatever tracks replicas; absent before the reconciler exists. */
export interface ReplicaCounts {
  ready: number;
  total: number;
}

export interface ViewSources {
  catalog: Catalog;
  /** Absent on a control plane built without one (tests of the catalog alone). */
  inventory?: Inventory;
  now?: () => number;
  /** Shards per node and GPUs in use per node, from the reconciler; absent before it exists. */
  nodeUsage?: () => ReadonlyMap<string, { replicas: number; gpusInUse: ReadonlySet<number> }>;
  /** Per model name; a model with no entry has none. */
  replicaCounts?: () => ReadonlyMap<string, ReplicaCounts>;
  /** A remote model's last probe; null = not a remote model. Absent = no remote probing (the views show none). */
  remoteHealth?: (model: string) => RemoteHealthView | null;
  /** Every replica the reconciler holds; absent before it exists (the views then show none). */
  replicas?: () => readonly ReplicaRecord[];
  /** The last pass's rejections for a model; undefined = nothing failed to place. */
  explainPlacement?: (model: string) => ModelRejections | undefined;
  /** Download progress of a fetching shard, from the agent's last heartbeat. */
  fetchProgress?: (
    shardId: string,
  ) => { bytes_done: number; total_bytes?: number; bytes_per_second?: number } | undefined;
  /** Replicas the last pass could not move off draining nodes. */
  blockedDrains?: () => readonly BlockedDrain[];
  /** A replica's engine load from its agent's last heartbeat; undefined = none reported. */
  load?: (replicaId: string) => ReplicaLoad | undefined;
  /** Requests the router has in flight on a replica; undefined = none reported. Absent = never reported. */
  inFlight?: (replicaId: string) => number | undefined;
  /** How long a draining replica may finish its requests before it is stopped anyway; absent = 5 minutes, the reconciler's default. */
  drainDeadlineMs?: number;
}

/** The reconciler's default drain deadline, for a control plane that does not say its own. */
const DEFAULT_DRAIN_DEADLINE_MS = 5 * 60_000;

/** Replicas, optionally of one model (by name), id order. */
export function replicaViews(src: ViewSources, model?: string): ReplicaView[] {
  const now = src.now?.() ?? Date.now();
  return (src.replicas?.() ?? [])
    .filter((r) => !model || r.model === model)
    .map((r) => {
      const v: ReplicaView = {
        id: r.id,
        model: r.model,
        profile: r.profile,
        state: r.state,
        age_seconds: Math.max(0, Math.floor((now - r.createdAtMs) / 1000)),
        idle_seconds: r.lastUsedAtMs === null ? -1 : Math.max(0, Math.floor((now - r.lastUsedAtMs) / 1000)),
        shards: r.shards.map((s) => {
          const fetch = s.state === 'fetching' ? src.fetchProgress?.(s.id) : undefined;
          return {
            id: s.id,
            node: s.nodeId,
            rank: s.rank,
            gpus: [...s.gpuIndices],
            state: s.state,
            ...(s.error ? { error: s.error } : {}),
            ...(fetch
              ? {
                  fetch: {
                    ...fetch,
                    ...(fetch.total_bytes ? { percent: Math.floor((100 * fetch.bytes_done) / fetch.total_bytes) } : {}),
                  },
                }
              : {}),
          };
        }),
      };
      // omitempty in the seed.
      if (r.pool) v.pool = r.pool;
      if (r.fabric) v.fabric = r.fabric;
      if (r.endpoint) v.endpoint = r.endpoint;
      if (r.error) v.error = r.error;
      // Only a replica that serves has a load worth showing; a stopped one's last sample would mislead.
      const load = r.state === 'ready' || r.state === 'draining' ? src.load?.(r.id) : undefined;
      if (load) {
        v.load = {
          running: load.running,
          waiting: load.waiting,
          ...(load.kvUsage === undefined ? {} : { kv_usage: load.kvUsage }),
          ...(load.cacheHitRate === undefined ? {} : { cache_hit_rate: load.cacheHitRate }),
          age_ms: Math.max(0, now - load.sampledAtMs),
        };
      }
      return v;
    });
}

/** The placement explanation of one model (by its catalog name); the caller has checked that it exists. */
export function explainView(src: ViewSources, model: string, shownAs: string = model): ExplainView {
  const placed = (src.replicas?.() ?? []).some((r) => r.model === model && COUNTING_STATES.has(r.state));
  const v: ExplainView = { model: shownAs, placed };
  const last = src.explainPlacement?.(model);
  if (last && last.rejections.length) v.rejections = toRejectionViews(last.rejections);
  const definition = src.catalog.get(model);
  if (definition) {
    const now = src.now?.() ?? Date.now();
    const fetch = src.fetchProgress;
    Object.assign(
      v,
      modelWhy({
        model: definition,
        replicas: src.replicas?.() ?? [],
        rejections: last?.rejections.length ? last : undefined,
        ...(fetch ? { fetch: (id: string) => fetchView(fetch(id)) } : {}),
        nowMs: now,
      }),
    );
  }
  return v;
}

function fetchView(f: ReturnType<NonNullable<ViewSources['fetchProgress']>>): ShardView['fetch'] {
  if (!f) return undefined;
  return { ...f, ...(f.total_bytes ? { percent: Math.floor((100 * f.bytes_done) / f.total_bytes) } : {}) };
}

/**
 * GET /api/v1/nodes/{id}: one node, its replicas, why it is idle and what
 * its drain waits for. Null when no node has that id.
 */
export function nodeDetailView(src: ViewSources, id: string): NodeDetailView | null {
  const inv = src.inventory;
  const node = inv?.get(id);
  // This node's view alone: rendering the whole fleet's to keep one costs O(nodes) per request.
  const view = node ? nodeViews(src, [node])[0] : undefined;
  if (!inv || !node || !view) return null;
  const now = src.now?.() ?? Date.now();
  const records = src.replicas?.() ?? [];
  const here = replicaViews(src).filter((r) => r.shards.some((s) => s.node === id && s.state !== 'stopped'));
  const models = src.catalog.models();
  const waits =
    node.adminState === 'draining'
      ? drainWaits({
          nodeId: id,
          replicas: records,
          ...(src.inFlight ? { inFlight: src.inFlight } : {}),
          drainDeadlineMs: src.drainDeadlineMs ?? DEFAULT_DRAIN_DEADLINE_MS,
          blockedDrains: src.blockedDrains?.() ?? [],
          rejections: (m) => src.explainPlacement?.(m),
          models,
          nowMs: now,
        })
      : undefined;
  // Idle: nothing that counts or drains is on it (a failed replica's leftovers do not make a node busy).
  const busy = records.some(
    (r) => r.state !== 'failed' && r.shards.some((s) => s.nodeId === id && s.state !== 'stopped'),
  );
  let idle: NodeDetailView['idle'];
  if (!busy) {
    const gpusInUse = [...(src.nodeUsage?.().get(id)?.gpusInUse ?? [])];
    idle = nodeIdle({
      node: { ...toPlacementNode(node, inv.liveness(node, now)), gpusInUse },
      lastSeenAgo: view.last_seen_ago,
      models,
      replicas: records,
    });
  }
  return {
    node: view,
    replicas: here,
    summary: nodeSummary(id, waits, idle),
    ...(idle ? { idle } : {}),
    ...(waits ? { drain_waits: waits } : {}),
  };
}

export function modelViews(src: ViewSources): ModelView[] {
  const counts = src.replicaCounts?.() ?? new Map<string, ReplicaCounts>();
  return src.catalog.models().map((m) => {
    const c = counts.get(m.name);
    const view: ModelView = {
      name: m.name,
      source: m.source,
      min_replicas: m.scaling.min,
      max_replicas: m.scaling.max,
      ready_replicas: c?.ready ?? 0,
      total_replicas: c?.total ?? 0,
      profiles: m.profiles.map((p) => p.name),
      endpoints: [...m.endpoints],
      origin: m.origin,
    };
    // omitempty in the seed: an empty list is left out, not sent as [].
    if (m.aliases.length) view.aliases = [...m.aliases];
    if (m.fallbacks.length) view.fallbacks = [...m.fallbacks];
    if (m.split) {
      view.split = m.split.map((t) => ({ model: t.model, weight: t.weight }));
      view.split_by = m.splitBy;
    }
    if (m.shadow)
      view.shadow = {
        model: m.shadow.model,
        share: m.shadow.share,
        max_concurrent: m.shadow.maxConcurrent,
        timeout_ms: m.shadow.timeoutMs,
      };
    const remote = src.remoteHealth?.(m.name);
    if (remote) {
      const { healthy, reason, ready, running, waiting } = remote;
      view.remote = {
        healthy,
        reason,
        ...(ready === undefined ? {} : { ready }),
        ...(running === undefined ? {} : { running }),
        ...(waiting === undefined ? {} : { waiting }),
      };
    }
    return view;
  });
}

export function summaryView(src: ViewSources): SummaryView {
  const models = modelViews(src);
  const notPlaced = models.filter((m) => m.min_replicas > 0 && m.total_replicas === 0).map((m) => m.name);
  const nodes = nodeViews(src);
  const attention: string[] = [];
  for (const n of nodes) {
    if (n.liveness === 'lost')
      attention.push(`node ${n.id} is lost: no heartbeat for ${n.last_seen_ago || 'ever since it joined'}`);
    else if (n.liveness === 'stale') attention.push(`node ${n.id} is stale: last heartbeat ${n.last_seen_ago} ago`);
    for (const u of n.unhealthy_gpus ?? []) attention.push(`node ${n.id} ${u}`);
    if (n.gpu_probe_error) attention.push(`node ${n.id}: ${n.gpu_probe_error}`);
    if (n.approval === 'pending')
      attention.push(`node ${n.id} waits for approval and takes no new replicas: llmgw ctl nodes approve ${n.id}`);
    if (n.hardware_change)
      attention.push(
        `node ${n.id}: ${n.hardware_change} since it was approved (llmgw ctl nodes approve ${n.id} accepts it)`,
      );
  }
  for (const m of notPlaced) attention.push(`model ${m} has no replica`);
  const replicas = src.replicas?.() ?? [];
  for (const r of replicas)
    if (r.state === 'failed') attention.push(`replica ${r.id} of ${r.model} failed: ${r.error ?? 'no error reported'}`);
  for (const b of src.blockedDrains?.() ?? []) attention.push(b.reason);
  if (!src.catalog.writable)
    attention.push('this control plane has no store: models come only from the catalog file, and writes are refused');
  return {
    models: {
      total: models.length,
      from_file: models.filter((m) => m.origin === 'file').length,
      stored: models.filter((m) => m.origin === 'store').length,
      not_placed: notPlaced,
    },
    nodes: {
      total: nodes.length,
      by_state: countBy(nodes, (n) => n.state),
      by_liveness: countBy(nodes, (n) => n.liveness),
    },
    replicas: { total: replicas.length, by_state: countBy(replicas, (r) => r.state) },
    attention,
    store: src.catalog.writable,
  };
}

/** Every node's view, or only those of `only` (a page the node query chose: see node-query.ts), in the order given. */
export function nodeViews(src: ViewSources, only?: readonly Node[]): NodeView[] {
  if (!src.inventory) return [];
  const inv = src.inventory;
  const now = src.now?.() ?? Date.now();
  const usage = src.nodeUsage?.() ?? new Map<string, { replicas: number; gpusInUse: ReadonlySet<number> }>();
  // Read once and indexed: asked per node, a fleet of 10,000 with a few blocked drains paid 10,000 scans of them.
  const blockedOn = new Map<string, string[]>();
  for (const b of src.blockedDrains?.() ?? [])
    for (const id of new Set(b.nodeIds)) blockedOn.set(id, [...(blockedOn.get(id) ?? []), b.reason]);
  return (only ?? inv.list()).map((n) => {
    const report = n.report;
    const gpus = report?.gpus ?? [];
    const used = usage.get(n.id);
    const v: NodeView = {
      id: n.id,
      state: n.adminState,
      liveness: inv.liveness(n, now),
      gpu_total: gpus.length,
      gpu_free: gpus.filter((g) => g.problems.length === 0 && !used?.gpusInUse.has(g.index)).length,
      last_seen_ago: n.lastSeenMs === null ? '' : formatAgo(now - n.lastSeenMs),
      replicas: used?.replicas ?? 0,
    };
    if (n.hostname ?? report?.hostname) v.hostname = (n.hostname ?? report?.hostname)!;
    if (n.mgmtAddr) v.mgmt_addr = n.mgmtAddr;
    if (Object.keys(n.labels).length) v.labels = n.labels;
    if (report?.memory_total_bytes) v.memory_gb = Math.floor(report.memory_total_bytes / 2 ** 30);
    if (report?.memory_available_bytes !== undefined)
      v.memory_free_gb = Math.floor(report.memory_available_bytes / 2 ** 30);
    const weights = report?.weights ?? [];
    if (weights.length) v.models_on_disk = weights.map((w) => w.path);
    const disk = localDisk(n);
    if (disk && disk.totalBytes > 0) {
      v.disk_free_gb = Math.floor(disk.freeBytes / 2 ** 30);
      v.disk_total_gb = Math.floor(disk.totalBytes / 2 ** 30);
    }
    const classes = [...new Set(gpus.map((g) => g.class).filter((c): c is string => !!c))];
    if (classes.length) v.gpu_classes = classes;
    const fabrics = fabricNames(n);
    if (fabrics.length) v.fabrics = fabrics;
    const unhealthy = gpus.filter((g) => g.problems.length > 0).map((g) => `gpu ${g.index}: ${g.problems[0]}`);
    if (unhealthy.length) v.unhealthy_gpus = unhealthy;
    if (report?.gpu_probe_error) v.gpu_probe_error = report.gpu_probe_error;
    if (n.agentVersion) v.agent_version = n.agentVersion;
    const blocked = blockedOn.get(n.id);
    if (blocked) v.drain_blocked = blocked;
    if (n.approval === 'pending') v.approval = 'pending';
    if (n.hardwareChange) v.hardware_change = n.hardwareChange;
    return v;
  });
}

/** "4s", "3m12s", "2h5m": how long ago, to the second, like Go's Duration.Round(time.Second). */
export function formatAgo(ms: number): string {
  let s = Math.max(0, Math.round(ms / 1000));
  const h = Math.floor(s / 3600);
  s -= h * 3600;
  const m = Math.floor(s / 60);
  s -= m * 60;
  if (h) return `${h}h${m}m${s}s`;
  if (m) return `${m}m${s}s`;
  return `${s}s`;
}

function countBy<T>(items: readonly T[], key: (t: T) => string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const item of items) out[key(item)] = (out[key(item)] ?? 0) + 1;
  return out;
}

// The wire shapes are defined once, in the typed admin client (src/api), and
// built here: the client and the server cannot disagree about a field.
export type { ExplainView, ModelView, NodeDetailView, NodeView, ReplicaView, ShardView, SummaryView };
