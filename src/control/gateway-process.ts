// A gateway process (`llmgw gateway`): the client listener alone, with
// everything behind it read from the store a control plane writes. The
// catalog, the keys and the replica records (ready replicas with their
// endpoints and engine secrets) are reloaded as a following control plane
// reloads them: at once on Postgres's change notices, and every sync
// interval on either store; engine loads come through the store where the
// control planes pass shard reports on (Postgres). It follows through the
// same Cluster code a following control plane runs, as a non-candidate: it
// never leads, never runs a reconciler pass, writes no replica, opens no
// admin or agent listener, and writes its use of each replica and the
// requests it holds for cold models where the leader's scaler reads them
// (on SQLite, the lone control plane reads them: leader/gateway-demand.ts).
// Per-key limits are shared through the store with every other gateway and
// control plane that shares them (SharedRateLimiter). Keys are narrowed by
// their team, and hard budgets enforced from leases this process takes from
// the store's budget rows, as a control plane does: one more lease holder
// (one more lease of overshoot at most). Usage (with its cost) and Responses
// API responses go to the store as the control plane's do; a model priced by
// GPU-hours is metered as on a following control plane: this process adds
// the tokens it served per replica and charges them at each replica's
// measured rate, the leader alone adding GPU-hours (budgets/gpu-meter.ts).
//
// Apart from control-plane.ts because it builds a subset and runs none of
// the leader's loops; the gateway itself (src/gateway) knows nothing of it.
import { Gauge, Registry } from 'prom-client';
import pino, { type Logger } from 'pino';
import type { FastifyInstance } from 'fastify';
import { createJsonApp, connectionCapsFor, openFileLimit, registerConnectionRefusals } from '../http/index.js';
import { LlmgwError } from '../errors/index.js';
import { childLogger } from '../log/index.js';
import type { Router } from '../gateway/index.js';
import { AssignmentBoard } from './agentapi/index.js';
import { openBudgets, openGpuMeter, type Budgets } from './budgets/index.js';
import { Catalog } from './catalog/index.js';
import { Events } from './events/index.js';
import { buildClientListener } from './client-listener.js';
import type { ControlConfig, ListenAddress } from './config/index.js';
import { Inventory } from './inventory/index.js';
import { StoredKeys, StoredUsage } from './keys/index.js';
import { Cluster } from './leader/index.js';
import { Reconciler } from './reconciler/index.js';
import { StoredResponses } from './responses/index.js';
import { Store } from './store/index.js';
import { openTeams } from './teams/index.js';

export interface GatewayProcessDeps {
  logger?: Logger;
  /** Epoch ms; injected so tests control time. */
  now?: () => number;
  /** How often everything is read again from the store, ms; Postgres's change notices come sooner. Absent = 1000. */
  syncIntervalMs?: number;
}

export class GatewayProcess {
  private constructor(
    readonly config: ControlConfig,
    readonly logger: Logger,
    /** Every metric of this process: the router's, the listener's refusals, and which process answered how many requests. */
    readonly registry: Registry,
    readonly clientApp: FastifyInstance,
    readonly router: Router,
    private readonly store: Store,
    private readonly cluster: Cluster,
    private readonly inventory: Inventory,
    private readonly reconciler: Reconciler,
    private readonly usage: StoredUsage,
    private readonly budgets: Budgets,
    private readonly events: Events,
  ) {}

