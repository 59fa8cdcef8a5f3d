// What each dashboard page shows, gathered from the very view functions the
// admin API serves (src/control/adminapi/views.ts, src/control/weights), in
// this process: a number on a page and the same number from `llmgw ctl` are
// one computation, so they cannot disagree. No page reads state any other way.
import type {
  ExplainView,
  ModelView,
  NodeDetailView,
  NodeView,
  OrphansView,
  ReplicaView,
  SummaryView,
  UsageView,
} from '../../api/types.js';
import {
  explainView,
  modelViews,
  nodeDetailView,
  type NodePage,
  type NodeQuery,
  nodeViewPage,
  nodeViews,
  replicaViews,
  summaryView,
  type AdminApiOptions,
} from '../adminapi/index.js';
import type { Model } from '../catalog/index.js';
import { orphansView, orphansWithLastCollect, type WeightsApiOptions } from '../weights/index.js';

/** One recorded event, as GET /api/v1/events will serve it. */
export interface DashboardEvent {
  /** Epoch ms. */
  atMs: number;
  /** What kind of thing happened, e.g. "replica.failed". */
  kind: string;
  message: string;
}

/**
 * Where the node and model pages get their events from (the control plane's
 * events log, newest first). Absent: the pages say that none are recorded.
 */
export type EventsSource = (about: { model?: string; node?: string }) => Promise<readonly DashboardEvent[]>;

export interface DashboardSources {
  /** The admin API's own options: the views and the cordon/drain action read and change exactly what /api/v1 does. */
  admin: AdminApiOptions;
  /** The weights API's own options: orphans and collect. */
  weights: WeightsApiOptions;
  events?: EventsSource;
  /** The rows GET /api/v1/usage serves; absent = this control plane keeps no usage (no store), and the traffic page says so. */
  usage?: () => Promise<readonly UsageView[]>;
}

/** Usage summed over keys, per model and endpoint: what the traffic page lists. */
export interface EndpointUsage {
  model: string;
  endpoint: string;
  requests: number;
  errors: number;
  promptTokens: number;
  completionTokens: number;
}

/** Null = no usage is kept (no store). Ordered by model, then endpoint. */
export async function endpointUsageData(src: DashboardSources): Promise<EndpointUsage[] | null> {
  if (!src.usage) return null;
  const sums = new Map<string, EndpointUsage>();
  for (const r of await src.usage()) {
    const k = `${r.model}\u0000${r.endpoint}`;
    const t = sums.get(k) ?? {
      model: r.model,
      endpoint: r.endpoint,
      requests: 0,
      errors: 0,
      promptTokens: 0,
      completionTokens: 0,
    };
    t.requests += r.requests;
    t.errors += r.errors;
    t.promptTokens += r.prompt_tokens;
    t.completionTokens += r.completion_tokens;
    sums.set(k, t);
  }
  return [...sums.values()].sort((a, b) => a.model.localeCompare(b.model) || a.endpoint.localeCompare(b.endpoint));
}

export interface OverviewData {
  summary: SummaryView;
  nodes: NodeView[];
  models: ModelView[];
  replicas: ReplicaView[];
}

export function overviewData(src: DashboardSources): OverviewData {
  return {
    summary: summaryView(src.admin),
    nodes: nodeViews(src.admin),
    models: modelViews(src.admin),
    replicas: replicaViews(src.admin),
  };
}

/** The page of the node list `query` asks for (the admin API's own selection: node-query.ts). */
export function nodesData(src: DashboardSources, query: NodeQuery): NodePage<NodeView> {
  return nodeViewPage(src.admin, query);
}

export interface NodeData {
  node: NodeView;
  /** Replicas with at least one shard on this node. */
  replicas: ReplicaView[];
  events: readonly DashboardEvent[] | null;
  /** GET /api/v1/nodes/{id}: why it is idle, what its drain waits for. */
  why: NodeDetailView;
}

/** Null when no node has that id. */
export async function nodeData(src: DashboardSources, id: string): Promise<NodeData | null> {
  const why = nodeDetailView(src.admin, id);
  if (!why) return null;
  return {
    node: why.node,
    replicas: replicaViews(src.admin).filter((r) => r.shards.some((s) => s.node === id)),
    events: src.events ? await src.events({ node: id }) : null,
    why,
  };
}

export function modelsData(src: DashboardSources): ModelView[] {
  return modelViews(src.admin);
}

export interface ModelData {
  model: ModelView;
  definition: Model;
  replicas: ReplicaView[];
  explain: ExplainView;
  /** Null: no events source yet (not the same as none recorded). */
  events: readonly DashboardEvent[] | null;
}

/** By name or alias; null when the catalog has no such model. */
export async function modelData(src: DashboardSources, asked: string): Promise<ModelData | null> {
  const definition = src.admin.catalog.resolve(asked);
  if (!definition) return null;
  const model = modelViews(src.admin).find((m) => m.name === definition.name);
  if (!model) return null;
  return {
    model,
    definition,
    replicas: replicaViews(src.admin, definition.name),
    explain: explainView(src.admin, definition.name),
    events: src.events ? await src.events({ model: definition.name }) : null,
  };
}

export function replicasData(src: DashboardSources): ReplicaView[] {
  return replicaViews(src.admin);
}

export function orphansData(src: DashboardSources, node?: string): OrphansView {
  return orphansView(src.weights.catalog, src.weights.inventory, node);
}

/** The orphans with what each node did at its last collect, as GET /api/v1/weights/orphans serves them. */
export function orphansAndLastCollect(src: DashboardSources): Promise<OrphansView> {
  return orphansWithLastCollect(src.weights, undefined);
}
