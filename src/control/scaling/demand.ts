// What the router tells the rest of the control plane about demand: per
// replica, what it has in flight and when it last used it; per model, the
// requests it holds for want of a ready replica. A leaf of types only, so
// that the router (which makes these numbers), the reconciler and the
// scaler (which read them), the leader and the store (which sum and keep
// them across instances) share one shape without importing one another.
// A replica's use and its engine load are the gateway's ports
// (src/gateway/ports/index.ts): it makes the one and reads the other.
import type { ReplicaUse } from '../../gateway/ports/index.js';
import type { BatchDemand } from './types.js';

export type { ReplicaLoad, ReplicaUse } from '../../gateway/ports/index.js';

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
  /** Batch lines per model name (src/control/batches); absent or no entry = none. */
  readonly batch?: ReadonlyMap<string, BatchDemand>;
}