  static async create(config: ControlConfig, deps: GatewayProcessDeps = {}): Promise<GatewayProcess> {
    const logger = deps.logger ?? pino({ level: config.logLevel, base: { part: 'gateway' } });
    const now = deps.now ?? Date.now;
    if (config.store.kind === 'none')
      throw new LlmgwError(
        'LLMGW_CONFIG_INVALID',
        'llmgw gateway reads the catalog, keys and replicas from the store its control plane writes: set store to the same sqlite:PATH or postgres:// URL as `llmgw control` (it is none)',
      );
    const store = await Store.open({
      location: config.store,
      onWarning: (message, context) => logger.warn(context, message),
      ...(deps.now ? { now: deps.now } : {}),
    });
    const registry = new Registry();
    const cluster = new Cluster({
      store,
      url: config.store.kind === 'postgres' ? config.store.url : null,
      candidate: false,
      now,
      logger: childLogger(logger, 'cluster'),
      ...(deps.syncIntervalMs === undefined ? {} : { syncIntervalMs: deps.syncIntervalMs }),
    });
    let inventory: Inventory | undefined;
    let reconciler: Reconciler;
    let catalog: Catalog;
    try {
      catalog = await Catalog.create({
        store,
        catalogFile: config.catalogFile,
        allowUnsafeProfileEnv: config.allowUnsafeProfileEnv,
      });
      // The nodes, for the shard reports other instances pass on (engine loads); none reports here.
      inventory = await Inventory.create({
        store,
        now,
        staleAfterMs: config.nodeStaleAfterMs,
        lostAfterMs: config.nodeLostAfterMs,
      });
      // A follower's reconciler: the replica records as the store has them, and the router's view of them; no pass runs.
      reconciler = await Reconciler.create({
        catalog,
        inventory,
        assignments: new AssignmentBoard(now()),
        store,
        now,
        logger: childLogger(logger, 'reconciler'),
        intervalMs: config.reconcileIntervalMs,
        leads: () => false,
      });
    } catch (err) {
      await cluster.close();
      await inventory?.close();
      await store.close();
      throw err;
    }
    const storedKeys = await StoredKeys.create(store.connection);
    // As the control plane: the gateway reads every key narrowed by its team, and spends budgets from leases.
    const teams = await openTeams(store, storedKeys, catalog, logger);
    const keys = teams.keys;
    // Budget alerts go to the store's events log, where the control planes list them.
    const events = new Events({ store, now, logger: childLogger(logger, 'events') });
    const budgets = await openBudgets({
      store,
      catalog,
      now,
      logger: childLogger(logger, 'budgets'),
      events,
      registry,
      renewWaitMs: config.budgets.renewWaitMs,
    });
    const usage = new StoredUsage(store.connection, now, undefined, budgets.cost);
    // A non-leader's meter (this process never leads): tokens per replica in, GPU-hours from the leader's rows.
    const gpu = openGpuMeter({
      prices: config.gpuPrices,
      replicas: () => reconciler.replicas(),
      nodeGpus: (id) => inventory!.get(id)?.report?.gpus,
      store: store.connection,
      tokenPriced: (model) => budgets.cost(model, 0, 0) !== undefined,
      usage,
      cluster,
      budgets: budgets.gate,
      now,
      logger: childLogger(logger, 'gpu-cost'),
    });
    const responses = new StoredResponses(store.responses, {
      ...config.responses,
      now,
      logger: childLogger(logger, 'responses'),
    });
    // The client listener is this process's only one: it alone shares the open-file limit.
    const only = {
      ...config.maxConnections,
      admin: 0,
      agent: 0,
      set: [...config.maxConnections.set, 'admin' as const, 'agent' as const],
    };
    const { caps, note } = connectionCapsFor(only, openFileLimit());
    if (note) logger.info({ client: caps.client }, note);
    const { app, router } = await buildClientListener({
      config,
      logger,
      registry,
      now,
      maxConnections: caps.client,
      onConnectionRefused: registerConnectionRefusals(registry)('client'),
      catalog,
      replicas: reconciler.view,
      keys,
      usage: gpu.usage,
      responses,
      limiter: cluster.limiter,
      budgets: budgets.gate,
      ready: async () => {
        await store.models.list();
        return catalog.models().length;
      },
    });
    // The last interval is priced as the listener closes, before the leases go back and usage is written.
    if (gpu.meter) app.addHook('onClose', async () => gpu.meter!.close());
    // What the scaler reads (on the leader, through the store): the requests held here mark a cold model wanted.
    reconciler.attachDemand(() => ({ replicas: router.replicaUse(), queued: router.queued() }));
    cluster.attach({
      catalog,
      // Teams and budgets change with keys (they announce 'keys'): read all three again.
      keys: { reload: async () => void (await Promise.all([teams.reload(), budgets.reload()])) },
      inventory,
      reconciler,
      replicaUse: () => router.replicaUse(),
      queued: () => router.queued(),
    });
    registerWorkerRequests(registry);
    return new GatewayProcess(
      config,
      logger,
      registry,
      app,
      router,
      store,
      cluster,
      inventory,
      reconciler,
      usage,
      budgets,
      events,
    );
  }

  /** Binds the client listener and starts following the store; returns the listener's URL (with the real port when 0 was asked for). */
  async listen(): Promise<string> {
    const url = await bindApp(this.clientApp, this.config.clientAddr, this.config.tls.client !== null);
    this.cluster.start();
    return url;
  }

  /** Stops taking requests, finishes those in flight, writes what is buffered (usage, use, limits) and closes the store. */
  async close(): Promise<void> {
    await this.clientApp.close();
    // What this process spent is reported, and the leases it holds go back, before the store closes.
    await this.budgets.close();
    await this.cluster.close();
    await this.reconciler.stop();
    await this.inventory.close();
    await this.usage.close();
    await this.events.flush();
    await this.store.close();
  }
}

/**
 * Connections the metrics listener holds at most: its callers are a few
 * scrapers. It shares the process's open files with the client listener,
 * whose cap assumes it has them nearly alone, so a flood here is held to
 * this many and the oldest idle connection makes room.
 */
export const METRICS_MAX_CONNECTIONS = 16;

/**
 * A listener with GET /metrics and nothing else, for a gateway process that
 * has no admin listener; `collect` gives the text (one process's registry,
 * or every worker's summed by the primary). It asks no token: bind it where
 * only the scraper reaches.
 */
export async function serveMetrics(
  addr: ListenAddress,
  logger: Logger,
  collect: () => Promise<{ contentType: string; text: string }>,
): Promise<{ app: FastifyInstance; url: string }> {
  const app = createJsonApp({
    logger: logger.child({ listener: 'metrics' }),
    bodyLimitBytes: 1024,
    maxConnections: METRICS_MAX_CONNECTIONS,
  });
  app.get('/metrics', async (_request, reply) => {
    const { contentType, text } = await collect();
    return reply.header('content-type', contentType).send(text);
  });
  return { app, url: await bindApp(app, addr, false) };
}

async function bindApp(app: FastifyInstance, addr: ListenAddress, tls: boolean): Promise<string> {
  await app.listen({ host: addr.host, port: addr.port });
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : addr.port;
  const host = addr.host.includes(':') ? `[${addr.host}]` : addr.host;
  return `${tls ? 'https' : 'http'}://${host}:${port}`;
}

/**
 * llmgw_gateway_worker_requests{pid}: the requests this process answered,
 * summed from the router's counter at each scrape (nothing on the request
 * path). With --workers the primary's /metrics lists every worker: how the
 * connections were spread, and which pids are serving.
 */
function registerWorkerRequests(registry: Registry): void {
  const pid = String(process.pid);
  new Gauge({
    name: 'llmgw_gateway_worker_requests',
    help: 'Client requests this gateway process answered since it started, by its pid.',
    labelNames: ['pid'],
    registers: [registry],
    async collect() {
      const counter = registry.getSingleMetric('llmgw_router_requests_total');
      const values = counter ? (await counter.get()).values : [];
      this.set(
        { pid },
        values.reduce((sum, v) => sum + v.value, 0),
      );
    },
  });
}
