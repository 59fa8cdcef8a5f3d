// Assembles a control plane from its compiled configuration: the store, the
// catalog and the three listeners. Building is separate from listening so
// tests can use inject() or port 0, and so that start-up problems (a bad
// catalog, an unreachable store) surface before any port is bound.
import type { FastifyInstance } from 'fastify';
import pino, { type Logger } from 'pino';
import { type AdminApiOptions, registerAdminApi } from './adminapi/index.js';
import { AdminGuard } from './adminapi/auth.js';
import { registerAuditApi } from './adminapi/audit.js';
import { registerRequestsApi } from './adminapi/requests.js';
import { registerShadowsApi } from './adminapi/shadows.js';
import { registerDisksApi } from './adminapi/disks.js';
import { registerDashboard } from './dashboard/index.js';
import { wirePeople } from './people/wire.js';
import { Catalog } from './catalog/index.js';
import type { ControlConfig, ListenAddress } from './config/index.js';
import { AssignmentBoard, registerAgentApi } from './agentapi/index.js';
import { Events, nodeChangeEvent, registerEventsApi } from './events/index.js';
import {
  connectionCapsFor,
  createJsonApp,
  hostAllowlist,
  needs,
  openFileLimit,
  registerConnectionRefusals,
} from '../http/index.js';
import { Inventory, localDisk, registerHeartbeatMetrics, registerNodeMetrics } from './inventory/index.js';
import { Cluster, GatewayDemand, registerControlPlanesRoute } from './leader/index.js';
import { explain, place } from './placement/index.js';
import type { Model } from './catalog/index.js';
import { Reconciler, toPlacementNode, toPlacementProfile, weightsKeyOf } from './reconciler/index.js';
import { Registry } from 'prom-client';
import type { Router } from '../gateway/index.js';
import { buildClientListener } from './client-listener.js';
import {
  MemoryKeyStore,
  MemoryUsageSink,
  registerKeyAdmin,
  registerUsageAdmin,
  StoredKeys,
  StoredUsage,
  type KeyStore,
  type UsageSink,
} from './keys/index.js';
import { MemoryResponseStore, StoredResponses, type ResponseStore } from './responses/index.js';
import { Store, StoredSessions } from './store/index.js';
import { registerWeightsApi, type WeightsApiOptions } from './weights/index.js';
import { peerClient } from '../tls/index.js';
import { childLogger } from '../log/index.js';
import { RemoteFleet } from './remote/index.js';
import { readKeyFile, RemoteSecrets } from './secrets/index.js';
import { RemoteCredentialRepository } from './store/remote-credentials.js';
import { openTeams } from './teams/index.js';
import { openBudgets, openGpuMeter } from './budgets/index.js';
import { openBatches } from './batches/index.js';
import { openBatchSurfaces } from './batches/surfaces.js';
import { registerBatchesAdminApi } from './batches/admin-api.js';

/** Pending connections the agent listener lets the kernel queue; the kernel caps it at net.core.somaxconn. */
const AGENT_LISTEN_BACKLOG = 8192;

export interface ControlPlaneDeps {
  logger?: Logger;
  /** Epoch ms; injected so tests control time. */
  now?: () => number;
  /** Accept http:// weight sources (loopback tests only). */
  allowHttpSources?: boolean;
  /** How often agents should report, ms. Absent: a third of node_stale_after, at most 5000. */
  heartbeatIntervalMs?: number;
}

export interface ControlPlaneUrls {
  client: string;
  admin: string;
  agent: string;
}

export class ControlPlane {
  private useTimer: NodeJS.Timeout | null = null;
  private responsesSweepTimer: NodeJS.Timeout | null = null;
  private adminUrl: string | null = null;

