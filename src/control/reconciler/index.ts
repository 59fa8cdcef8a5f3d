// The reconciler: keeps the replicas that run equal to the replicas wanted.
// Each pass compares the catalog's wanted numbers with the replicas the
// control plane knows of and the fleet's state, and acts on the difference:
// places missing replicas, stops surplus ones, replaces those on lost nodes,
// moves those on draining nodes make-before-break, retries failed ones with
// backoff. It is separate from placement because placement answers "where
// could one replica go", while the reconciler owns time: lifecycles,
// deadlines, backoff, and what has already been asked of the agents.
//
// The decision is pure (plan.ts, apply.ts); the class in reconciler.ts does
// the I/O around it: the store, the assignment board, agents' reports.
export * from './types.js';
export * from './plan.js';
export * from './apply.js';
export { toPlacementNode } from './snapshot.js';
export { Reconciler, type ReconcilerOptions } from './reconciler.js';
export { RouterView, type RoutableReplica } from './router-view.js';
