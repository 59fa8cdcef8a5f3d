// The gateway's request path on the client listener, in front of the
// fleet's replicas: registerRouter mounts the API dialects (dialects/) on
// the listener, and the Router puts together the parts each request goes
// through. It is separate from the reconciler because it is the hot path: it
// reads the replica directory and the catalog, never the store, and reports
// back only through cheap counters (replicaUse, UsageSink, metrics).
//
// A request's way, by file (in core/): intake.ts takes its body in; admission.ts's hooks
// check its key, body, model and rate limit, its dialect translating the
// body to the internal call and the ledger (ledger.ts) reserving its tokens;
// infer() below hijacks the reply and hands the exchange (exchange.ts) to
// the attempt loop (attempt-loop.ts), which holds it in the cold hold
// (cold-hold.ts) while its model starts, asks the chooser (chooser.ts) for a
// replica, and sends each attempt through the interceptors of dispatch.ts to
// the replica's pool (upstreams.ts), its answer relayed by the dialect's
// relay; the ledger settles it once it ends. The settings and their one
// table of defaults are in options.ts.
import type {
  ApiKeyRecord,
  ReplicaUse,
  ResponseStore,
  RoutedModel,
  RoutedModels,
  RouterReplica,
} from './ports/index.js';
import { randomBytes } from 'node:crypto';
import fastifyCors from '@fastify/cors';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import type { ErrorCode } from '../errors/index.js';
import { keyHook, armBodyTimeout, type AdmissionDeps } from './core/admission.js';
import { AttemptLoop } from './core/attempt-loop.js';
import { ReplicaChooser } from './core/chooser.js';
import { ColdHold } from './core/cold-hold.js';
import { FairShare } from './fair-share/index.js';
import { DIALECTS, openai, OPENAI_TURN, type DialectHost } from './dialects/index.js';
import { attemptMetrics, requestId, rewriteBody } from './core/dispatch.js';
import { replyErrorBody } from './core/errors.js';
import { UPSTREAM_PATHS, type Exchange } from './core/exchange.js';
import { clientCorsOptions } from './core/cors.js';
import { registerIntake } from './core/intake.js';
import { mirrorAfterSend } from './core/mirror.js';
import { ShadowBoard, ShadowRunner } from './traffic/index.js';
import { Ledger } from './core/ledger.js';
import { RouterMetrics } from './core/metrics.js';
import { compileRouterOptions, type RouterOptions, type RouterTimeouts } from './core/options.js';
import { RateLimiter } from './core/rate-limit.js';
import { newRecord } from './core/request-log.js';
import { admissionRefusalRecord } from './core/refusal-record.js';
import { streamOptionsResend } from './core/stream-options.js';
import { RunningRequests } from './core/running.js';
import { UpstreamPools, type Upstream } from './core/upstreams.js';
import { RemoteRouting } from './remote/index.js';
import { registerCapacityRoute } from './remote/capacity.js';
import { InProcessCalls, registerBatchRoutes } from './batches/index.js';
import type { Endpoint, ParsedRequest } from './core/validate.js';
import { modelServes } from './ports/endpoints.js';
import { RequestSpan, traceContext } from './tracing/index.js';
import type { RouterDeps } from './deps.js';

export type { RouterDeps } from './deps.js';

export class Router implements DialectHost {
  /** The compiled settings: every default filled once, here, from ROUTER_DEFAULTS. */
  readonly options: RouterOptions;
  readonly timeouts: Readonly<RouterTimeouts>;
  readonly bodyLimitBytes: number;
  readonly catalog: RoutedModels;
  readonly logger: Logger;
  readonly responseStore: ResponseStore | null;
  /** Seconds since epoch reported as every model's `created`: when this router started. */
  readonly createdS: number;
  /** Reservations settled and usage recorded, once per request. */
  readonly ledger: Ledger;
  /** The shadow comparison (src/gateway/traffic): what GET /api/v1/shadows shows. */
  readonly shadows: ShadowBoard;
  private readonly shadowRunner: ShadowRunner;
  private readonly metrics: RouterMetrics;
  /** Which replica each attempt goes to, and the use per replica that choice reads. */
  private readonly chooser: ReplicaChooser;
  /** Where requests for a model with no ready replica wait while one starts. */
  private readonly cold: ColdHold;
  private readonly fairShare: FairShare;
  /** Keep-alive pools by replica endpoint, made on first use. */
  private readonly pools: UpstreamPools;
  private readonly loop: AttemptLoop;
  private readonly sweepTimer: NodeJS.Timeout | null;
  /** CORS headers are set by a hook on the reply, and must be carried over to answers written raw. */
  private readonly corsOn: boolean;
  /** Remote replicas' circuits and Retry-After waits, and spill-over (src/gateway/remote). */
  private readonly remote: RemoteRouting;
  /** Requests running per key id, so a revocation ends them; no entry = none. */
  private readonly running = new RunningRequests();
  private readonly unsubscribeRevoked: () => void;
  /** Requests made in this process as a key already resolved (batch lines), through the listener's own routes. */
  readonly inProcess = new InProcessCalls();

