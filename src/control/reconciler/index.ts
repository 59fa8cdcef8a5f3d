// The reconciler: keeps the replicas that run equal to the replicas wanted.
// Each pass compares the catalog's wanted numbers with the replicas the
// control plane knows of and the fleet's state, and acts on the difference:
// places missing replicas, stops surplus ones, replaces those on lost nodes,
// moves those on draining nodes make-before-break, retries failed ones with
// backoff. It is separate from placement because placement answers "where
// could one replica go", while the reconciler owns time: lifecycles,
// deadlines, backoff, and what has already been asked of the agents.
//
// The decision is pure (plan.ts composing one module per rule, apply.ts,
// report-trust.ts, fold-report.ts); the class in reconciler.ts runs the loop and does the
// I/O around it: the store, the assignment board, agents' reports. What the
// router reads (router-view.ts) and what it feeds the scaler
// (scaling-bridge.ts) are their own parts.
export { COUNTING_STATES, type ReplicaRecord } from './types.js';
export { toPlacementProfile, weightsKeyOf, type BlockedDrain, type ModelRejections, type Plan } from './plan.js';
export { toPlacementNode } from './snapshot.js';
export { Reconciler, type ReconcilerOptions } from './reconciler.js';
export { RouterView } from './router-view.js';
