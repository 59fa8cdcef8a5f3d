// The scaler's vocabulary: a model's scaling policy, the signals one
// decision reads, what it remembers between passes and what it decides. A
// leaf of types, so the decision (scaler.ts) and its phases (phases.ts)
// share them without importing each other.

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
  /** Replicas batch demand may scale the model up to; absent = what already runs (batch lines never start one). */
  readonly batchMaxReplicas?: number;
}

/**
 * A model's batch lines (src/control/batches) as the scaler weighs them:
 * demand like any other, counted only up to scaling.batch_max_replicas.
 */
export interface BatchDemand {
  /** Lines in flight now; they are among the replicas' in-flight counts. */
  readonly inFlight: number;
  /** Lines of running batches not started yet. */
  readonly waiting: number;
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
  /** Its batch lines; absent = none. */
  readonly batch?: BatchDemand;
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