  constructor(private readonly deps: RouterDeps) {
    const o = compileRouterOptions(deps);
    this.options = o;
    this.timeouts = o.timeouts;
    this.bodyLimitBytes = o.bodyLimitBytes;
    this.catalog = deps.catalog;
    this.logger = deps.logger;
    this.responseStore = deps.responses ?? null;
    this.corsOn = o.corsOrigins.length > 0;
    // The chooser keeps the send times spill-over reads; it is made below, before any request.
    this.remote = new RemoteRouting({
      now: o.now,
      loadStaleMs: o.loadStaleMs,
      sendsOf: (id) => this.chooser.sendsOf(id),
    });
    // Remotes whose circuit is open or that asked to be left alone are out of every candidate list, the cold hold's too.
    const replicas = this.remote.directory(deps.replicas);
    this.chooser = new ReplicaChooser(replicas, o, deps.logger);
    this.pools = new UpstreamPools(o.engineCa);
    this.cold = new ColdHold(replicas, o);
    this.fairShare = new FairShare(replicas, (m) => this.chooser.candidates(m).length, o.now, deps.registry);
    this.metrics = new RouterMetrics(
      deps.registry,
      () => this.cold.held,
      () => this.chooser.use,
    );
    this.ledger = new Ledger(deps.limiter ?? new RateLimiter(o.now), deps.usage, deps.logger, deps.budgets ?? null);
    this.shadows = new ShadowBoard(deps.registry);
    this.shadowRunner = new ShadowRunner({
      resolve: (name) => deps.catalog.resolve(name),
      serves: (m, endpoint) => modelServes(m, endpoint as Endpoint),
      board: this.shadows,
      logger: deps.logger,
    });
    this.createdS = Math.floor(o.now() / 1000);
    this.unsubscribeRevoked = deps.keys.onRevoked((keyId) => this.running.revoke(keyId));
    this.loop = new AttemptLoop({
      options: o,
      catalog: deps.catalog,
      replicas,
      logger: deps.logger,
      metrics: this.metrics,
      chooser: this.chooser,
      remote: this.remote,
      fairShare: this.fairShare,
      cold: this.cold,
      pools: this.pools,
      interceptors: [
        streamOptionsResend(deps.logger),
        rewriteBody(),
        ...this.chooser.interceptors(),
        ...this.remote.interceptors(),
        attemptMetrics(this.metrics),
        // The tag ends every upstream request id, so ids from two control planes (or a restart) never meet at one engine.
        requestId(`.${randomBytes(3).toString('hex')}`),
        // Only with tracing on: with it off an attempt pays not even the call.
        ...(deps.tracing ? [traceContext()] : []),
        // Innermost: the copy for a model's shadow starts once the client's request is with its pool.
        mirrorAfterSend(this.shadowRunner, (m, parsed) => this.replicaFor(m, parsed)),
      ],
    });
    const sweepMs = o.sweepIntervalMs;
    this.sweepTimer = sweepMs > 0 ? setInterval(() => this.sweep(), sweepMs).unref() : null;
  }

  /** In flight and last used per replica id, for the reconciler (scaling, ReplicaView's idle_seconds). */
  replicaUse(): Map<string, ReplicaUse> {
    return this.chooser.replicaUse();
  }

  /** Requests held per model (canonical name) waiting for a replica to become ready, for the scaler; no entry = none. */
  queued(): Map<string, number> {
    return this.cold.queued();
  }

