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
import {
  downWhenIdle,
  fromZero,
  measure,
  startFrom,
  toResult,
  trackSurplus,
  upByDemand,
  withinBounds,
} from './phases.js';
import type { ModelSignals, ScaleResult, ScaleState } from './types.js';

export type {
  ModelSignals,
  ReplicaSignal,
  ScaleDecision,
  ScaleDirection,
  ScaleResult,
  ScaleState,
  ScalingPolicy,
} from './types.js';

/**
 * The wanted replicas of one model. `previous` absent = the first decision
 * since this control plane started: it adopts what exists (replicas that
 * count and failed ones waiting for a retry), within the limits, so a
 * restart neither stops nor starts anything on its own. The rules above are
 * phases (phases.ts), each pure, run in their order; a phase that changes
 * wanted gives the reason the decision carries.
 */
export function decideScale(signals: ModelSignals, previous: ScaleState | undefined, now: number): ScaleResult {
  const m = measure(signals);
  const start = startFrom(signals, previous);
  let step = withinBounds(start, m, previous === undefined);
  step = fromZero(step, m, signals, now);
  step = upByDemand(step, m, signals.policy, now);
  step = trackSurplus(step, m, signals, now);
  step = downWhenIdle(step, m, signals, signals.policy, now);
  return toResult(start.wanted, step);
}