  private constructor(
    readonly config: ControlConfig,
    readonly logger: Logger,
    readonly store: Store | null,
    readonly catalog: Catalog,
    readonly inventory: Inventory,
    readonly assignments: AssignmentBoard,
    readonly reconciler: Reconciler,
    readonly router: Router,
    private readonly usage: UsageSink & { close?(): Promise<void> },
    readonly clientApp: FastifyInstance,
    readonly adminApp: FastifyInstance,
    readonly agentApp: FastifyInstance,
    /** The events log (scaling, nodes, drains, placement failures); `list()` is what GET /api/v1/events and the dashboard read. */
    readonly events: Events,
    /** Null: this is the only instance (SQLite or no store) and always leads. */
    readonly cluster: Cluster | null,
    /** Who may use the admin listener; `routes()` lists every admin route with the access it declared. */
    readonly adminGuard: AdminGuard,
    /** Responses API responses kept per key for previous_response_id and GET/DELETE /v1/responses/{id}. */
    readonly responses: ResponseStore,
    /** The clock the control plane was built with (deps.now, or Date.now). */
    private readonly now: () => number,
    /** Gateway processes' demand read from the store; null with no store or with several control planes (the cluster reads it). */
    private readonly gateways: GatewayDemand | null,
  ) {}

  static async create(config: ControlConfig, deps: ControlPlaneDeps = {}): Promise<ControlPlane> {
    const logger = deps.logger ?? pino({ level: config.logLevel, base: { part: 'control' } });
    const now = deps.now ?? Date.now;
    const store =
      config.store.kind === 'none'
        ? null
        : await Store.open({
            location: config.store,
            onWarning: (message, context) => logger.warn(context, message),
            ...(deps.now ? { now: deps.now } : {}),
          });
    // Several instances on one Postgres: one leads the reconciler, the rest follow through the store (src/control/leader).
    const cluster =
      store && config.store.kind === 'postgres'
        ? new Cluster({ store, url: config.store.url, now, logger: childLogger(logger, 'cluster') })
        : null;
    let catalog: Catalog;
    let inventory: Inventory | undefined;
    let reconciler: Reconciler;
    const assignments = new AssignmentBoard(now());
    const events = new Events({ store, now, logger: childLogger(logger, 'events') });
    // Every part's metrics, served on the admin listener at /metrics.
    const registry = new Registry();
    // Three heartbeats fit in the stale window, so one lost heartbeat never makes a node stale.
    const heartbeatIntervalMs =
      deps.heartbeatIntervalMs ?? Math.max(100, Math.min(5000, Math.floor(config.nodeStaleAfterMs / 3)));
    let secrets: RemoteSecrets | undefined;
    try {
      // Remote endpoints' API keys given through the API are sealed in the store under secrets_key_file.
      secrets = new RemoteSecrets(
        store ? new RemoteCredentialRepository(store.connection) : null,
        config.secretsKeyFile ? readKeyFile(config.secretsKeyFile) : null,
      );
      catalog = await Catalog.create({
        secrets,
        store,
        catalogFile: config.catalogFile,
        allowHttpSources: deps.allowHttpSources ?? false,
        allowUnsafeProfileEnv: config.allowUnsafeProfileEnv,
      });
      inventory = await Inventory.create({
        store,
        now,
        staleAfterMs: config.nodeStaleAfterMs,
        lostAfterMs: config.nodeLostAfterMs,
        joinToken: config.joinToken,
        joinApproval: config.joinApproval,
        lastSeenWriteMs: lastSeenWriteMs(config, heartbeatIntervalMs, cluster !== null),
        storeLagMs: cluster ? storeLagMs(lastSeenWriteMs(config, heartbeatIntervalMs, true)) : 0,
      });
      // Before any listener: it publishes the stored replicas' shards, so an agent's first heartbeat is told to keep them.
      reconciler = await Reconciler.create({
        catalog,
        inventory,
        assignments,
        store,
        now,
        logger: childLogger(logger, 'reconciler'),
        intervalMs: config.reconcileIntervalMs,
        events,
        registry,
        ...(cluster ? { leads: () => cluster.leads() } : {}),
        ...(config.maxCreatesPerPass === null ? {} : { plan: { maxCreatesPerPass: config.maxCreatesPerPass } }),
      });
    } catch (err) {
      await inventory?.close();
      await store?.close();
      throw err;
    }
    registerNodeMetrics(registry, inventory);
    registerHeartbeatMetrics(registry, inventory);
    // A join, a report that changes capacity or an admin state change: worth a pass now rather than at the tick.
    inventory.onChange(() => reconciler.notify());
    inventory.onChange((nodeId, why) => {
      const event = nodeChangeEvent(nodeId, why);
      if (event) events.record(event);
    });
    inventory.onNodeEvent((event) => events.record(event));

    // Keys are read on every request: cached in memory over the store. Usage is summed in memory and written in batches.
    const storedKeys: KeyStore = store ? await StoredKeys.create(store.connection) : new MemoryKeyStore();
    // Every key in a team whose limits cap its own (src/control/teams): the gateway reads keys narrowed by theirs.
    const teams = await openTeams(store, storedKeys, catalog, logger);
    const keys = teams.keys;
    // Budgets per team and key from leases in memory, and what tokens cost at the catalog's prices (src/control/budgets).
    const budgets = await openBudgets({
      store,
      catalog,
      now,
      logger: childLogger(logger, 'budgets'),
      events,
      registry,
      renewWaitMs: config.budgets.renewWaitMs,
    });
    const usage: UsageSink & { close?(): Promise<void> } = store
      ? new StoredUsage(store.connection, now, undefined, budgets.cost)
      : new MemoryUsageSink();
    // Models with no token price are charged the GPU-hours their replicas hold, at gpu_prices (src/control/budgets).
    const gpu = openGpuMeter({
      prices: config.gpuPrices,
      replicas: () => reconciler.replicas(),
      nodeGpus: (id) => inventory!.get(id)?.report?.gpus,
      store: store?.connection ?? null,
      tokenPriced: (model) => budgets.cost(model, 0, 0) !== undefined,
      usage: usage instanceof StoredUsage ? usage : { record: (e) => usage.record(e) },
      cluster,
      budgets: budgets.gate,
      now,
      logger: childLogger(logger, 'gpu-cost'),
    });
    // Responses API responses (store: true), per key, with responses_ttl and responses_max_per_key: in the store when there is one.
    const responsesOptions = { ...config.responses, now, logger: childLogger(logger, 'responses') };
    const responses: ResponseStore = store
      ? new StoredResponses(store.responses, responsesOptions)
      : new MemoryResponseStore(responsesOptions);

    // The Files and Batch APIs, and the runner of batch lines through the router (src/control/batches); null = no store or files_dir.
    const batches = openBatches({
      store,
      settings: config.batches,
      keys,
      catalog,
      now,
      logger: childLogger(logger, 'batches'),
    });

    // Each listener's connection cap, the defaults fitted to this process's open-file limit; refusals counted.
    const { caps: connectionCaps, note: capsNote } = connectionCapsFor(config.maxConnections, openFileLimit());
    if (capsNote) logger.info({ ...connectionCaps }, capsNote);
    const refusedConnection = registerConnectionRefusals(registry);
    const remotes = new RemoteFleet({
      catalog,
      storedKey: (model) => secrets!.get(model),
      // A catalog reload recompiles every remote: its key, already open, goes with it at once.
      openedKey: (model) => secrets?.openedNow(model),
      intervalMs: config.remoteProbeIntervalMs,
      now,
      logger: childLogger(logger, 'remote'),
    });
    const {
      app: clientApp,
      router,
      requestLog,
    } = await buildClientListener({
      config,
      logger,
      registry,
      now,
      maxConnections: connectionCaps.client,
      onConnectionRefused: refusedConnection('client'),
      catalog,
      // The catalog's remote endpoints and peers beside the fleet's replicas (src/control/remote).
      replicas: remotes.directory(reconciler.view),
      keys,
      usage: gpu.usage,
      responses,
      ...(cluster ? { limiter: cluster.limiter } : {}),
      budgets: budgets.gate,
      ...(batches ? { batches: batches.service } : {}),
      ready: async () => {
        if (store) await store.models.list();
        return catalog.models().length;
      },
    });
    void remotes.start();
    // Batch lines start only on spare places (src/control/batches/pace.ts); the scaler counts them up to batch_max_replicas.
    const batchSurfaces =
      batches && store
        ? openBatchSurfaces({
            store,
            repo: batches.repo,
            catalog,
            replicas: reconciler.view,
            router,
            cancel: (caller, id) => batches.service.cancelBatch(caller, id),
            now,
            logger: childLogger(logger, 'batches'),
            registry,
            paceOptions: { headroomFraction: config.batches.headroomFraction },
          })
        : null;
    if (batches && batchSurfaces) {
      // Lines start once the listener is up, and stop (their leases given back) before the store closes.
      clientApp.addHook('onReady', async () => batches.run(router, batchSurfaces.pace));
      clientApp.addHook('onClose', async () => {
        batchSurfaces.close();
        await batches.close();
      });
    }
    clientApp.addHook('onClose', async () => remotes.stop());
    // Scaling reads the router's demand at each pass: in flight and last use per replica, requests held per cold model.
    // With several instances the leader scales on every instance's use, summed through the store.
    // Alone on a store, `llmgw gateway` processes' demand comes through it too (src/control/gateway-process.ts).
    const gateways =
      store && !cluster ? new GatewayDemand({ store, now, logger, onMoreQueued: () => reconciler.notify() }) : null;
    reconciler.attachDemand(() => ({
      replicas: cluster?.fleetUse() ?? gateways?.withUse(router.replicaUse()) ?? router.replicaUse(),
      queued: gateways
        ? gateways.withQueued(router.queued())
        : withFleetQueued(router.queued(), cluster?.fleetQueued() ?? null),
      ...(batchSurfaces ? { batch: batchSurfaces.demand.demand() } : {}),
    }));

    // Agents' management APIs (logs, weight removal): https verified against agent_ca when it is set.
    const agentMgmt = peerClient(config.agentCa);
    // The admin and agent listeners take a client's headers and body in bounded time, as the client listener does:
    // a stalled body is cut with 408, and an idle keep-alive connection is closed.
    const listenerTimeouts = {
      headersTimeoutMs: config.clientHeadersTimeoutMs,
      bodyTimeoutMs: config.router.idleBodyTimeoutMs,
    };
    const adminApp = createJsonApp({
      logger: logger.child({ listener: 'admin' }),
      bodyLimitBytes: 1 << 20,
      https: config.tls.admin,
      ...listenerTimeouts,
      keepAliveTimeoutMs: 10_000,
      maxConnections: connectionCaps.admin,
      onConnectionRefused: refusedConnection('admin'),
    });
    // First, before any route: every route registered on the admin app from here on is behind the admin token unless it says otherwise.
    const adminGuard = AdminGuard.install(adminApp, {
      adminToken: config.adminToken,
      hosts: hostAllowlist({
        boundHost: config.adminAddr.host,
        extra: config.adminHosts,
        credentialsRequired: config.adminToken !== null,
      }),
    });
    // Why this instance refused a node's mgmt_addr at its join here, by node id; no entry = not refused (or joined elsewhere).
    const mgmtRefusals = new Map<string, string>();
    const mgmtRefusal = (nodeId: string) => mgmtRefusals.get(nodeId);
    const requestsApi = { log: requestLog, instance: cluster?.instanceId ?? 'local', shared: cluster !== null };
    const adminApi: AdminApiOptions = {
      catalog,
      inventory,
      mgmtRefusal,
      now,
      onNodeState: (nodeId) => {
        assignments.bump(nodeId);
        reconciler.notify();
      },
      onCatalogChange: () => reconciler.notify(),
      checkFit: (model) => neverFits(model, inventory),
      replicas: () => reconciler.replicas(),
      replicaCounts: () => reconciler.replicaCounts(),
      remoteHealth: (model) => remotes.health(model),
      nodeUsage: () => reconciler.nodeUsage(),
      // A follower shows the leader's last pass, which the leader writes to the store.
      explainPlacement: (model) => (cluster && !cluster.leads() ? cluster.explain(model) : reconciler.explain(model)),
      blockedDrains: () => (cluster && !cluster.leads() ? cluster.blockedDrains() : reconciler.blockedDrains()),
      fetchProgress: (shardId) => reconciler.fetchProgress(shardId),
      load: (replicaId) => reconciler.loadOf(replicaId),
      inFlight: (replicaId) => reconciler.inFlightOf(replicaId),
      drainDeadlineMs: reconciler.drainDeadlineMs,
      previewPlacement: (models) => reconciler.preview(models),
      previewFit: (models) => reconciler.previewFit(models),
      agentMgmt,
    };
    registerAdminApi(adminApp, adminApi);
    const weightsApi: WeightsApiOptions = { catalog, inventory, store, agentMgmt, mgmtRefusal };
    registerWeightsApi(adminApp, weightsApi);
    // People with roles and their own tokens beside the admin token, and signing in through the company's provider.
    const { people, sso } = wirePeople(adminApp, { guard: adminGuard, store, now, oidc: config.oidc });
    // The dashboard renders from the same options the two APIs above serve, so a page never contradicts ctl.
    registerDashboard(adminApp, {
      ...(people ? { people } : {}),
      ...(sso ? { sso } : {}),
      guard: adminGuard,
      admin: adminApi,
      weights: weightsApi,
      adminToken: config.adminToken,
      registry,
      now,
      ...(store ? { sessionBackend: new StoredSessions(store.connection) } : {}),
      events: async (about) =>
        (await events.list({ ...about, limit: 50 })).map((e) => ({ atMs: e.atMs, kind: e.kind, message: e.message })),
      ...(usage instanceof StoredUsage ? { usage: () => usage.list() } : {}),
      ...(store ? { audit: store.audit } : {}),
      requestLog: requestsApi,
      shadows: { board: router.shadows, catalog, instance: requestsApi.instance },
      ...(batchSurfaces ? { batches: batchSurfaces.admin } : {}),
      money: {
        teams: teams.store,
        keys: () => keys.list(),
        now,
        views: budgets.views({
          keys,
          ...(usage instanceof StoredUsage ? { usage: () => usage.costs() } : {}),
          ...(gpu.meter ? { gpuTotals: () => gpu.meter!.totals() } : {}),
        }),
      },
    });
    registerEventsApi(adminApp, { events });
    registerAuditApi(adminApp, { ...(store ? { audit: store.audit } : {}), now });
    registerDisksApi(adminApp, { catalog, inventory });
    registerRequestsApi(adminApp, requestsApi);
    registerShadowsApi(adminApp, { board: router.shadows, catalog, instance: requestsApi.instance });
    registerBatchesAdminApi(adminApp, batchSurfaces?.admin);
    registerKeyAdmin(adminApp, {
      keys,
      now,
      audit: (actor, action, target, detail) =>
        void store?.audit
          .append({ actor, action, target, detail })
          .catch((err: unknown) => logger.error({ err }, 'audit write failed')),
      modelExists: (name) => catalog.resolve(name) !== undefined,
      checkTeam: teams.checkTeam,
    });
    teams.register(adminApp, now);
    budgets.register(adminApp, {
      teamExists: (name) => teams.store.get(name) !== undefined,
      keys,
      ...(usage instanceof StoredUsage ? { usage: () => usage.costs() } : {}),
      ...(gpu.meter ? { gpuTotals: () => gpu.meter!.totals() } : {}),
    });
    // The last interval's GPU cost is charged before usage makes its last write.
    if (gpu.meter) adminApp.addHook('onClose', async () => gpu.meter!.close());
    registerUsageAdmin(adminApp, usage instanceof StoredUsage ? { usage, keys } : {});
    adminApp.get(
      '/metrics',
      needs('fleet.read', { access: config.metricsPublic ? ('public' as const) : ('admin' as const) }),
      async (_request, reply) => reply.header('content-type', registry.contentType).send(await registry.metrics()),
    );

    // Agents keep their connection between heartbeats (every few seconds): the idle keep-alive is left at Fastify's 72 s.
    // No child logger per request: a fleet's heartbeats arrive thousands a second, and what the agent
    // routes log names its node, which says more than a request id.
    const agentApp = createJsonApp({
      logger: logger.child({ listener: 'agent' }),
      bodyLimitBytes: 4 << 20,
      forceCloseConnections: true,
      https: config.tls.agent,
      requestLoggers: false,
      ...listenerTimeouts,
      maxConnections: connectionCaps.agent,
      onConnectionRefused: refusedConnection('agent'),
    });
    registerAgentApi(agentApp, {
      inventory,
      assignments,
      joinToken: config.joinToken,
      heartbeatIntervalMs,
      staleAfterMs: config.nodeStaleAfterMs,
      onMgmtAddrChecked: (nodeId, refusal) => {
        if (refusal === null) mgmtRefusals.delete(nodeId);
        else mgmtRefusals.set(nodeId, refusal);
      },
      onShardReport: (node, shards) => {
        reconciler.onShardReport(node, shards);
        // A node waiting for approval speaks for no shard (the reconciler refused its report): nothing to pass on to the other instances.
        if (node.approval !== 'pending') cluster?.onShardReport(node, shards);
      },
      // Half the stale window: agents move to another instance well before the leader could think their nodes stale.
      ...(cluster ? { refuseHeartbeatsUnsavedForMs: config.nodeStaleAfterMs / 2 } : {}),
    });

    cluster?.attach({
      catalog,
      keys: { reload: async () => void (await Promise.all([teams.reload(), budgets.reload()])) },
      inventory,
      reconciler,
      replicaUse: () => router.replicaUse(),
      queued: () => router.queued(),
    });
    const plane = new ControlPlane(
      config,
      logger,
      store,
      catalog,
      inventory,
      assignments,
      reconciler,
      router,
      usage,
      clientApp,
      adminApp,
      agentApp,
      events,
      cluster,
      adminGuard,
      responses,
      now,
      gateways,
    );
    registerControlPlanesRoute(adminApp, { cluster, now, adminUrl: () => plane.adminUrl });
    return plane;
  }

