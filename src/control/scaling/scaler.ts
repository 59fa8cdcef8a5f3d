// The scaling decision for one model as a pure function: its policy (from
// the catalog), a snapshot of demand and replicas, the previous decision's
// state and `now` in; the wanted number, the next state and, when the number
// changed, a decision with its reason out.
//
// The rules, in the order they apply:
//  - Limits: wanted is always within [min, max]; a catalog change that moves
//    a limit moves wanted with it.
//  - Zero: a model with no replica and a request waiting for it wants one at
//    once (no window: the request is being held). Many waiting requests
//    still want one: the up rule below is what adds more, after its window.
//  - Up: when in-flight plus held requests (a replica's in-flight being the
//    larger of the router's count and the engine's own running + waiting,
//    when it reported them lately) exceed target_inflight per replica
//    for a whole window, wanted becomes ceil(demand / target) (proportional,
//    not one per pass), up to max. Replicas still starting, and wanted ones
//    not placed yet, count as capacity, so a slow start is not a reason to
//    add more.
//  - Down: a ready replica with nothing in flight for idle_timeout is given
//    up. So is capacity the model has not needed for idle_timeout: when
//    ceil(demand / target) stayed below wanted that long, wanted drops to
//    the most it needed meanwhile (a trickle of requests spread over every
//    replica by least-load routing leaves none of them idle, yet most are
//    surplus). Never below min or what the current demand needs, and never
//    within the cool-down after a scale-up. Which replica goes (the least
//    busy, then the idlest) and how (drained: it finishes what it serves)
//    is the plan's.
import { formatDurationMs } from '../../units/index.js';

/** A model's compiled `scaling`; the catalog's Model['scaling'] has this shape. */
export interface ScalingPolicy {
  readonly min: number;
  /** Below min reads as min. */
  readonly max: number;
  readonly targetInflight: number;
  /** Null = idleness never stops a replica. */
  readonly idleTimeoutMs: number | null;
  readonly windowMs: number;
  readonly cooldownMs: number;
}

/** One replica that counts toward wanted (pending through ready), as the scaler reads it. */
export interface ReplicaSignal {
  readonly id: string;
  /** False while it is pending, fetching or starting: capacity on its way, not idle. */
  readonly ready: boolean;
  /** Requests the router has in flight to it now. */
  readonly inFlight: number;
  /**
   * Requests at the engine by its own fresh sample (running + waiting);
   * absent = no fresh sample. The router's in-flight requests are among
   * them, so a replica's demand is the larger of the two: what the engine
   * holds beyond them came from elsewhere (another client, another control
   * plane) and is demand too.
   */
  readonly engineQueued?: number;
  /** Epoch ms since which it has had nothing to do: its last request's start or end, or when it became ready if later. */
  readonly idleSinceMs: number;
}

export interface ModelSignals {
  readonly policy: ScalingPolicy;
  /** Replicas pending through ready; draining, stopping and failed ones are not capacity. */
  readonly replicas: readonly ReplicaSignal[];
  /** Failed replicas waiting to be placed again: they keep their wanted slot. */
  readonly failed: number;
  /** Requests the router holds for this model because none of its replicas is ready; 0 = none. */
  readonly queued: number;
  /** A request arrived for the model while it had no ready replica (since the last decision). */
  readonly coldDemand: boolean;
}

/** What the scaler remembers of a model between passes. */
export interface ScaleState {
  readonly wanted: number;
  /** When demand went above target and has stayed there; null = it is not above. */
  readonly aboveSinceMs: number | null;
  /** The last scale-up, for the cool-down; null = none since this control plane started. */
  readonly lastUpAtMs: number | null;
  /** Since when ceil(demand / target) has stayed below wanted; null = it is not below (absent reads as null). */
  readonly belowSinceMs?: number | null;
  /** The most replicas demand needed since belowSinceMs; 0 with it null. */
  readonly neededPeak?: number;
}

export type ScaleDirection = 'up' | 'down';

/** A change of the wanted number, for the events log: from, to and why, in words. */
export interface ScaleDecision {
  readonly from: number;
  readonly to: number;
  readonly direction: ScaleDirection;
  readonly reason: string;
}

export interface ScaleResult {
  readonly wanted: number;
  readonly state: ScaleState;
  /** Null = the wanted number did not change. */
  readonly decision: ScaleDecision | null;
}

/**
 * The wanted replicas of one model. `previous` absent = the first decision
 * since this control plane started: it adopts what exists (replicas that
 * count and failed ones waiting for a retry), within the limits, so a
 * restart neither stops nor starts anything on its own.
 */
