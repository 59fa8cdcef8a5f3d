// The client listener as the control plane and a gateway process both build
// it: the Fastify app with its connection cap, Host check and TLS, the
// gateway's routes on it, and /healthz and /readyz. One function so that
// `llmgw gateway` answers clients exactly as `llmgw control` does; what each
// wires in behind it (the replica directory, keys, limits) is the caller's.
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { checkHost, createJsonApp, hostAllowlist } from '../http/index.js';
import {
  openAiErrorShape,
  registerRouter,
  RequestLog,
  type BudgetGate,
  type FilesAndBatches,
  type KeyStore,
  type ReplicaDirectory,
  type RequestLimiter,
  type ResponseStore,
  type RoutedModels,
  type Router,
  type UsageSink,
} from '../gateway/index.js';
import type { ControlConfig } from './config/index.js';
import { childLogger } from '../log/index.js';
import { clientTracing } from './tracing/index.js';

export interface ClientListenerParts {
  config: ControlConfig;
  logger: Logger;
  /** Where the router's metrics go. */
  registry: Registry;
  now: () => number;
  /** Most connections held at once; 0 = no cap. */
  maxConnections: number;
  onConnectionRefused: () => void;
  catalog: RoutedModels;
  replicas: ReplicaDirectory;
  keys: KeyStore;
  usage: UsageSink;
  responses: ResponseStore;
  /** Absent = this process's own token buckets. */
  limiter?: RequestLimiter;
  /** Budgets per team and key; absent = none. */
  budgets?: BudgetGate;
  /** The Files and Batch APIs (src/control/batches); absent = /v1/files and /v1/batches are not served. */
  batches?: FilesAndBatches;
  /** /readyz: resolves with how many models are routed, or throws when the store is unreachable (then 503). */
  ready: () => Promise<number>;
}

export interface ClientListener {
  app: FastifyInstance;
  router: Router;
  /** Which replica served each request and why it failed, by request id: this process's own, in memory. */
  requestLog: RequestLog;
}

export async function buildClientListener(parts: ClientListenerParts): Promise<ClientListener> {
  const { config, logger } = parts;
  const app = createJsonApp({
    logger: logger.child({ listener: 'client' }),
    maxConnections: parts.maxConnections,
    onConnectionRefused: parts.onConnectionRefused,
    bodyLimitBytes: 8 << 20,
    shapeError: openAiErrorShape,
    headersTimeoutMs: config.clientHeadersTimeoutMs,
    requestLoggers: false,
    requestIds: true,
    https: config.tls.client,
  });
  // Before the router: a request under a Host this listener does not answer to (a rebound DNS name) reaches no route.
  const clientHosts = hostAllowlist({
    boundHost: config.clientAddr.host,
    extra: config.clientHosts,
    credentialsRequired: config.apiKeysRequired,
  });
  app.addHook('onRequest', async (request) => checkHost(request, clientHosts, 'client', 'client_hosts'));
  const requestLog = new RequestLog();
  const tracing = await clientTracing(config, app, logger);
  const router = registerRouter(app, {
    requestLog,
    catalog: parts.catalog,
    replicas: parts.replicas,
    keys: parts.keys,
    authRequired: config.apiKeysRequired,
    usage: parts.usage,
    registry: parts.registry,
    logger: childLogger(logger, 'router'),
    now: parts.now,
    timeouts: config.router,
    corsOrigins: config.corsOrigins,
    maxHeldPerKey: config.maxHeldPerKey,
    ...config.prefixCache,
    uploadLimitBytes: config.uploadLimitBytes,
    engineCa: config.engineCa,
    responses: parts.responses,
    ...(parts.limiter ? { limiter: parts.limiter } : {}),
    ...(parts.budgets ? { budgets: parts.budgets } : {}),
    ...(parts.batches ? { batches: parts.batches } : {}),
    ...(tracing ? { tracing } : {}),
  });
  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/readyz', async (_request, reply) => {
    try {
      return { status: 'ready', models: await parts.ready() };
    } catch {
      return reply.code(503).send({ status: 'store unreachable' });
    }
  });
  return { app, router, requestLog };
}
