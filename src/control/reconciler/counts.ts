// The count rules of one model (Nomad's computeStop and the placement half
// of computeGroup): wanted against the replicas that count. Failed replicas
// beyond what is missing are forgotten; missing ones are asked of placement
// (failed ones retried first, once their backoff is over) unless the model
// is still blocked as it was last pass; surplus ones are stopped, or drained
// when the scaler asked for fewer. Pure: `now` and the router's in-flight
// numbers are passed in.
import type { PlacementRequest } from '../placement/index.js';
import { type DrainSplit, isOnDraining, type ModelGroup } from './classify.js';
import type { PendingRequest } from './place-with-cap.js';
import { byId, type ModelRejections, newestFirst, type PlanAction, type PlanModel } from './plan-types.js';
import type { ReplicaRecord } from './types.js';

/**
 * The failed replicas kept to fill missing slots, soonest retry first (then
 * id); the rest are forgotten, since the model has its wanted replicas
 * without them.
 */
export function keepFailed(
  model: string,
  failed: readonly ReplicaRecord[],
  wanted: number,
  effective: number,
): { kept: ReplicaRecord[]; actions: PlanAction[] } {
  const queue = [...failed].sort((a, b) => (a.nextRetryAtMs ?? 0) - (b.nextRetryAtMs ?? 0) || byId(a, b));
  const slots = Math.max(0, wanted - effective);
  const actions: PlanAction[] = queue.slice(slots).map((r) => ({
    kind: 'forget',
    replicaId: r.id,
    reason: `model ${model} has its ${wanted} wanted replica(s) without it`,
  }));
  return { kept: queue.slice(0, slots), actions };
}

/**
 * Whether last pass's rejection still answers for the model: it was a scale
 * failure the fleet alone explained (not contended), it is younger than
 * `blockedRetryMs`, the model's definition is the same and so is the fleet.
 * The two thunks are called last, and only when needed: they hash.
 */
export function stillBlocked(
  held: ModelRejections | undefined,
  now: number,
  blockedRetryMs: number,
  modelKey: () => string,
  sameFleet: () => boolean,
): held is ModelRejections {
  return (
    held !== undefined &&
    held.purpose === 'scale' &&
    !held.contended &&
    now - held.atMs < blockedRetryMs &&
    held.modelKey === modelKey() &&
    sameFleet()
  );
}

export interface SurplusInput {
  readonly model: string;
  readonly live: readonly ReplicaRecord[];
  readonly split: DrainSplit;
  readonly drainingNodes: ReadonlySet<string>;
  readonly wanted: number;
  /** True when the number came from the scaler: the idlest go first, and a ready one is drained rather than cut off. */
  readonly scaled: boolean;
  /** Requests in flight per replica id; no entry = none. */
  readonly inFlight: ReadonlyMap<string, number> | undefined;
  readonly now: number;
}

/**
 * The replicas past wanted, and what happens to each. Those on draining
 * nodes go first (they were leaving anyway), then the newest; scaled down by
 * demand: the least busy first, then the longest idle (a replica still
 * starting has been idle since it was made). `stopped` = their ids, which
 * the drain rules then leave alone.
 */
