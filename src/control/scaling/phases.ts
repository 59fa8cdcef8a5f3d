// The phases decideScale is composed of, each a pure function of what came
// before it, so each rule is read and tested on its own: measure the signals
// once, start from the previous decision, hold wanted within the limits,
// start one replica for a model at zero, add replicas for demand that stayed
// above target for a window, keep track of how long fewer would have done
// (the down side's hysteresis), and give up idle or surplus capacity unless
// a scale-up is still cooling down. scaler.ts says the rules in words and
// runs the phases in this order.
import { formatDurationMs } from '../../units/index.js';
import type { ModelSignals, ScaleDecision, ScaleResult, ScaleState, ScalingPolicy } from './types.js';

/** What one decision reads of its signals, worked out once. */
export interface Measured {
  readonly min: number;
  /** The policy's max, never below min. */
  readonly max: number;
  /** target_inflight per replica, at least 1. */
  readonly target: number;
  /** Replicas that count (pending through ready). */
  readonly capacity: number;
  /**
   * Requests in flight (per replica, the larger of the router's count and the engine's own) plus those held, with
   * batch lines counted only up to what batchMaxReplicas replicas take (batchDemand).
   */
  readonly demand: number;
  /** ceil(demand / target): the replicas the demand needs now. */
  readonly needed: number;
}

/** A decision part-way through its phases: the wanted number, what the scaler remembers, and why wanted last changed. */
export interface ScaleStep {
  readonly wanted: number;
  readonly aboveSinceMs: number | null;
  readonly lastUpAtMs: number | null;
  readonly belowSinceMs: number | null;
  readonly neededPeak: number;
  /** Why a phase of this decision changed wanted; '' = none has. */
  readonly reason: string;
}

export function measure(signals: ModelSignals): Measured {
  const p = signals.policy;
  let inFlight = 0;
  for (const r of signals.replicas) inFlight += Math.max(r.inFlight, r.engineQueued ?? 0);
  const target = Math.max(1, p.targetInflight);
  const batch = batchCounted(signals, inFlight, target);
  const demand = batch.interactive + batch.counted;
  return {
    min: p.min,
    max: Math.max(p.min, p.max),
    target,
    capacity: signals.replicas.length,
    demand,
    needed: Math.ceil(demand / target),
  };
}

/**
 * Batch lines are demand only up to what scaling.batch_max_replicas replicas
 * take at target_inflight each, after the interactive demand: absent, up to
 * the replicas that already count, so a batch keeps what runs busy (and
 * running) but never makes the model grow. Lines in flight are among the
 * replicas' counts; they are taken out before the rest is called interactive.
 */
export function batchCounted(
  signals: ModelSignals,
  inFlight: number,
  target: number,
): { interactive: number; counted: number } {
  const b = signals.batch;
  if (!b) return { interactive: inFlight + signals.queued, counted: 0 };
  const running = Math.min(Math.max(0, b.inFlight), inFlight);
  const interactive = inFlight - running + signals.queued;
  const replicas = Math.max(signals.replicas.length, signals.policy.batchMaxReplicas ?? 0);
  const room = Math.max(0, replicas * target - interactive);
  return { interactive, counted: Math.min(running + Math.max(0, b.waiting), room) };
}

/**
 * Where a decision starts: the previous wanted number and memory, or, on the
 * first decision since this control plane started, what exists (replicas
 * that count and failed ones waiting for a retry), so a restart neither
 * stops nor starts anything on its own.
 */
export function startFrom(signals: ModelSignals, previous: ScaleState | undefined): ScaleStep {
  return {
    wanted: previous?.wanted ?? signals.replicas.length + signals.failed,
    aboveSinceMs: previous?.aboveSinceMs ?? null,
    lastUpAtMs: previous?.lastUpAtMs ?? null,
    belowSinceMs: previous?.belowSinceMs ?? null,
    neededPeak: previous?.neededPeak ?? 0,
    reason: '',
  };
}

/** Limits: wanted within [min, max]; a catalog change that moves a limit moves wanted with it. `first`: no decision came before. */
export function withinBounds(step: ScaleStep, m: Measured, first: boolean): ScaleStep {
  if (step.wanted < m.min)
    return { ...step, wanted: m.min, reason: first ? `scaling.min is ${m.min}` : `scaling.min is now ${m.min}` };
  if (step.wanted > m.max) return { ...step, wanted: m.max, reason: `scaling.max is now ${m.max}` };
  return step;
}

/**
 * Zero: a model with no replica and a request waiting for it wants one at
 * once, with no window, since the request is being held. However many wait,
 * one: the up phase adds more after its window.
 */
export function fromZero(step: ScaleStep, m: Measured, signals: ModelSignals, now: number): ScaleStep {
  const batchOnly = !(signals.coldDemand || signals.queued > 0);
  // With no replica, all of demand is held requests or batch lines (those counted up to batch_max_replicas).
  const batch = batchOnly ? Math.max(0, m.demand - signals.queued) : 0;
  if (!(step.wanted === 0 && m.capacity === 0 && m.max >= 1 && (!batchOnly || batch > 0))) return step;
  if (batchOnly) {
    return {
      ...step,
      wanted: 1,
      lastUpAtMs: now,
      aboveSinceMs: null,
      reason: `${batch} batch line(s) wait for a model with no replica; one is started (scaling.batch_max_replicas ${signals.policy.batchMaxReplicas ?? 0})`,
    };
  }
  return {
    ...step,
    wanted: 1,
    lastUpAtMs: now,
    aboveSinceMs: null,
    reason: `a request arrived for a model with no replica (scaling.min 0); one is started while ${signals.queued > 1 ? `${signals.queued} requests wait` : 'the request waits'}`,
  };
}