  /** Interactive requests of `model` waiting now (fair-share queue, cold hold), for the batch pace; 0 = none. */
  interactiveWaiting(model: string): number {
    return this.fairShare.gate.waiting(model, 'interactive') + (this.cold.held.get(model) ?? 0);
  }

  /**
   * Closes the pools of endpoints no model lists as ready any more and that
   * carry nothing, and forgets the use of replicas that are gone.
   */
  sweep(): void {
    const live = new Set<string>();
    const liveIds = new Set<string>();
    for (const m of this.deps.catalog.models()) {
      for (const r of this.deps.replicas.ready(m.name)) {
        live.add(r.endpoint);
        liveIds.add(r.id);
      }
    }
    this.chooser.forget(liveIds);
    this.remote.stats.forget(liveIds);
    this.pools.sweep(live);
  }

  async close(): Promise<void> {
    if (this.sweepTimer) clearInterval(this.sweepTimer);
    this.cold.close();
    this.fairShare.close();
    this.unsubscribeRevoked();
    await Promise.all([this.pools.close(), this.chooser.close()]);
  }

  /** What the admission hooks (admission.ts) use of this router. */
  admission(): AdmissionDeps {
    return {
      keys: this.deps.keys,
      authRequired: this.deps.authRequired,
      catalog: this.deps.catalog,
      ledger: this.ledger,
      options: this.options,
      refuse: (...args) => this.refuse(...args),
      count: (model, status, key) => this.count(model, status, key),
      inProcess: (request) => this.inProcess.keyOf(request),
    };
  }

  replicaFor(model: RoutedModel, parsed: ParsedRequest): { replica: RouterReplica; upstream: Upstream } | null {
    const candidates = this.chooser.candidates(model);
    if (candidates.length === 0) return null;
    const replica = this.chooser.choose(model, candidates, parsed);
    return { replica, upstream: this.upstreamOf(replica) };
  }

  upstreamOf(replica: RouterReplica): Upstream {
    return this.pools.of(replica.endpoint, replica.nodes?.[0]);
  }

  describe(model: string): string {
    return this.deps.replicas.describe(model);
  }

  /**
   * An inference request the admission hooks let through (`request.call`):
   * relayed from here on the raw response, to the end of its answer.
   */
  async infer(request: FastifyRequest, reply: FastifyReply): Promise<unknown> {
    const startedAt = performance.now() - reply.elapsedTime;
    const key = request.apiKey;
    const { endpoint, contentType, parsed, raw, model, rule, shadow, tab, completionCap, turn } = request.call!;
    if (this.corsOn) {
      // The CORS hook sets its headers on the reply: they go out with what is written raw from here on.
      const hooked = reply.getHeaders();
      for (const name in hooked) reply.raw.setHeader(name, hooked[name]!);
    }
    reply.hijack();
    const res = reply.raw;
    const tracing = this.deps.tracing
      ? RequestSpan.start(this.deps.tracing, {
          id: request.id,
          endpoint,
          model,
          parsed,
          headers: request.headers,
          startedAt,
        })
      : null;
    const ex: Exchange = {
      id: request.id,
      endpoint,
      path: endpoint === 'rerank' ? (request.routeOptions.url ?? UPSTREAM_PATHS.rerank) : UPSTREAM_PATHS[endpoint],
      contentType,
      res,
      key,
      parsed,
      raw,
      requested: model,
      startedAt,
      clientGone: false,
      timedOut: false,
      revoked: false,
      abort: null,
      wake: null,
      dispatched: false,
      usageRefused: false,
      tab,
      completionCap,
      dialect: reply.request.dialect ?? openai,
      turn: turn ?? OPENAI_TURN,
      tracing,
      shadow,
      // The admission hooks ran between arrival and here; a queue that held the request says so itself.
      trace: newRecord(request.id, this.options.now() - reply.elapsedTime, model.name, endpoint, parsed.stream, {
        key: key?.prefix,
        rule,
        admittedMs: reply.elapsedTime,
      }),
    };
    // Revoked while the request was being admitted (a hook that waited on the store): it was not yet here to be told.
    const now = key ? this.deps.keys.lookupByHash(key.hash) : undefined;
    const close = this.running.open(
      ex,
      this.options.timeouts.totalTimeoutMs,
      !(now instanceof Promise) && now?.revokedAtMs != null,
    );
    let status = 0;
    try {
      status = await this.loop.run(ex);
    } catch (err) {
      this.deps.logger.error({ err, model: model.name, request: ex.id }, 'router failed a request');
      this.loop.fail(ex, 500, 'LLMGW_INTERNAL', 'internal error; the control plane log has the details');
      if (!res.writableEnded && res.headersSent) res.destroy();
      status = 500;
    } finally {
      close();
    }
    // No answer came from an engine (else its relay settled already): no token was used, the whole reservation goes back.
    tab.settle(model.name, ex.clientGone ? 0 : status, 0, 0);
    this.shadowRunner.primaryEnded(ex.shadow, startedAt, ex.clientGone ? 0 : status, ex.trace);
    this.count(model.name, ex.clientGone ? 499 : status, key);
    const seconds = (performance.now() - startedAt) / 1000;
    this.metrics.forModel(model.name).duration.observe(seconds);
    const t = ex.trace;
    t.status = status;
    t.clientGone = ex.clientGone;
    t.timedOut = ex.timedOut;
    t.durationMs = seconds * 1000;
    if (tracing) {
      const traceId = tracing.traceId;
      if (traceId !== undefined) t.traceId = traceId;
      tracing.ended(t);
    }
    this.deps.requestLog?.add(t);
    return reply;
  }

