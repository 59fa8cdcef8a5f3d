// What the router is built from: its collaborators (the ports the control
// plane implements) and its settings. Apart from router.ts so that the list
// of what a gateway needs reads on its own.
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type {
  BudgetGate,
  KeyStore,
  ReplicaDirectory,
  RequestLimiter,
  ResponseStore,
  RoutedModels,
  UsageSink,
} from './ports/index.js';
import type { FilesAndBatches } from './ports/batches.js';
import type { RouterSettings } from './core/options.js';
import type { RequestLog } from './core/request-log.js';
import type { GatewayTracing } from './tracing/index.js';

/** What the router is built from: its collaborators, and its settings (RouterSettings, defaults in ROUTER_DEFAULTS). */
export interface RouterDeps extends RouterSettings {
  catalog: RoutedModels;
  replicas: ReplicaDirectory;
  keys: KeyStore;
  /** False only for a loopback-only listener (the caller refuses it on any other address): then no key is asked for. */
  authRequired: boolean;
  usage: UsageSink;
  /** Where the router's metrics go; the admin listener serves it. */
  registry: Registry;
  logger: Logger;
  /** Per-key rate limits; absent = this process's own token buckets (several control planes share one through the store). */
  limiter?: RequestLimiter;
  /** Budgets per team and key (src/control/budgets); absent = none is enforced, and the request log shows no cost. */
  budgets?: BudgetGate;
  /**
   * Where Responses API answers are kept (`store`, `previous_response_id`,
   * GET/DELETE /v1/responses/{id}); absent = none is kept: `store` is
   * ignored, and a previous_response_id or an id to GET is never found.
   */
  responses?: ResponseStore;
  /** Where each finished request is recorded (which replica, why it failed); absent = none is. */
  requestLog?: RequestLog;
  /** OpenTelemetry's tracer and propagator (src/gateway/tracing); absent = no request is traced, and no span is made. */
  tracing?: GatewayTracing;
  /** The Files and Batch APIs (/v1/files, /v1/batches; src/control/batches); absent = those routes are not served. */
  batches?: FilesAndBatches;
}