  /** Binds the three listeners; returns their URLs (with the real ports when 0 was asked for). */
  async listen(): Promise<ControlPlaneUrls> {
    const bind = async (app: FastifyInstance, addr: ListenAddress, tls: unknown, backlog?: number): Promise<string> => {
      await app.listen({ host: addr.host, port: addr.port, ...(backlog ? { backlog } : {}) });
      const address = app.server.address();
      const port = typeof address === 'object' && address ? address.port : addr.port;
      const host = addr.host.includes(':') ? `[${addr.host}]` : addr.host;
      return `${tls ? 'https' : 'http'}://${host}:${port}`;
    };
    const urls = {
      client: await bind(this.clientApp, this.config.clientAddr, this.config.tls.client),
      admin: await bind(this.adminApp, this.config.adminAddr, this.config.tls.admin),
      // A fleet reconnects all at once after a restart: with Node's default backlog of 511, connections
      // beyond it wait out SYN retries (1 s, 3 s, 7 s) while the loop works through the first ones.
      agent: await bind(this.agentApp, this.config.agentAddr, this.config.tls.agent, AGENT_LISTEN_BACKLOG),
    };
    this.adminUrl = urls.admin;
    this.reconciler.start();
    this.startResponsesSweep();
    // Several instances: the cluster sums every instance's use through the store for the leader instead.
    if (this.cluster) {
      this.cluster.start(urls);
      return urls;
    }
    // The router's per-replica use feeds idle_seconds between passes; scaling reads it fresh at each pass (attachDemand).
    this.gateways?.start();
    this.useTimer = setInterval(() => {
      const own = this.router.replicaUse();
      this.reconciler.reportUse(this.gateways?.withUse(own) ?? own);
    }, 1000);
    this.useTimer.unref();
    return urls;
  }

