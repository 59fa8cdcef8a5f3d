// What the router tells the rest of the control plane about demand: per
// replica, what it has in flight and when it last used it; per model, the
// requests it holds for want of a ready replica. A leaf of types only, so
// that the router (which makes these numbers), the reconciler and the
// scaler (which read them), the leader and the store (which sum and keep
// them across instances) share one shape without importing one another.

/** One replica's use, as one router (or the sum over every instance) saw it. */
export interface ReplicaUse {
  /** Requests in flight to the replica now. */
  inFlight: number;
  /** Epoch ms of the last request start or end; null = never used (not the same as idle since some time). */
  lastUsedAtMs: number | null;
}

/**
 * The router's demand as a reconciler pass reads it, fresh: a drain is
 * ended by in-flight reaching zero, so a number a second old could stop a
 * replica that just took a request.
 */
export interface DemandSnapshot {
  /** Per replica id; no entry = no use reported. */
  readonly replicas: ReadonlyMap<string, Readonly<ReplicaUse>>;
  /** Requests held per model name because it has no ready replica; no entry = none. */
  readonly queued: ReadonlyMap<string, number>;
}

/**
 * A replica's engine load as its agent last read it from the engine's
 * metrics, for the router's choice and the scaler. The control plane's
 * clock: `sampledAtMs` is when the control plane received the heartbeat
 * less the age the agent gave, so a reader knows how old it is.
 */
export interface ReplicaLoad {
  /** Requests the engine is generating for. */
  readonly running: number;
  /** Requests queued inside the engine for a free sequence. */
  readonly waiting: number;
  /** KV-cache use, 0..1; absent = the engine does not report it. */
  readonly kvUsage?: number;
  /** Epoch ms (the control plane's clock) of the engine read. */
  readonly sampledAtMs: number;
}
