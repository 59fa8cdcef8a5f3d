// The wire between the agent and the control plane: types, schemas and the
// calculations both sides must agree on (cache names). Neither side imports
// the other; they meet here.
export {
  NodeReportSchema,
  PROTOCOL_VERSION,
  ShardLoadSchema,
  type DiskReport,
  type EngineReport,
  type FabricReport,
  type GpuReport,
  type NodeReport,
  type ShardLoad,
  type WeightsReport,
} from './node-report.js';
export { CACHE_NAME_RE, cacheName, cacheNameOf, canonicalSource, parseSource, type WeightSource } from './source.js';
export {
  AGENT_API_PREFIX,
  HeartbeatRequestSchema,
  HeartbeatResponseSchema,
  JoinRequestSchema,
  JoinResponseSchema,
  ShardStatusSchema,
  type HeartbeatRequest,
  type HeartbeatResponse,
  type JoinResponse,
  type ShardAssignment,
  type ShardStatus,
} from './agent-api.js';
export {
  ReadShardStateSchema,
  SHARD_STATES,
  ShardStateSchema,
  type EngineShardState,
  type ShardState,
} from './shard-state.js';
export { canonicalJson, reportHash } from './report-hash.js';
export { controlCharIn, octalEscapeControls, plainName } from './text.js';
export { unsafeProfileEnvNames, unsafeProfileEnvProblem } from './profile-env.js';