/**
 * Up: demand above target_inflight per replica for a whole window makes
 * wanted ceil(demand / target), up to max. Capacity is what exists or is on
 * its way (a wanted replica not placed yet is on its way too), so a slow
 * start is no reason to add more.
 */
export function upByDemand(step: ScaleStep, m: Measured, policy: ScalingPolicy, now: number): ScaleStep {
  const onItsWay = Math.max(m.capacity, step.wanted);
  if (!(onItsWay > 0 && m.demand > m.target * onItsWay)) return { ...step, aboveSinceMs: null };
  const aboveSinceMs = step.aboveSinceMs ?? now;
  if (now - aboveSinceMs < policy.windowMs) return { ...step, aboveSinceMs };
  const desired = Math.min(m.max, m.needed);
  if (desired <= step.wanted) return { ...step, aboveSinceMs };
  return {
    ...step,
    wanted: desired,
    lastUpAtMs: now,
    aboveSinceMs: null,
    reason:
      `${m.demand} request(s) in flight or waiting over ${onItsWay} replica(s) stayed above target_inflight ${m.target} per replica ` +
      `for ${formatDurationMs(policy.windowMs)}; ceil(${m.demand} / ${m.target}) = ${m.needed}${desired < m.needed ? `, capped at scaling.max ${m.max}` : ''}`,
  };
}

/**
 * The down side's hysteresis: since when the model has needed fewer
 * replicas than it wants, and the most it needed meanwhile. Counted only
 * while nothing is held and all wanted capacity is ready: a replica still
 * starting has had no chance to be needed.
 */
export function trackSurplus(step: ScaleStep, m: Measured, signals: ModelSignals, now: number): ScaleStep {
  const allReady = m.capacity >= step.wanted && signals.replicas.every((r) => r.ready);
  if (!(m.needed < step.wanted && signals.queued === 0 && allReady))
    return { ...step, belowSinceMs: null, neededPeak: 0 };
  const fresh = step.belowSinceMs === null;
  return {
    ...step,
    belowSinceMs: step.belowSinceMs ?? now,
    neededPeak: Math.max(fresh ? 0 : step.neededPeak, m.needed),
  };
}

/** Cool-down: a scale-up is not undone while its replicas are still finding traffic. */
export function coolingDown(step: Pick<ScaleStep, 'lastUpAtMs'>, policy: ScalingPolicy, now: number): boolean {
  return step.lastUpAtMs !== null && now - step.lastUpAtMs < policy.cooldownMs;
}

/**
 * Down: a ready replica with nothing in flight for idle_timeout is given up,
 * and so is capacity demand has not needed for idle_timeout (wanted drops to
 * the most it needed meanwhile). Never below min or what demand needs now,
 * never while requests are held or within the cool-down, and not in a
 * decision whose earlier phase already changed wanted.
 */
export function downWhenIdle(
  step: ScaleStep,
  m: Measured,
  signals: ModelSignals,
  policy: ScalingPolicy,
  now: number,
): ScaleStep {
  const idleTimeoutMs = policy.idleTimeoutMs;
  if (
    idleTimeoutMs === null ||
    step.wanted <= m.min ||
    coolingDown(step, policy, now) ||
    signals.queued > 0 ||
    step.reason !== ''
  )
    return step;
  const floor = Math.max(m.min, m.needed);
  const idle = signals.replicas.filter(
    (r) => r.ready && r.inFlight === 0 && !(r.engineQueued! > 0) && now - r.idleSinceMs >= idleTimeoutMs,
  ).length;
  const exists = Math.min(step.wanted, m.capacity + signals.failed);
  const byIdle = idle > 0 ? Math.max(floor, exists - idle) : step.wanted;
  const byDemand =
    step.belowSinceMs !== null && now - step.belowSinceMs >= idleTimeoutMs
      ? Math.max(floor, step.neededPeak)
      : step.wanted;
  const desired = Math.min(byIdle, byDemand);
  if (desired >= step.wanted) return step;
  const kept = desired === m.min && m.min > 0 ? `; kept at scaling.min ${m.min}` : '';
  return {
    ...step,
    wanted: desired,
    belowSinceMs: null,
    neededPeak: 0,
    reason:
      byIdle <= byDemand
        ? `${idle} replica(s) idle for ${formatDurationMs(idleTimeoutMs)} or more (scaling.idle_timeout)${kept}`
        : `demand needed at most ${step.neededPeak} replica(s) (target_inflight ${m.target} each) for ${formatDurationMs(idleTimeoutMs)} (scaling.idle_timeout); the rest are surplus${kept}`,
  };
}

/** The result: the wanted number, the state to remember, and a decision with its reason when wanted changed from `from`. */
export function toResult(from: number, step: ScaleStep): ScaleResult {
  const { wanted, aboveSinceMs, lastUpAtMs, belowSinceMs, neededPeak, reason } = step;
  const state: ScaleState = { wanted, aboveSinceMs, lastUpAtMs, belowSinceMs, neededPeak };
  if (wanted === from) return { wanted, state, decision: null };
  const decision: ScaleDecision = { from, to: wanted, direction: wanted > from ? 'up' : 'down', reason };
  return { wanted, state, decision };
}
