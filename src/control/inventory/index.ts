// The inventory: the fleet as the control plane knows it, from agents'
// reports and operators' decisions. Placement reads a snapshot of it; the
// admin API's node views are built from it.
export {
  fabricNames,
  Inventory,
  localDisk,
  type AdminState,
  type HeartbeatCounts,
  type HeartbeatReportKind,
  type Node,
} from './inventory.js';
export { NODE_JOIN_TOKEN_PREFIX } from './node-secrets.js';
export { registerHeartbeatMetrics, registerNodeMetrics } from './metrics.js';