export function decideScale(signals: ModelSignals, previous: ScaleState | undefined, now: number): ScaleResult {
  const p = signals.policy;
  const min = p.min;
  const max = Math.max(min, p.max);
  const capacity = signals.replicas.length;
  let inFlight = 0;
  for (const r of signals.replicas) inFlight += Math.max(r.inFlight, r.engineQueued ?? 0);
  const demand = inFlight + signals.queued;
  const target = Math.max(1, p.targetInflight);

  const from = previous?.wanted ?? capacity + signals.failed;
  let wanted = from;
  let aboveSinceMs = previous?.aboveSinceMs ?? null;
  let lastUpAtMs = previous?.lastUpAtMs ?? null;
  let belowSinceMs = previous?.belowSinceMs ?? null;
  let neededPeak = previous?.neededPeak ?? 0;
  let reason = '';

  if (wanted < min) {
    wanted = min;
    reason = previous ? `scaling.min is now ${min}` : `scaling.min is ${min}`;
  } else if (wanted > max) {
    wanted = max;
    reason = `scaling.max is now ${max}`;
  }

  // Zero: the request is being held, so waiting a window would only make it wait longer.
  if (wanted === 0 && capacity === 0 && max >= 1 && (signals.coldDemand || signals.queued > 0)) {
    wanted = 1;
    lastUpAtMs = now;
    aboveSinceMs = null;
    reason = `a request arrived for a model with no replica (scaling.min 0); one is started while ${signals.queued > 1 ? `${signals.queued} requests wait` : 'the request waits'}`;
  }

  // Up: capacity is what exists or is on its way; a wanted replica not placed yet is on its way too.
  const onItsWay = Math.max(capacity, wanted);
  if (onItsWay > 0 && demand > target * onItsWay) {
    aboveSinceMs ??= now;
    if (now - aboveSinceMs >= p.windowMs) {
      const desired = Math.min(max, Math.ceil(demand / target));
      if (desired > wanted) {
        reason =
          `${demand} request(s) in flight or waiting over ${onItsWay} replica(s) stayed above target_inflight ${target} per replica ` +
          `for ${formatDurationMs(p.windowMs)}; ceil(${demand} / ${target}) = ${Math.ceil(demand / target)}${desired < Math.ceil(demand / target) ? `, capped at scaling.max ${max}` : ''}`;
        wanted = desired;
        lastUpAtMs = now;
        aboveSinceMs = null;
      }
    }
  } else {
    aboveSinceMs = null;
  }

  // How long the model has needed fewer replicas than it wants, and the most it needed meanwhile.
  // Counted only while all wanted capacity is ready: a replica still starting has had no chance to be needed.
  const needed = Math.ceil(demand / target);
  const allReady = capacity >= wanted && signals.replicas.every((r) => r.ready);
  if (needed < wanted && signals.queued === 0 && allReady) {
    if (belowSinceMs === null) neededPeak = 0;
    belowSinceMs ??= now;
    neededPeak = Math.max(neededPeak, needed);
  } else {
    belowSinceMs = null;
    neededPeak = 0;
  }

  // Down: only idle capacity goes, and a scale-up is not undone while its replicas are still finding traffic.
  const cooling = lastUpAtMs !== null && now - lastUpAtMs < p.cooldownMs;
  if (p.idleTimeoutMs !== null && wanted > min && !cooling && signals.queued === 0 && reason === '') {
    const idleTimeoutMs = p.idleTimeoutMs;
    const floor = Math.max(min, needed);
    const idle = signals.replicas.filter(
      (r) => r.ready && r.inFlight === 0 && !(r.engineQueued! > 0) && now - r.idleSinceMs >= idleTimeoutMs,
    ).length;
    const exists = Math.min(wanted, capacity + signals.failed);
    const byIdle = idle > 0 ? Math.max(floor, exists - idle) : wanted;
    const byDemand =
      belowSinceMs !== null && now - belowSinceMs >= idleTimeoutMs ? Math.max(floor, neededPeak) : wanted;
    const desired = Math.min(byIdle, byDemand);
    if (desired < wanted) {
      const kept = desired === min && min > 0 ? `; kept at scaling.min ${min}` : '';
      reason =
        byIdle <= byDemand
          ? `${idle} replica(s) idle for ${formatDurationMs(idleTimeoutMs)} or more (scaling.idle_timeout)${kept}`
          : `demand needed at most ${neededPeak} replica(s) (target_inflight ${target} each) for ${formatDurationMs(idleTimeoutMs)} (scaling.idle_timeout); the rest are surplus${kept}`;
      wanted = desired;
      belowSinceMs = null;
      neededPeak = 0;
    }
  }

  const state: ScaleState = { wanted, aboveSinceMs, lastUpAtMs, belowSinceMs, neededPeak };
  if (wanted === from) return { wanted, state, decision: null };
  return { wanted, state, decision: { from, to: wanted, direction: wanted > from ? 'up' : 'down', reason } };
}
