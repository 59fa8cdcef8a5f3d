// Autoscaling: how many replicas each model wants, from the router's demand
// signals (in flight, held, last use) and a clock passed in. Separate from
// the reconciler because the reconciler owns "make the fleet match a number"
// and this part owns "what should the number be": it decides, and the
// reconciler applies the decision through planPass's `wanted` seam. Nothing
// here reads a timer, the store or the network, so every rule is tested as a
// table of snapshots.
export {
  decideScale,
  type ModelSignals,
  type ReplicaSignal,
  type ScaleDecision,
  type ScalingPolicy,
  type ScaleState,
} from './scaler.js';
export type { DemandSnapshot, ReplicaLoad, ReplicaUse } from './demand.js';
export type { BatchDemand } from './types.js';
