// The admin API's views: the JSON shapes of the seed (field names exactly as
// it has them), built in process from the control plane's state. Exported as
// functions because the dashboard renders the same data server-side; going
// back out through HTTP for what this process already holds would add a way
// for the two to disagree.
import type { Catalog } from '../catalog/index.js';

/** A model as `ctl models` shows it. */
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
  /** Where the model is defined: "file" (read-only through the API) or "store". */
  origin: 'file' | 'store';
}

export interface SummaryView {
  models: { total: number; from_file: number; stored: number; not_placed: string[] };
  nodes: { total: number; by_state: Record<string, number>; by_liveness: Record<string, number> };
  replicas: { total: number; by_state: Record<string, number> };
  /** Sentences for whatever needs a person: unplaced models, lost nodes, unhealthy GPUs, failing replicas. Empty = nothing. */
  attention: string[];
  /** False when the control plane runs with `store: none`: models can only come from the catalog file. */
  store: boolean;
}

/** Replica counts per model, from whatever tracks replicas; absent before the reconciler exists. */
export interface ReplicaCounts {
  ready: number;
  total: number;
}

export interface ViewSources {
  catalog: Catalog;
  /** Per model name; a model with no entry has none. */
  replicaCounts?: () => ReadonlyMap<string, ReplicaCounts>;
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
      origin: m.origin,
    };
    // omitempty in the seed: an empty list is left out, not sent as [].
    if (m.aliases.length) view.aliases = [...m.aliases];
    if (m.fallbacks.length) view.fallbacks = [...m.fallbacks];
    return view;
  });
}

export function summaryView(src: ViewSources): SummaryView {
  const models = modelViews(src);
  const notPlaced = models.filter((m) => m.min_replicas > 0 && m.total_replicas === 0).map((m) => m.name);
  const attention: string[] = [];
  if (!src.catalog.writable) attention.push('this control plane has no store: models come only from the catalog file, and writes are refused');
  return {
    models: {
      total: models.length,
      from_file: models.filter((m) => m.origin === 'file').length,
      stored: models.filter((m) => m.origin === 'store').length,
      not_placed: notPlaced,
    },
    nodes: { total: 0, by_state: {}, by_liveness: {} },
    replicas: { total: 0, by_state: {} },
    attention,
    store: src.catalog.writable,
  };
}