  /**
   * Deletes expired responses every ten minutes (get never returns one, so
   * this only frees the space). Every instance sweeps; deleting what is
   * already gone costs nothing. A failure (the store away) waits for the next.
   */
  private startResponsesSweep(): void {
    const log = childLogger(this.logger, 'responses');
    this.responsesSweepTimer = setInterval(() => {
      this.responses.sweep(this.now()).then(
        (dropped) => {
          if (dropped > 0) log.debug({ dropped }, 'expired responses deleted');
        },
        (err: unknown) => log.warn({ err }, 'could not delete expired responses; trying again at the next sweep'),
      );
    }, 600_000);
    this.responsesSweepTimer.unref();
  }

  async close(): Promise<void> {
    if (this.useTimer) clearInterval(this.useTimer);
    if (this.responsesSweepTimer) clearInterval(this.responsesSweepTimer);
    await this.gateways?.close();
    await this.reconciler.stop();
    // Right after the pass in progress: ending the lock connection lets another instance lead within a second.
    await this.cluster?.close();
    this.assignments.releaseAll();
    // The client listener drains first: a request still in flight settles its budgets' holds as it ends, and the
    // admin listener's close is what hands the leases back (and charges the last GPU interval). Closed side by side,
    // a stream running at shutdown settled into a lease already given back, and its tokens never reached the store.
    await Promise.allSettled([this.clientApp.close(), this.agentApp.close()]);
    await this.adminApp.close().catch(() => undefined);
    await this.inventory.close();
    await this.usage.close?.();
    await this.events.flush();
    await this.store?.close();
  }
}

