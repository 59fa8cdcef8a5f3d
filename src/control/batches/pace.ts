// Batch pacing: how many more batch lines of a model may start now. Batches
// run on idle GPUs only, so the answer is a pure function of what the model
// serves at this moment (decidePace, table-tested without I/O), and the one
// live part, LiveBatchPace (live-pace.ts), only gathers that snapshot from the
// gateway and the replica directory each time the runner asks. Separate from the runner,
// which keeps lines durable and knows nothing of load, and from the gateway's
// fair-share gate, which orders requests that have already arrived: the pace
// decides whether a batch line arrives at all.
//
// The rules, in order:
//  - No ready replica of this fleet (remote endpoints are not idle GPUs): 0.
//    A batch line never makes a cold model start (the autoscaler decides that,
//    bounded by scaling.batch_max_replicas).
//  - Any interactive request of the model waiting (in the fair-share queue
//    or held for a replica): 0, paused. Lines already running finish; their
//    places then go to the waiting requests first.
//  - Otherwise the spare places over the ready replicas, less a headroom kept
//    free for interactive arrivals. A replica's places are its capacity
//    (capacity.per_replica, else scaling.target_inflight) less what it serves
//    (the larger of the gateway's in-flight count and the engine's own
//    running + waiting); an engine that queues, or whose KV cache is full,
//    has no spare place whatever the counts say.
//  - And never more batch lines in all than the places less the headroom:
//    a line just started may not show in the gateway's counts yet, and this
//    bounds what such a lag can let through.

/** One ready replica as the pace weighs it. */
export interface PaceReplica {
  readonly id: string;
  /** Requests it serves at once (capacity.per_replica, else scaling.target_inflight); 0 = it takes no batch line. */
  readonly capacity: number;
  /** Requests the gateway has in flight to it now, batch lines among them. */
  readonly inFlight: number;
  /** The engine's own figures from a fresh sample; absent = none fresh (the gateway's count alone is used). */
  readonly engine?: {
    readonly running: number;
    readonly waiting: number;
    /** 0..1; absent = not reported. */
    readonly kvUsage?: number;
  };
}

/** One model at one moment. */
export interface PaceSnapshot {
  /** Ready, not draining replicas of this fleet; empty = none. */
  readonly replicas: readonly PaceReplica[];
  /** Interactive requests of the model waiting now: in the fair-share queue and held for a replica; 0 = none. */
  readonly interactiveWaiting: number;
  /** Batch lines of the model in flight now (they are among the replicas' in-flight counts). */
  readonly batchInFlight: number;
}

export interface BatchPaceOptions {
  /** Share of the model's places (over its ready replicas) batch lines leave free for interactive arrivals, 0..1. */
  readonly headroomFraction: number;
  /** Places left free however few replicas run; 0 = none beyond the fraction. */
  readonly headroomMin: number;
  /** KV-cache use (0..1) at or above which a replica is full for batch lines whatever its counts. */
  readonly kvFull: number;
}

/** The pace's one table of defaults. */
export const BATCH_PACE_DEFAULTS: BatchPaceOptions = Object.freeze({
  // Half: measured by bench/batches.mjs, a quarter let interactive bursts queue behind batch lines.
  headroomFraction: 0.5,
  headroomMin: 1,
  kvFull: 0.9,
});

/** Why the pace said what it said: no-replica and paused are 0, full is 0 for want of spare places, spare is > 0. */
export type PaceReason = 'no-replica' | 'paused' | 'full' | 'spare';

export interface PaceDecision {
  /** More batch lines that may start now; 0 = wait. */
  readonly slots: number;
  readonly reason: PaceReason;
  /** Places over the ready replicas. */
  readonly capacity: number;
  /** Places free now (before the headroom is taken off). */
  readonly free: number;
  /** Places kept for interactive arrivals. */
  readonly headroom: number;
  /** The decision in words, for ctl, the dashboard and the log. */
  readonly message: string;
}

/** How many batch lines of the model may start now, and why. */
export function decidePace(s: PaceSnapshot, o: BatchPaceOptions = BATCH_PACE_DEFAULTS): PaceDecision {
  let capacity = 0;
  let free = 0;
  for (const r of s.replicas) {
    capacity += Math.max(0, r.capacity);
    free += spareOf(r, o);
  }
  const headroom = capacity === 0 ? 0 : Math.max(o.headroomMin, Math.ceil(capacity * o.headroomFraction));
  const base = { capacity, free, headroom };
  if (s.replicas.length === 0 || capacity === 0) {
    return {
      ...base,
      slots: 0,
      reason: 'no-replica',
      message: 'no replica of this fleet is ready to take batch lines',
    };
  }
  if (s.interactiveWaiting > 0) {
    const n = s.interactiveWaiting;
    return {
      ...base,
      slots: 0,
      reason: 'paused',
      message: `paused: ${n} interactive request${n === 1 ? '' : 's'} waiting; ${s.batchInFlight} batch line${s.batchInFlight === 1 ? '' : 's'} finishing`,
    };
  }
  const slots = Math.max(0, Math.min(free - headroom, capacity - headroom - s.batchInFlight));
  if (slots === 0) {
    return {
      ...base,
      slots,
      reason: 'full',
      message: `no spare place: ${free} of ${capacity} free, ${headroom} kept for interactive requests`,
    };
  }
  return {
    ...base,
    slots,
    reason: 'spare',
    message: `${slots} spare place${slots === 1 ? '' : 's'}: ${free} of ${capacity} free, ${headroom} kept for interactive requests`,
  };
}

/** A replica's free places: none while its engine queues or its KV cache is full. */
function spareOf(r: PaceReplica, o: BatchPaceOptions): number {
  const e = r.engine;
  if (e && (e.waiting > 0 || (e.kvUsage !== undefined && e.kvUsage >= o.kvFull))) return 0;
  const busy = Math.max(r.inFlight, e ? e.running + e.waiting : 0);
  return Math.max(0, r.capacity - busy);
}
