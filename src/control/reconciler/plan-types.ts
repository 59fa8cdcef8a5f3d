// What a reconciler pass reads and what it answers: the input, the options,
// the actions of a plan, and the small helpers every rule shares (wanted
// numbers, backoff, how a catalog model reads to placement). Kept apart from
// plan.ts so that each rule module can import them without importing the
// pass that composes the rules.
import { cacheNameOf } from '../../protocol/index.js';
import { formatDurationMs as formatMs } from '../../units/index.js';
import type { Placement, PlacementNode, PlacementNote, PlacementProfile, Rejection } from '../placement/index.js';
import type { ReplicaRecord } from './types.js';

export interface PlanModel {
  readonly name: string;
  readonly source: string;
  readonly scaling: { readonly min: number; readonly max: number };
  readonly profiles: readonly PlanProfile[];
}

export interface PlanProfile {
  readonly name: string;
  readonly engine: string;
  readonly gpus: number;
  readonly shards: number;
  readonly gpuClasses: readonly string[];
  readonly gpuMemoryGiB: number | null;
  readonly memoryGiB: number | null;
  readonly diskGiB: number | null;
  readonly pool: string | null;
}

export interface PlanInput {
  /** Epoch ms; passed in, never read. */
  readonly now: number;
  readonly models: readonly PlanModel[];
  /** The fleet; `gpusInUse` may be empty: the pass adds the GPUs its replicas hold. */
  readonly nodes: readonly PlacementNode[];
  readonly replicas: readonly ReplicaRecord[];
  /**
   * Requests in flight per replica id, from the router. Absent (or no entry)
   * = the router has reported none, and a draining replica is stopped on the
   * pass after it was marked draining, which is when a router would have
   * seen the mark.
   */
  readonly inFlight?: ReadonlyMap<string, number>;
  /**
   * The seam for demand-based scaling: wanted replicas per model name, from
   * whatever watches demand (src/control/scaling). Absent, or no entry for a
   * model = scaling.min. Always clamped to [min, max]. A model with an entry
   * is scaled down by draining its idlest replicas rather than stopping the
   * newest.
   */
  readonly wanted?: ReadonlyMap<string, number>;
  /**
   * The previous pass's plan. A model that could not be placed then is not
   * tried again while the fleet looks the same (same snapshot key) and its
   * definition has not changed, up to `blockedRetryMs`: a blocked model is
   * re-evaluated when capacity changes, not in a hot loop. Absent = try all.
   */
  readonly previous?: Pick<Plan, 'snapshotKey' | 'rejections' | 'atMs'>;
}

export interface PlanOptions {
  /** How long a draining replica may finish its in-flight requests before it is stopped anyway; default 5 minutes. */
  readonly drainDeadlineMs?: number;
  /** Replicas of one model moved off draining nodes at a time; default 1. */
  readonly maxParallel?: number;
  /** First retry delay of a failed replica; doubles per consecutive failure. Default 10 s. */
  readonly retryBaseMs?: number;
  /** The longest retry delay; default 10 minutes. */
  readonly retryMaxMs?: number;
  /** How long a stopping replica waits for its agents to confirm before it is forgotten; default 2 minutes. */
  readonly stopGraceMs?: number;
  /** Most replicas created (or retried) in one pass; absent = 10% of the fleet, at least 10. */
  readonly maxCreatesPerPass?: number;
  /** The longest a blocked model goes untried while the fleet looks unchanged; default 1 minute. */
  readonly blockedRetryMs?: number;
}

export interface CompiledPlanOptions {
  readonly drainDeadlineMs: number;
  readonly maxParallel: number;
  readonly retryBaseMs: number;
  readonly retryMaxMs: number;
  readonly stopGraceMs: number;
  readonly maxCreatesPerPass: number | null;
  readonly blockedRetryMs: number;
}

export function compilePlanOptions(options: PlanOptions = {}): CompiledPlanOptions {
  return {
    drainDeadlineMs: options.drainDeadlineMs ?? 5 * 60_000,
    maxParallel: Math.max(1, options.maxParallel ?? 1),
    retryBaseMs: options.retryBaseMs ?? 10_000,
    retryMaxMs: options.retryMaxMs ?? 10 * 60_000,
    stopGraceMs: options.stopGraceMs ?? 2 * 60_000,
    maxCreatesPerPass: options.maxCreatesPerPass ?? null,
    blockedRetryMs: options.blockedRetryMs ?? 60_000,
  };
}

