// The gateway: llmgw's client listener, serving the APIs its clients speak
// (OpenAI's, Anthropic's Messages, OpenAI's Responses: one dialect each,
// dialects/) by relaying each request to a ready replica of the model it
// names. Separate from the control plane's reconciler and store because it
// is the hot path: it reads a replica directory and the catalog in memory,
// and reports use back through counters, a usage sink and metrics, never
// waiting on I/O of its own. What it needs from outside is an interface in
// ports.ts (keys, usage, the directory, the response store, the limiter).
export { registerRouter, Router, type RouterDeps } from './router.js';
export { DIALECTS, type Dialect, type DialectHost, type DialectTurn } from './dialects/index.js';
export type {
  ApiKeyRecord,
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
} from './ports.js';
export { hashKey } from './ports.js';
export { API_ENDPOINTS, endpointNeeds, modelServes, SERVED_ENDPOINTS, type ServedEndpoint } from './endpoints.js';
export { usageFromTail } from './usage.js';
export { RateLimiter, cappedReservation } from './rate-limit.js';
export {
  compileRouterOptions,
  ROUTER_DEFAULTS,
  type RouterOptions,
  type RouterSettings,
  type RouterTimeouts,
} from './options.js';
export { pickLeastLoaded, pickByPrefix, HashRing, fnv1a } from './pick.js';
export { parseRequest, type Endpoint, type ParsedRequest, type RequestLimits } from './validate.js';
export { promptPrefix } from './prompt-text.js';
export { openAiErrorShape, openAiErrorBody, openAiErrorType } from './errors.js';
export {
  RequestLog,
  REQUEST_LOG_CAPACITY,
  requestRecordView,
  type RequestFilter,
  type RequestRecord,
} from './request-log.js';