export function pickSurplus(input: SurplusInput): { actions: PlanAction[]; stopped: Set<string> } {
  const { model, split, wanted, scaled, now } = input;
  const actions: PlanAction[] = [];
  const stopped = new Set<string>();
  if (split.effective <= wanted) return { actions, stopped };
  const onDraining = (r: ReplicaRecord) => isOnDraining(r, input.drainingNodes);
  const inFlightOf = (r: ReplicaRecord) => input.inFlight?.get(r.id) ?? 0;
  const idleSince = (r: ReplicaRecord) =>
    Math.max(r.lastUsedAtMs ?? 0, r.state === 'ready' ? r.stateSinceMs : r.createdAtMs);
  const order = scaled
    ? (a: ReplicaRecord, b: ReplicaRecord) =>
        Number(onDraining(b)) - Number(onDraining(a)) ||
        inFlightOf(a) - inFlightOf(b) ||
        idleSince(a) - idleSince(b) ||
        newestFirst(a, b)
    : (a: ReplicaRecord, b: ReplicaRecord) => Number(onDraining(b)) - Number(onDraining(a)) || newestFirst(a, b);
  const candidates = input.live.filter((r) => !split.movingOut.has(r.id)).sort(order);
  for (const r of candidates.slice(0, split.effective - wanted)) {
    stopped.add(r.id);
    const reason = `model ${model} wants ${wanted} replica(s) and has ${split.effective}; this one is surplus`;
    if (scaled && r.state === 'ready') {
      const idleS = Math.max(0, Math.floor((now - idleSince(r)) / 1000));
      actions.push({
        kind: 'drain',
        replicaId: r.id,
        reason: `${reason} (idle ${idleS}s): it finishes what it serves, then stops`,
      });
    } else actions.push({ kind: 'stop', replicaId: r.id, reason });
  }
  return { actions, stopped };
}

export interface CountInput {
  readonly model: PlanModel;
  /** Already clamped (wantedCount). */
  readonly wanted: number;
  readonly group: ModelGroup;
  readonly split: DrainSplit;
  readonly drainingNodes: ReadonlySet<string>;
  /** See SurplusInput.scaled. */
  readonly scaled: boolean;
  readonly inFlight: ReadonlyMap<string, number> | undefined;
  readonly now: number;
  /** The model's rejection from the previous pass; absent = none. */
  readonly held: ModelRejections | undefined;
  readonly blockedRetryMs: number;
  readonly modelKey: () => string;
  /** True when the fleet looks as it did when `held` was made. */
  readonly sameFleet: () => boolean;
  readonly request: (excludeNodes?: readonly string[]) => PlacementRequest;
}

export interface Counted {
  /** Forgets of surplus failed replicas, then stops and drains of surplus live ones. */
  readonly actions: PlanAction[];
  /** Retries first, then new replicas; empty when the model is still blocked. */
  readonly requests: PendingRequest[];
  /** The previous rejection kept, when the model is still blocked; undefined = tried again (or nothing to place). */
  readonly held: ModelRejections | undefined;
  /** Ids of the surplus replicas stopped or drained. */
  readonly stopped: Set<string>;
}

/** The count rules of one model, composed in order: keep failed, ask for missing, pick surplus. */
export function reconcileCounts(input: CountInput): Counted {
  const { model, wanted, split, now } = input;
  const { kept, actions } = keepFailed(model.name, input.group.failed, wanted, split.effective);

  const requests: PendingRequest[] = [];
  let held: ModelRejections | undefined;
  const missing = wanted - split.effective - kept.length;
  const wantsPlacement = missing > 0 || kept.some((r) => (r.nextRetryAtMs ?? 0) <= now);
  if (wantsPlacement && stillBlocked(input.held, now, input.blockedRetryMs, input.modelKey, input.sameFleet)) {
    // Nothing it needs has changed since it last failed: keep the answer instead of asking again.
    held = input.held;
  } else {
    for (const r of kept) {
      if ((r.nextRetryAtMs ?? 0) <= now)
        requests.push({ request: input.request(), purpose: 'scale', model, modelKey: input.modelKey(), retryOf: r });
    }
    for (let i = 0; i < missing; i++)
      requests.push({ request: input.request(), purpose: 'scale', model, modelKey: input.modelKey() });
  }

  const surplus = pickSurplus({
    model: model.name,
    live: input.group.live,
    split,
    drainingNodes: input.drainingNodes,
    wanted,
    scaled: input.scaled,
    inFlight: input.inFlight,
    now,
  });
  actions.push(...surplus.actions);
  return { actions, requests, held, stopped: surplus.stopped };
}