export type PlanAction =
  | {
      readonly kind: 'create';
      readonly model: string;
      readonly profile: string;
      readonly placement: Placement;
      /** The replica this one replaces on a draining node; null = a new one. */
      readonly replaces: string | null;
      readonly reason: string;
    }
  | {
      readonly kind: 'retry';
      readonly replicaId: string;
      readonly model: string;
      readonly profile: string;
      readonly placement: Placement;
      readonly reason: string;
    }
  | { readonly kind: 'drain'; readonly replicaId: string; readonly reason: string }
  | { readonly kind: 'stop'; readonly replicaId: string; readonly reason: string }
  | {
      readonly kind: 'markFailed';
      readonly replicaId: string;
      readonly error: string;
      readonly failures: number;
      readonly nextRetryAtMs: number;
      readonly reason: string;
    }
  | {
      readonly kind: 'markLost';
      readonly replicaId: string;
      readonly shards: readonly string[];
      readonly error: string;
      readonly reason: string;
    }
  | { readonly kind: 'forget'; readonly replicaId: string; readonly reason: string };

/** Why a model (or a move of one of its replicas) could not be placed this pass. */
export interface ModelRejections {
  readonly model: string;
  /** 'scale': a missing replica; 'drain': a replacement for a replica on a draining node. */
  readonly purpose: 'scale' | 'drain';
  readonly rejections: readonly Rejection[];
  readonly notes: readonly PlacementNote[];
  /** Nodes in the snapshot, the denominator of explain's "0/12 nodes fit". */
  readonly nodeCount: number;
  /** The model's definition as placement read it; a change means it is tried again at once. */
  readonly modelKey: string;
  /** When placement last actually ran for it (a held rejection keeps the time it was made). */
  readonly atMs: number;
  /**
   * True when an earlier placement in the same pass took capacity first: the
   * snapshot alone does not explain the failure, so it is not held.
   */
  readonly contended: boolean;
}

/** A replica left on a draining node because nothing else could take it. */
export interface BlockedDrain {
  readonly replicaId: string;
  readonly model: string;
  readonly nodeIds: readonly string[];
  readonly reason: string;
}

export interface Plan {
  readonly actions: readonly PlanAction[];
  /** Per model that could not be placed this pass; a model with no entry had nothing it failed to place. */
  readonly rejections: ReadonlyMap<string, ModelRejections>;
  readonly blockedDrains: readonly BlockedDrain[];
  /** Placements left for a later pass by the creation cap; 0 = none. */
  readonly throttled: number;
  /** A fingerprint of what placement saw (nodes, their free capacity); equal keys = the fleet looks the same. '' = not computed: nothing was blocked. */
  readonly snapshotKey: string;
  /** The pass's `now`. */
  readonly atMs: number;
}

/** Wanted replicas of a model: the scaler's number when there is one, clamped to [min, max]; scaling.min otherwise. */
export function wantedCount(model: PlanModel, fromScaler?: number): number {
  const { min, max } = model.scaling;
  if (fromScaler === undefined) return min;
  return Math.max(min, Math.min(Math.max(min, max), fromScaler));
}

/** The delay before a replica that has failed `failures` times in a row is placed again. */
export function retryDelayMs(
  failures: number,
  options: Pick<CompiledPlanOptions, 'retryBaseMs' | 'retryMaxMs'>,
): number {
  const exponent = Math.max(0, Math.min(failures - 1, 30));
  return Math.min(options.retryMaxMs, options.retryBaseMs * 2 ** exponent);
}

export function toPlacementProfile(p: PlanProfile): PlacementProfile {
  return {
    name: p.name,
    engine: p.engine,
    gpus: p.gpus,
    shards: p.shards,
    ...(p.gpuClasses.length ? { gpuClasses: p.gpuClasses } : {}),
    ...(p.gpuMemoryGiB === null ? {} : { gpuMemoryGiB: p.gpuMemoryGiB }),
    ...(p.memoryGiB === null ? {} : { memoryGiB: p.memoryGiB }),
    ...(p.diskGiB === null ? {} : { diskGiB: p.diskGiB }),
    ...(p.pool === null ? {} : { pool: p.pool }),
  };
}

/** What placement matches against a node's weights: the cache name and the source itself (model dirs report sources). */
export function weightsKeyOf(source: string): string[] {
  const name = cacheNameOf(source, { allowHttp: true });
  return name === null ? [source] : [name, source];
}

/** Replica id order: the order a pass visits replicas in, so the same records always give the same plan. */
export const byId = (a: ReplicaRecord, b: ReplicaRecord): number => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
/** Newest first by creation time, ties broken by id (the larger first). */
export const newestFirst = (a: ReplicaRecord, b: ReplicaRecord): number => b.createdAtMs - a.createdAtMs || byId(b, a);

/** The model's definition as placement reads it; a change means a blocked model is tried again at once. */
export function modelKeyOf(model: PlanModel): string {
  return JSON.stringify([model.source, model.profiles]);
}

export { formatMs };
