// The gateway: llmgw's client listener, serving the APIs its clients speak
// (OpenAI's, Anthropic's Messages, OpenAI's Responses: one dialect each,
// dialects/) by relaying each request to a ready replica of the model it
// names. Separate from the control plane's reconciler and store because it
// is the hot path: it reads a replica directory and the catalog in memory,
// and reports use back through counters, a usage sink and metrics, never
// waiting on I/O of its own. What it needs from outside is an interface in
// ports/ (keys, usage, the directory, the response store, the limiter).
export { registerRouter, Router, type RouterDeps } from './router.js';
export type { GatewayTracing } from './tracing/index.js';
export { DIALECTS, type Dialect, type DialectHost, type DialectTurn } from './dialects/index.js';
export type {
  ApiKeyRecord,
  BudgetGate,
  KeyStore,
  LimitDecision,
  ReplicaDirectory,
  ReplicaLoad,
  ReplicaUse,
  RequestLimiter,
  ResponseStore,
  RoutedModel,
  RoutedModels,
  RouterReplica,
  StoredResponse,
  UsageEvent,
  UsageSink,
} from './ports/index.js';
export { hashKey } from './ports/index.js';
export { remoteKeyHeaders } from './remote/foreign.js';
export type { ApiObject, BatchCaller, BatchEndpoint, CreateBatchBody, FilesAndBatches } from './ports/batches.js';
export { BATCH_ENDPOINTS } from './ports/batches.js';
export { IN_PROCESS_HEADER, type InProcessAnswer } from './batches/index.js';
export { API_ENDPOINTS, endpointNeeds, modelServes, SERVED_ENDPOINTS, type ServedEndpoint } from './ports/endpoints.js';
export { usageFromTail } from './core/usage.js';
export { RateLimiter, cappedReservation } from './core/rate-limit.js';
export {
  compileRouterOptions,
  ROUTER_DEFAULTS,
  type RouterOptions,
  type RouterSettings,
  type RouterTimeouts,
} from './core/options.js';
export { pickLeastLoaded, pickByPrefix, HashRing, fnv1a } from './core/pick.js';
export { parseRequest, type Endpoint, type ParsedRequest, type RequestLimits } from './core/validate.js';
export { promptPrefix } from './core/prompt-text.js';
export { openAiErrorShape, openAiErrorBody, openAiErrorType } from './core/errors.js';
export { ShadowBoard, SHADOW_SAMPLES_KEPT } from './traffic/index.js';
export {
  RequestLog,
  REQUEST_LOG_CAPACITY,
  requestRecordView,
  type RequestFilter,
  type RequestRecord,
} from './core/request-log.js';
export { requestDetailView, timelineOf } from './core/request-timeline.js';
