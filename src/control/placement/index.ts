// Placement decides which nodes run a replica of a model: for each profile in
// order, each node in the profile's pool is checked (admin state, liveness,
// pool, engine, healthy free GPUs of an allowed class and memory, RAM for CPU
// profiles, local disk for the weights unless the node already holds them,
// a shared fabric for multi-node replicas), and the fitting candidates are
// scored (weights already on disk, tight GPU packing, spread). When nothing
// fits, every failed check is kept as a rejection that explain turns into
// sentences.
//
// It is pure: a snapshot in, a decision out; no I/O, no clock, no
// randomness. That is what lets the reconciler call it on every pass without
// side effects, lets the same snapshot always give the same answer (tests and
// operators both rely on it), and lets property tests run it over thousands
// of made-up fleets. Its input types are its own; the inventory and catalog
// map into them.
export {
  type Liveness,
  type Placement,
  type PlacementNode,
  type PlacementNote,
  type PlacementProfile,
  type PlacementRequest,
  type Rejection,
  type ReplicaFootprint,
} from './types.js';
export { place, placeMany } from './place.js';
export { checkReplicas, type ReplicaProblem } from './replicas.js';
export { explain, toRejectionViews } from './explain.js';
export { labelSelectorProblem } from './label-selector.js';
export { fitTable, type ProfileFit } from './fit-table.js';