/**
 * Held requests per model as the scaler sees them: this instance's own, now,
 * or every instance's summed at the last sync (which lags this one's by up
 * to a sync), whichever is more. `fleet` null = this instance alone.
 */
function withFleetQueued(
  local: ReadonlyMap<string, number>,
  fleet: ReadonlyMap<string, number> | null,
): Map<string, number> {
  const out = new Map(local);
  for (const [model, n] of fleet ?? []) out.set(model, Math.max(n, out.get(model) ?? 0));
  return out;
}

/**
 * Why a model could not be placed even on an idle fleet (every known node
 * ready and up, no GPU in use, all RAM and local disk free), or null when some
 * node could hold it. Used to refuse a model that can never run.
 */
export function neverFits(model: Model, inventory: Inventory): string | null {
  // A remote model runs nothing here: there is nothing to fit.
  if (model.remote) return null;
  // A node that has joined but not reported yet might hold it: refusing on
  // what is not known would turn a race into an error.
  if (inventory.list().some((n) => n.report === null)) return null;
  const nodes = inventory.list().map((n) => {
    const base = toPlacementNode(n, 'up');
    const disk = localDisk(n);
    return {
      ...base,
      adminState: 'ready' as const,
      gpusInUse: [],
      ...(n.report?.memory_total_bytes === undefined ? {} : { memoryFreeBytes: n.report.memory_total_bytes }),
      ...(disk === null ? {} : { localDiskFreeBytes: disk.totalBytes }),
    };
  });
  const profiles = model.profiles.map((p) => toPlacementProfile(p));
  const result = place({ nodes }, { model: model.name, weightsKey: weightsKeyOf(model.source), profiles });
  if (result.ok) return null;
  if (nodes.length === 0) return 'no node has joined yet';
  return explain(model.name, result.rejections, { nodeCount: result.nodeCount, profiles, notes: result.notes }).text;
}