  /** Logs a refusal (5xx as errors, 4xx at info), counts it unless `counted`, and sends it in the route's dialect. */
  refuse(
    reply: FastifyReply,
    status: number,
    code: ErrorCode,
    message: string,
    param: string | null = null,
    headers: Record<string, string> = {},
    counted = false,
  ): FastifyReply {
    if (status >= 500) this.deps.logger.error({ code, status, request: reply.request.id }, message);
    else this.deps.logger.info({ code, status, request: reply.request.id }, message);
    if (!counted) this.count('none', status, null);
    // A limit's refusal at admission goes to the request log too: `ctl request ID` says which limit refused it.
    if (this.deps.requestLog) {
      const record = admissionRefusalRecord(reply, status, code, message, this.options.now());
      if (record) this.deps.requestLog.add(record);
    }
    return replyErrorBody(
      reply,
      status,
      (reply.request.dialect ?? openai).errorBody(status, code, message, param),
      headers,
    );
  }

  count(model: string, status: number, key: ApiKeyRecord | null): void {
    this.metrics.countRequest(model, status, key?.prefix ?? 'none');
  }
}

/**
 * Mounts the API dialects' endpoints on the client listener. The routes live
 * in their own Fastify scope, whose JSON parser keeps the body as bytes so
 * the request is forwarded exactly as sent. Call before the app listens;
 * the app's close() closes the router's upstream pools.
 */
export function registerRouter(app: FastifyInstance, deps: RouterDeps): Router {
  const router = new Router(deps);
  const corsOrigins = router.options.corsOrigins;
  // At the listener's root, before the routes: browser apps calling llmgw as they would call OpenAI or vLLM.
  if (corsOrigins.length) void app.register(fastifyCors, clientCorsOptions(corsOrigins));
  void app.register(async (scope) => {
    registerIntake(scope, {
      authRequired: deps.authRequired,
      bodyLimitBytes: router.bodyLimitBytes,
      idleBodyTimeoutMs: router.timeouts.idleBodyTimeoutMs,
      defaultDialect: openai,
    });
    // The key, for every route here; then, per inference route, the call (body, model, permission, limits) and the rate limit.
    scope.decorateRequest('apiKey', null);
    scope.decorateRequest('call', null);
    scope.decorateRequest('responsesTurn', null);
    scope.decorateRequest('uploadForm', null);
    scope.addHook('onRequest', keyHook(router.admission()));
    // The body is in: its idle timeout is disarmed, and from here a slow reader is bounded by the total timeout.
    scope.addHook('preHandler', (request, _reply, done) => {
      armBodyTimeout(request.raw.socket, 0);
      done();
    });
    for (const dialect of DIALECTS) dialect.routes(scope, router);
    registerCapacityRoute(scope, deps, router);
    if (deps.batches) registerBatchRoutes(scope, deps.batches, router);
  });
  router.inProcess.attach(app);
  app.addHook('onClose', async () => router.close());
  return router;
}