/**
 * The least time between two store writes of one node's last_seen. Alone, an
 * instance reads last_seen back only after a restart, when every node is
 * given the whole lost window anyway, so the stale window is plenty. With
 * several instances the leader judges liveness on the stored last_seen,
 * which then lags the newest heartbeat by up to this, one more interval
 * (the heartbeat after the skipped ones), a flush and a refresh (a second
 * each) and some clock skew: all of it must stay inside the stale window.
 */
/**
 * How far a last_seen read from the store may trail the node's newest
 * heartbeat at the instance that heard it: the write throttle, then a flush,
 * a sync here (a second each) and a second of clock skew. An agent spends its
 * whole stale window on its own deadlines (poll, answer, failover; see the
 * agent's control-link.ts) counted from its last heartbeat's arrival, so a
 * node heard only through the store is given this much more before it is
 * called stale or lost: otherwise every failover away from a follower that
 * dropped off the network would flag the node stale for the store's delay.
 */
function storeLagMs(writeMs: number): number {
  return writeMs + 3000;
}

function lastSeenWriteMs(config: ControlConfig, heartbeatIntervalMs: number, cluster: boolean): number {
  if (!cluster) return config.nodeStaleAfterMs;
  return Math.max(0, config.nodeStaleAfterMs - heartbeatIntervalMs - 3000);
}
