// The router: OpenAI's inference endpoints on the client listener, in front
// of the fleet's replicas. Per request it authenticates the key, checks the
// body, resolves the model, chooses a replica and relays the engine's answer
// byte for byte. It is separate from the reconciler because it is the hot
// path: it reads the replica directory and the catalog, never the store, and
// reports back only through cheap counters (replicaUse, UsageSink, metrics).
//
// Failure rules, in order: before the first byte reaches the client a refused
// or reset connection, or a 502/503 from an engine, moves the attempt to
// another replica and then to the model's fallbacks (bounded, with jittered
// backoff); after it, never, and a broken stream ends with an SSE error
// event. A model with no ready replica holds its request while one starts
// (polling `ready()` every `coldPollMs`, woken early by the directory's
// `subscribe` notification where it has one) up to `coldStartTimeoutMs`.
// The byte-level relay of one attempt is in relay.ts; the checks before the
// handler (key, call, rate limit) are Fastify hooks in admission.ts; the
// bookkeeping around each attempt (body, request id, in-flight, overhead)
// is a chain of interceptors in dispatch.ts; the settings and their one
// table of defaults are in options.ts.
import type {
  ApiKeyRecord,
  KeyStore,
  ReplicaDirectory,
  ReplicaUse,
  ResponseStore,
  RequestLimiter,
  RoutedModel,
  RoutedModels,
  RouterReplica,
  StoredResponse,
  UsageSink,
} from './ports.js';
import type { ServerResponse } from 'node:http';
import { randomBytes } from 'node:crypto';
import fastifyCors from '@fastify/cors';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { Dispatcher } from 'undici';
import { modelServes } from './endpoints.js';
import { LlmgwError, type ErrorCode } from '../errors/index.js';
import { UpstreamPools } from './upstreams.js';
import {
  allows,
  armBodyTimeout,
  callHook,
  fromAnthropic,
  fromAnthropicCount,
  keyHook,
  rateLimitHook,
  type AdmissionDeps,
} from './admission.js';
import { anthropicErrorBody, toAnthropicError, type AnthropicCall } from './anthropic/index.js';
import { AnthropicRelayHandler } from './relay-anthropic.js';
import { NativeResponsesRelay, ResponsesRelayHandler, type ResponsesRelayCall } from './relay-responses.js';
import { servesResponsesNatively } from './native.js';
import { fromResponses, previousResponseHook } from './responses-call.js';
import { replyError, writeError } from './errors.js';
import { RouterMetrics } from './metrics.js';
import { ReplicaChooser } from './chooser.js';
import { ColdHold, waitFor } from './cold-hold.js';
import { RateLimiter } from './rate-limit.js';
import { compileRouterOptions, type RouterOptions, type RouterSettings, type RouterTimeouts } from './options.js';
import {
  attemptMetrics,
  compose,
  requestId,
  rewriteBody,
  withholdsUsage,
  type Attempt,
  type AttemptExchange,
  type Dispatch,
} from './dispatch.js';
import { RelayHandler, describeNetError, type Outcome, type RelayHooks } from './relay.js';
import { Ledger, type Tab } from './ledger.js';
import { streamOptionsResend } from './stream-options.js';
import type { RequestLog, RequestRecord } from './request-log.js';
import type { Endpoint, ParsedRequest } from './validate.js';
import { readMultipartBody, type UploadRouteConfig } from './upload.js';

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
  /**
   * Where Responses API answers are kept (`store`, `previous_response_id`,
   * GET/DELETE /v1/responses/{id}); absent = none is kept: `store` is
   * ignored, and a previous_response_id or an id to GET is never found.
   */
  responses?: ResponseStore;
  /** Where each finished request is recorded (which replica, why it failed); absent = none is. */
  requestLog?: RequestLog;
}

/** One client request through its life. */
interface Exchange extends AttemptExchange {
  /** The listener's request id (sent back as x-request-id), sent upstream and in every log line about it. */
  readonly id: string;
  readonly endpoint: Endpoint;
  readonly path: string;
  /** The body's Content-Type as the engine gets it (a form keeps its boundary). */
  readonly contentType: string;
  readonly res: ServerResponse;
  readonly key: ApiKeyRecord | null;
  readonly parsed: ParsedRequest;
  readonly raw: Buffer;
  readonly requested: RoutedModel;
  /** performance.now() at arrival. */
  readonly startedAt: number;
  clientGone: boolean;
  timedOut: boolean;
  /** The key was revoked while this ran: stopped as a timeout is, answered 401 before any byte, or its stream ends with an error event. */
  revoked: boolean;
  /** Aborts the upstream attempt in progress; null between attempts. */
  abort: (() => void) | null;
  /** Wakes a cold hold or a backoff wait early. */
  wake: (() => void) | null;
  dispatched: boolean;
  /** The engine refused the stream_options the router added: sent as the client wrote it from then on. */
  usageRefused: boolean;
  /** Its account (ledger.ts): the reservation made at admission, settled once when it ends. */
  readonly tab: Tab;
  /** max_tokens added to a chat or completions body that set none, so the engine generates no more than was reserved; null = none added. */
  readonly completionCap: number | null;
  /** A Messages API request: its answer and refusals are translated to Anthropic's shapes; null = OpenAI's. */
  readonly anthropic: AnthropicCall | null;
  /** A Responses API request: sent natively or as chat per replica, its answer kept when it asks; null = another API. */
  readonly responses: ResponsesRelayCall | null;
  /** What the request log will hold of it, filled in as it goes. */
  readonly trace: RequestRecord;
}

/** The Messages API's routes, whose key may come as x-api-key and whose answers carry `request-id`. */
const ANTHROPIC_ROUTES: ReadonlySet<string> = new Set(['/v1/messages', '/v1/messages/count_tokens']);

/** Where an engine serving the Responses API natively takes it. */
const RESPONSES_PATH = '/v1/responses';

/** OpenAI's words for an id it has no response for (GET and DELETE). */
function responseNotFound(id: string): string {
  return `Response with id '${id}' not found. Responses are kept per API key (with store: true, the default) until they expire or are deleted.`;
}

/** Where each endpoint goes on the engine (rerank goes to the path the client called: vLLM serves three). */
const UPSTREAM_PATHS: Record<Endpoint, string> = {
  chat: '/v1/chat/completions',
  completions: '/v1/completions',
  embeddings: '/v1/embeddings',
  rerank: '/v1/rerank',
  score: '/v1/score',
  transcriptions: '/v1/audio/transcriptions',
  tokenize: '/tokenize',
  detokenize: '/detokenize',
  messages: '/v1/chat/completions',
  // Translated to chat at admission; a replica serving the Responses API itself is sent RESPONSES_PATH instead.
  responses: '/v1/chat/completions',
};

const RETRY_BACKOFF_CAP_MS = 500;

/** The headers every upstream request starts from (its request id is added per request). */
const STREAM_HEADERS = Object.freeze({ 'content-type': 'application/json', accept: 'text/event-stream' });
const WHOLE_HEADERS = Object.freeze({ 'content-type': 'application/json', accept: 'application/json' });

export class Router {
  /** The compiled settings: every default filled once, here, from ROUTER_DEFAULTS. */
  readonly options: RouterOptions;
  private readonly now: () => number;
  private readonly random: () => number;
  readonly timeouts: Readonly<RouterTimeouts>;
  readonly bodyLimitBytes: number;
  private readonly metrics: RouterMetrics;
  private readonly limiter: RequestLimiter;
  /** Reservations settled and usage recorded, once per request. */
  readonly ledger: Ledger;
  /** Which replica each attempt goes to, and the use per replica that choice reads. */
  private readonly chooser: ReplicaChooser;
  /** Where requests for a model with no ready replica wait while one starts. */
  private readonly cold: ColdHold;
  /** Keep-alive pools by replica endpoint, made on first use. */
  private readonly pools: UpstreamPools;
  private readonly sweepTimer: NodeJS.Timeout | null;
  /** Seconds since epoch reported as every model's `created`: when this router started. */
  private readonly createdS: number;
  /** One upstream attempt: send() behind the interceptors of dispatch.ts, composed once. */
  private readonly dispatch: Dispatch<Exchange>;
  /** CORS headers are set by a hook on the reply, and must be carried over to answers written raw. */
  private readonly corsOn: boolean;
  /**
   * Responses being kept, by key and id (the router's, and the engine's
   * where it differs: keepingSlot), until the store has them: a
   * continuation sent the moment its predecessor's answer ends waits for
   * the write instead of missing it. No entry = nothing pending.
   */
  private readonly keeping = new Map<string, Promise<void>>();
  /** Requests running per key id, so a revocation ends them; no entry = none. */
  private readonly runningByKey = new Map<string, Set<Exchange>>();
  private readonly unsubscribeRevoked: () => void;

  constructor(private readonly deps: RouterDeps) {
    const o = compileRouterOptions(deps);
    this.options = o;
    this.now = o.now;
    this.random = o.random;
    this.timeouts = o.timeouts;
    this.bodyLimitBytes = o.bodyLimitBytes;
    this.corsOn = o.corsOrigins.length > 0;
    this.chooser = new ReplicaChooser(deps.replicas, o);
    this.pools = new UpstreamPools(o.engineCa);
    this.cold = new ColdHold(deps.replicas, o);
    this.metrics = new RouterMetrics(
      deps.registry,
      () => this.cold.held,
      () => this.chooser.use,
    );
    this.limiter = deps.limiter ?? new RateLimiter(this.now);
    this.ledger = new Ledger(this.limiter, deps.usage, deps.logger);
    this.createdS = Math.floor(this.now() / 1000);
    this.unsubscribeRevoked = deps.keys.onRevoked((keyId) => this.endRevoked(keyId));
    this.dispatch = compose(
      (a) => this.send(a),
      [
        streamOptionsResend(deps.logger),
        rewriteBody(),
        ...this.chooser.interceptors(),
        attemptMetrics(this.metrics),
        // The tag ends every upstream request id, so ids from two control planes (or a restart) never meet at one engine.
        requestId(`.${randomBytes(3).toString('hex')}`),
      ],
    );
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
    this.pools.sweep(live);
  }

  async close(): Promise<void> {
    if (this.sweepTimer) clearInterval(this.sweepTimer);
    this.cold.close();
    this.unsubscribeRevoked();
    await this.pools.close();
    // Responses still being written to the store finish first: their clients have them and may continue from them.
    await Promise.all(this.keeping.values());
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
    };
  }

  // ---- the endpoints ----------------------------------------------------

  /** GET /v1/models: the models (and aliases) this key may use. */
  listModels(request: FastifyRequest): unknown {
    const key = request.apiKey;
    const data: unknown[] = [];
    for (const m of this.deps.catalog.models()) {
      if (key && !allows(key, m)) continue;
      for (const id of [m.name, ...m.aliases])
        data.push({ id, object: 'model', created: this.createdS, owned_by: 'llmgw', root: m.name });
    }
    return { object: 'list', data };
  }

  /** GET /v1/models/{id}: one entry, by name or alias, if this key may use it. */
  getModel(id: string, request: FastifyRequest, reply: FastifyReply): unknown {
    const key = request.apiKey;
    const m = this.deps.catalog.resolve(id);
    if (!m || (key && !allows(key, m))) {
      return this.refuse(
        reply,
        404,
        'LLMGW_MODEL_NOT_FOUND',
        `The model \`${id}\` does not exist. GET /v1/models lists the models this key may use.`,
        'model',
      );
    }
    return { id, object: 'model', created: this.createdS, owned_by: 'llmgw', root: m.name };
  }

  /**
   * An inference request the admission hooks let through (`request.call`):
   * relayed from here on the raw response, to the end of its answer.
   */
  async infer(request: FastifyRequest, reply: FastifyReply): Promise<unknown> {
    const startedAt = performance.now() - reply.elapsedTime;
    const key = request.apiKey;
    const { endpoint, contentType, parsed, raw, model, tab, completionCap, anthropic, responses } = request.call!;
    if (this.corsOn) {
      // The CORS hook sets its headers on the reply: they go out with what is written raw from here on.
      const hooked = reply.getHeaders();
      for (const name in hooked) reply.raw.setHeader(name, hooked[name]!);
    }
    reply.hijack();
    const res = reply.raw;
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
      anthropic,
      responses,
      trace: {
        id: request.id,
        atMs: this.now() - reply.elapsedTime,
        model: model.name,
        endpoint,
        stream: parsed.stream,
        ...(key ? { key: key.prefix } : {}),
        status: 0,
        clientGone: false,
        timedOut: false,
        attempts: [],
        durationMs: 0,
      },
    };
    res.on('close', () => {
      if (res.writableFinished) return;
      ex.clientGone = true;
      ex.abort?.();
      ex.wake?.();
    });
    const total = setTimeout(() => {
      ex.timedOut = true;
      ex.abort?.();
      ex.wake?.();
    }, this.timeouts.totalTimeoutMs);
    if (key) {
      let mine = this.runningByKey.get(key.id);
      if (!mine) this.runningByKey.set(key.id, (mine = new Set()));
      mine.add(ex);
      // Revoked while the request was being admitted (a hook that waited on the store): it was not yet here to be told.
      const now = this.deps.keys.lookupByHash(key.hash);
      if (!(now instanceof Promise) && now?.revokedAtMs != null) ex.revoked = true;
    }
    let status = 0;
    try {
      status = await this.route(ex);
    } catch (err) {
      this.deps.logger.error({ err, model: model.name, request: ex.id }, 'router failed a request');
      this.fail(ex, 500, 'LLMGW_INTERNAL', 'internal error; the control plane log has the details');
      if (!res.writableEnded && res.headersSent) res.destroy();
      status = 500;
    } finally {
      clearTimeout(total);
      if (key) {
        const mine = this.runningByKey.get(key.id);
        mine?.delete(ex);
        if (mine?.size === 0) this.runningByKey.delete(key.id);
      }
    }
    // No answer came from an engine (else its relay settled already): no token was used, the whole reservation goes back.
    tab.settle(model.name, ex.clientGone ? 0 : status, 0, 0);
    this.count(model.name, ex.clientGone ? 499 : status, key);
    const seconds = (performance.now() - startedAt) / 1000;
    this.metrics.forModel(model.name).duration.observe(seconds);
    if (this.deps.requestLog) {
      const t = ex.trace;
      t.status = status;
      t.clientGone = ex.clientGone;
      t.timedOut = ex.timedOut;
      t.durationMs = seconds * 1000;
      this.deps.requestLog.add(t);
    }
    return reply;
  }

  /**
   * POST /v1/messages/count_tokens: the prompt counted by the engine's own
   * tokenizer, at one ready replica of the model: vLLM's /tokenize, which
   * takes chat messages (and tools) and applies the model's chat template,
   * as the builtin and sim engines' do. An engine without one that does
   * (llama.cpp's takes text only) is refused with a 400 saying so; with no
   * ready replica, 503 (nothing is held or started for a count). The call
   * counts against the key's request limit and costs it no tokens.
   */
  async countTokens(request: FastifyRequest, reply: FastifyReply): Promise<unknown> {
    const key = request.apiKey;
    const { parsed, model, tab } = request.call!;
    tab.release();
    const candidates = this.chooser.candidates(model);
    if (candidates.length === 0) {
      return this.refuse(
        reply,
        503,
        'LLMGW_NO_REPLICA',
        `model \`${model.name}\` has 0 ready replicas: ${this.deps.replicas.describe(model.name)}; count_tokens asks a ready replica's tokenizer`,
      );
    }
    const replica = this.chooser.choose(model, candidates, parsed);
    const served = replica.servedNames ?? [model.name, ...model.aliases];
    const body = JSON.stringify({
      model: served.includes(parsed.model) ? parsed.model : model.name,
      messages: parsed.body.messages,
      ...(parsed.body.tools === undefined ? {} : { tools: parsed.body.tools }),
      add_generation_prompt: true,
    });
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      accept: 'application/json',
      'x-request-id': request.id,
    };
    if (replica.engineSecret !== undefined) headers.authorization = `Bearer ${replica.engineSecret}`;
    const { pool, basePath } = this.pools.of(replica.endpoint, replica.nodes?.[0]);
    let status: number;
    let text: string;
    try {
      const res = await pool.request({
        path: `${basePath}/tokenize`,
        method: 'POST',
        headers,
        body,
        headersTimeout: this.timeouts.headersTimeoutMs,
        bodyTimeout: this.timeouts.idleBodyTimeoutMs,
      });
      status = res.statusCode;
      text = await res.body.text();
    } catch (err) {
      return this.refuse(
        reply,
        502,
        'LLMGW_UPSTREAM',
        `replica ${replica.id} of \`${model.name}\` did not answer count_tokens: ${describeNetError(err)}`,
      );
    }
    let count: unknown;
    try {
      count = status === 200 ? (JSON.parse(text) as { count?: unknown }).count : undefined;
    } catch {
      count = undefined;
    }
    if (typeof count === 'number') {
      this.count(model.name, 200, key);
      return reply
        .code(200)
        .header('content-type', 'application/json')
        .send(JSON.stringify({ input_tokens: count }));
    }
    if (status >= 500)
      return this.refuse(
        reply,
        502,
        'LLMGW_UPSTREAM',
        `replica ${replica.id} of \`${model.name}\` answered count_tokens with ${status}`,
      );
    return this.refuse(
      reply,
      400,
      'LLMGW_BAD_REQUEST',
      `count_tokens needs a tokenizer endpoint that takes chat messages, and the engine serving model \`${model.name}\` has none ` +
        `(its /tokenize answered ${status}; vLLM, the builtin and the sim engines have one, llama.cpp's takes text only); ` +
        'the usage of each answer (input_tokens) has the exact count',
    );
  }

  // ---- routing ----------------------------------------------------------

  /** Runs the attempts; returns the status the client got (0 if it went away). */
  private async route(ex: Exchange): Promise<number> {
    const model = ex.requested;
    const chain: RoutedModel[] = [model];
    // A fallback is a model like any other: a key limited to some models is never served by another through it.
    let skipped: string[] | null = null;
    for (const name of model.fallbacks) {
      const f = this.deps.catalog.resolve(name);
      // A fallback that does not serve the endpoint would answer an engine's 404: it is no fallback for this request.
      if (!f || chain.includes(f) || !modelServes(f, ex.endpoint)) continue;
      if (ex.key && !allows(ex.key, f)) {
        skipped ??= [];
        if (!skipped.includes(f.name)) skipped.push(f.name);
        continue;
      }
      chain.push(f);
    }
    if (skipped) {
      // Said in the answer, where the caller learns why a fallback it expected did not answer. The same for every
      // request of that key and model, so the log has it at debug only, not a line per request.
      ex.res.setHeader('x-llmgw-fallback-skipped', skipped.join(', '));
      this.deps.logger.debug(
        { model: model.name, skipped, key: ex.key!.prefix, request: ex.id },
        'fallbacks this API key may not use were skipped',
      );
    }
    let skipPrimary = false;
    let coldNote = '';
    if (this.chooser.candidates(model).length === 0) {
      const willStart = this.deps.replicas.demand(model.name);
      // Serve a fallback meanwhile only if one can answer now; otherwise holding for the model itself is the better wait.
      if (model.fallbackWhileCold && chain.some((f) => f !== model && this.chooser.candidates(f).length > 0)) {
        skipPrimary = true;
      } else if (willStart) {
        // One key cannot fill the control plane with waiting requests (each holds a socket and a timer for minutes).
        const refusal = this.cold.refusal(ex.key, model);
        if (refusal !== null) {
          this.deps.logger.info(
            { code: 'LLMGW_RATE_LIMITED', model: model.name, key: ex.key!.prefix, request: ex.id },
            refusal,
          );
          this.fail(ex, 429, 'LLMGW_RATE_LIMITED', refusal, { 'retry-after': '5' });
          return 429;
        }
        ex.trace.heldMs = await this.cold.hold(ex, ex.key, model, () => this.chooser.candidates(model).length > 0);
        if (ex.clientGone) return 0;
        if (ex.timedOut) return this.timeout(ex);
        if (ex.revoked) return this.revokedAnswer(ex);
        if (this.chooser.candidates(model).length === 0)
          coldNote = ` after waiting ${Math.round(this.timeouts.coldStartTimeoutMs / 1000)} s for one to start`;
      }
    }

    let attempts = 0;
    let lastFailure = '';
    for (let i = skipPrimary ? 1 : 0; i < chain.length; i++) {
      const m = chain[i]!;
      const tried = new Set<string>();
      for (let k = 0; k < this.options.attemptsPerModel && attempts < this.options.maxAttempts; k++) {
        const candidates = this.chooser.candidates(m).filter((r) => !tried.has(r.id));
        if (candidates.length === 0) break;
        const replica = this.chooser.choose(m, candidates, ex.parsed);
        tried.add(replica.id);
        if (attempts > 0) {
          this.metrics.retries.inc({ model: model.name });
          await this.backoff(ex, attempts);
          if (ex.clientGone) return 0;
          if (ex.timedOut) return this.timeout(ex);
          if (ex.revoked) return this.revokedAnswer(ex);
        }
        attempts++;
        const attemptFrom = performance.now();
        const outcome = await this.forward(ex, m, replica);
        const traced = {
          model: m.name,
          replica: replica.id,
          ...(replica.nodes ? { nodes: replica.nodes } : {}),
          durationMs: performance.now() - attemptFrom,
        };
        if (outcome.kind === 'done') {
          ex.trace.attempts.push({ ...traced, outcome: 'answered' });
          if (m !== model) this.metrics.fallbacks.inc({ model: model.name, fallback: m.name });
          return outcome.status;
        }
        if (ex.clientGone) return 0;
        if (ex.timedOut) return this.timeout(ex);
        if (ex.revoked) return this.revokedAnswer(ex);
        const reason = outcome.kind === 'retry' ? outcome.reason : 'the engine refused stream_options';
        ex.trace.attempts.push({ ...traced, outcome: 'failed', reason });
        lastFailure = `replica ${replica.id} of \`${m.name}\`: ${reason}`;
        this.deps.logger.warn(
          { model: m.name, replica: replica.id, reason, request: ex.id },
          'upstream attempt failed before the first byte',
        );
      }
      if (attempts >= this.options.maxAttempts) break;
    }

    if (attempts > 0) {
      const message = `model \`${model.name}\`: ${attempts} attempt${attempts === 1 ? '' : 's'} failed before any answer; the last: ${lastFailure}`;
      this.deps.logger.error({ model: model.name, attempts, request: ex.id }, message);
      this.fail(ex, 502, 'LLMGW_UPSTREAM', message);
      return 502;
    }
    let message = `model \`${model.name}\` has 0 ready replicas${coldNote}: ${this.deps.replicas.describe(model.name)}`;
    if (chain.length > 1)
      message += `; its fallbacks (${chain
        .slice(1)
        .map((m) => `\`${m.name}\``)
        .join(', ')}) have none ready either`;
    this.deps.logger.error({ model: model.name, request: ex.id }, message);
    this.fail(ex, 503, 'LLMGW_NO_REPLICA', message, { 'retry-after': '5' });
    return 503;
  }

  private backoff(ex: Exchange, attempt: number): Promise<void> {
    const ms = Math.min(RETRY_BACKOFF_CAP_MS, this.options.retryBackoffMs * 2 ** (attempt - 1) * (0.5 + this.random()));
    return waitFor(ex, ms);
  }

  /** A refusal written on the raw response, in the shape of the API the client speaks. */
  private fail(
    ex: Exchange,
    status: number,
    code: ErrorCode,
    message: string,
    headers: Record<string, string> = {},
  ): void {
    ex.trace.failure = { code, message };
    if (ex.anthropic === null) return writeError(ex.res, status, code, message, headers);
    const res = ex.res;
    if (res.headersSent || res.destroyed) return;
    const body = anthropicErrorBody(message, status);
    res.writeHead(status, {
      'content-type': 'application/json; charset=utf-8',
      'content-length': Buffer.byteLength(body),
      ...headers,
    });
    res.end(body);
  }

  /** The 401 for a request whose key was revoked before its answer's first byte. */
  private revokedAnswer(ex: Exchange): number {
    this.fail(ex, 401, 'LLMGW_UNAUTHORIZED', revokedMessage(ex.key!));
    return 401;
  }

  /** Ends every running request of a key just revoked: within the time it takes this process to learn of it. */
  private endRevoked(keyId: string): void {
    const mine = this.runningByKey.get(keyId);
    if (!mine) return;
    for (const ex of mine) {
      ex.revoked = true;
      ex.abort?.();
      ex.wake?.();
    }
  }

  private timeout(ex: Exchange): number {
    this.fail(
      ex,
      504,
      'LLMGW_UPSTREAM',
      `the request took longer than ${this.timeouts.totalTimeoutMs} ms and was stopped`,
    );
    return 504;
  }

  // ---- one upstream attempt ---------------------------------------------

  /**
   * One attempt at `replica` of `model`, through the interceptors (the body,
   * the request id, in-flight, metrics). A Responses request goes as it is
   * to an engine that serves that API, and as chat to any other.
   */
  private forward(ex: Exchange, model: RoutedModel, replica: RouterReplica): Promise<Outcome> {
    const headers: Record<string, string> = { ...(ex.parsed.stream ? STREAM_HEADERS : WHOLE_HEADERS) };
    if (ex.contentType !== 'application/json') headers['content-type'] = ex.contentType;
    if (ex.responses !== null && servesResponsesNatively(replica.engine)) {
      return this.dispatch({
        ex,
        model,
        replica,
        path: RESPONSES_PATH,
        passThrough: true,
        body: ex.responses.native,
        headers,
      });
    }
    return this.dispatch({ ex, model, replica, path: ex.path, passThrough: false, body: ex.raw, headers });
  }

  /** The end of the chain: the attempt sent to the replica's pool, relayed to the client as it comes. */
  private send(a: Attempt<Exchange>): Promise<Outcome> {
    const { ex, model, replica } = a;
    const { pool, basePath } = this.pools.of(replica.endpoint, replica.nodes?.[0]);
    // The engine's secret replaces anything the client sent: a client's key never reaches an engine.
    if (replica.engineSecret !== undefined) a.headers.authorization = `Bearer ${replica.engineSecret}`;
    return new Promise<Outcome>((resolve) => {
      const hooks: RelayHooks = {
        onFirstByte: () => {
          const ms = performance.now() - ex.startedAt;
          ex.trace.ttftMs = ms;
          this.metrics.forModel(ex.requested.name).ttft.observe(ms / 1000);
        },
        onAnswered: (status, tail, events) =>
          ex.tab.settleFromAnswer(model.name, status, tail, events, ex.parsed, ex.trace),
        brokenMessage: () =>
          ex.revoked
            ? revokedMessage(ex.key!)
            : ex.timedOut
              ? `the request took longer than ${this.timeouts.totalTimeoutMs} ms and was stopped`
              : 'the engine stopped answering mid-response',
        brokenCode: () =>
          ex.revoked ? { code: 'LLMGW_UNAUTHORIZED', status: 401 } : { code: 'LLMGW_UPSTREAM', status: 502 },
        onBroken: (reason) => {
          if (ex.revoked) {
            ex.trace.broken = 'the API key was revoked';
            this.deps.logger.info(
              { model: model.name, replica: replica.id, key: ex.key?.prefix, request: ex.id },
              'ended a running answer: its API key was revoked',
            );
            return;
          }
          ex.trace.broken = reason;
          this.deps.logger.error(
            { model: model.name, replica: replica.id, reason, request: ex.id },
            'upstream broke after the first byte',
          );
        },
        timeout: () => (ex.revoked ? this.revokedAnswer(ex) : this.timeout(ex)),
      };
      pool.dispatch(
        {
          path: basePath + a.path,
          method: 'POST',
          headers: a.headers,
          body: a.body,
          headersTimeout: this.timeouts.headersTimeoutMs,
          bodyTimeout: this.timeouts.idleBodyTimeoutMs,
        },
        this.handlerFor(a, hooks, resolve),
      );
    });
  }

  /** The relay for an attempt: bytes as they come, or translated to the client's API. */
  private handlerFor(
    a: Attempt<Exchange>,
    hooks: RelayHooks,
    resolve: (o: Outcome) => void,
  ): Dispatcher.DispatchHandler {
    const { ex, model } = a;
    if (ex.responses !== null) {
      const keep = (response: Record<string, unknown>) => this.keepResponse(ex, ex.responses!, model, response);
      if (a.passThrough) return new NativeResponsesRelay(ex, hooks, resolve, keep, ex.responses.id);
      return new ResponsesRelayHandler(ex, hooks, resolve, ex.responses, keep, withholdsUsage(ex));
    }
    if (ex.anthropic !== null)
      return new AnthropicRelayHandler(ex, hooks, resolve, ex.anthropic, ex.id, withholdsUsage(ex));
    return new RelayHandler(ex, hooks, resolve, withholdsUsage(ex));
  }

  /**
   * A finished Response kept for previous_response_id and GET, when the
   * request asks (`store`, default true) and there is a store. Called before
   * the client has the answer's last byte; a lookup of the id meanwhile
   * waits for the write (see `keeping`). A write that fails is logged: the
   * client has its answer, only the continuation by id is lost.
   */
  private keepResponse(
    ex: Exchange,
    call: ResponsesRelayCall,
    model: RoutedModel,
    response: Record<string, unknown>,
  ): void {
    const store = this.deps.responses;
    if (!store || !call.store) return;
    // Kept under the router's own id whatever the engine answered: an engine's ids (predictable, or the same from two
    // engines) never name another key's response. The engine's id, where it differs, is kept beside it for continuing.
    const id = call.id;
    const engineId = typeof response.id === 'string' && response.id !== id ? response.id : null;
    const keyId = ex.key?.id ?? 'anonymous';
    // An engine serving the API natively was sent store false and no previous id: the kept copy says what the client asked.
    const kept = { ...response, id, store: true, previous_response_id: call.previousResponseId };
    const slots = [keepingSlot(keyId, id), ...(engineId === null ? [] : [keepingSlot(keyId, engineId)])];
    const put = store
      .put({
        id,
        keyId,
        engineId,
        model: model.name,
        createdAtMs: this.now(),
        response: kept,
        items: call.itemsAfter(kept),
      })
      .catch((err: unknown) =>
        this.deps.logger.error(
          { err, request: ex.id, response: id },
          'a Responses answer could not be kept; continuing from it by id will not find it',
        ),
      )
      .finally(() => {
        for (const slot of slots) if (this.keeping.get(slot) === put) this.keeping.delete(slot);
      });
    for (const slot of slots) this.keeping.set(slot, put);
  }

  /**
   * The output items of this key's kept responses that `itemIds` name (for
   * item_reference inputs), once the responses being kept now are written:
   * the AI SDK sends its next step the moment an answer ends.
   */
  async keptItems(key: ApiKeyRecord | null, itemIds: readonly string[]): Promise<ReadonlyMap<string, unknown>> {
    const store = this.deps.responses;
    if (!store) return new Map();
    await Promise.all(this.keeping.values());
    return store.findItems(key?.id ?? 'anonymous', itemIds);
  }

  /** A kept response of this key, once any write of it in flight is done; undefined when there is none (or no store). */
  async keptResponse(key: ApiKeyRecord | null, id: string): Promise<StoredResponse | undefined> {
    const store = this.deps.responses;
    if (!store) return undefined;
    const keyId = key?.id ?? 'anonymous';
    await this.keeping.get(keepingSlot(keyId, id));
    return store.get(keyId, id);
  }

  /** GET /v1/responses/{id}: the kept Response, if this key kept it. */
  async getResponse(id: string, request: FastifyRequest, reply: FastifyReply): Promise<unknown> {
    const kept = await this.keptResponse(request.apiKey, id);
    if (!kept) return this.refuse(reply, 404, 'LLMGW_NOT_FOUND', responseNotFound(id));
    return kept.response;
  }

  /**
   * GET /v1/responses/{id}/input_items: what the response answered (the
   * conversation before its output), as OpenAI lists it: newest first
   * unless `order=asc`, `limit` items (1-100, default 20) after the item
   * `after`. An item kept without an id (a message as the client sent it)
   * is listed under one made from the response's id and its place, the
   * same on every call, so paging by it works.
   */
  async listInputItems(
    id: string,
    query: Record<string, unknown>,
    request: FastifyRequest,
    reply: FastifyReply,
  ): Promise<unknown> {
    const kept = await this.keptResponse(request.apiKey, id);
    if (!kept) return this.refuse(reply, 404, 'LLMGW_NOT_FOUND', responseNotFound(id));
    const limit = query.limit === undefined ? 20 : Number(query.limit);
    if (!Number.isInteger(limit) || limit < 1 || limit > 100)
      return this.refuse(
        reply,
        400,
        'LLMGW_BAD_REQUEST',
        `limit: want a whole number from 1 to 100, got ${String(query.limit)}`,
        'limit',
      );
    const order = query.order ?? 'desc';
    if (order !== 'asc' && order !== 'desc')
      return this.refuse(reply, 400, 'LLMGW_BAD_REQUEST', `order: want "asc" or "desc", got ${String(order)}`, 'order');
    const output = Array.isArray(kept.response.output) ? kept.response.output.length : 0;
    const items = kept.items.slice(0, Math.max(0, kept.items.length - output)).map((item, i) => {
      const o = item as Record<string, unknown>;
      return typeof o.id === 'string' ? o : { ...o, id: `item_${kept.id.replace(/^resp_/, '')}_${i}` };
    });
    if (order === 'desc') items.reverse();
    let from = 0;
    if (typeof query.after === 'string') {
      const at = items.findIndex((item) => item.id === query.after);
      if (at === -1)
        return this.refuse(
          reply,
          400,
          'LLMGW_BAD_REQUEST',
          `after: response ${id} has no input item ${query.after}`,
          'after',
        );
      from = at + 1;
    }
    const data = items.slice(from, from + limit);
    return {
      object: 'list',
      data,
      first_id: data[0]?.id ?? null,
      last_id: data.at(-1)?.id ?? null,
      has_more: from + limit < items.length,
    };
  }

  /** DELETE /v1/responses/{id}: as OpenAI answers it. */
  async deleteResponse(id: string, request: FastifyRequest, reply: FastifyReply): Promise<unknown> {
    const store = this.deps.responses;
    const keyId = request.apiKey?.id ?? 'anonymous';
    await this.keeping.get(keepingSlot(keyId, id));
    const deleted = store ? await store.delete(keyId, id) : false;
    if (!deleted) return this.refuse(reply, 404, 'LLMGW_NOT_FOUND', responseNotFound(id));
    return { id, object: 'response', deleted: true };
  }

  // ---- keys and refusals ------------------------------------------------

  /** Logs a refusal (5xx as errors, 4xx at info), counts it unless `counted`, and sends it. */
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
    return replyError(reply, status, code, message, param, headers);
  }

  count(model: string, status: number, key: ApiKeyRecord | null): void {
    this.metrics.countRequest(model, status, key?.prefix ?? 'none');
  }
}

/** What a request of a key revoked while it ran is told: the same words as a revoked key's refusal at admission. */
function revokedMessage(key: ApiKeyRecord): string {
  return `the API key ${key.prefix}… was revoked; ask the operator for a new one`;
}

/** Where a response being kept waits in `keeping`: per key, as the store keeps it. */
function keepingSlot(keyId: string, id: string): string {
  return `${keyId}\0${id}`;
}

/**
 * @fastify/cors options for the client listener, when `origins` may call it
 * from a browser ('*' = any). Keys travel in Authorization, never in
 * cookies, so there is no credentials mode; the headers a browser app reads
 * (request id, Retry-After, rate limits) are exposed to it.
 */
function clientCorsOptions(origins: readonly string[]) {
  return {
    origin: origins.includes('*') ? '*' : [...origins],
    methods: ['GET', 'POST', 'DELETE', 'OPTIONS'],
    exposedHeaders: [
      'x-request-id',
      'retry-after',
      'x-ratelimit-limit-requests',
      'x-ratelimit-remaining-requests',
      'x-ratelimit-limit-tokens',
      'x-ratelimit-remaining-tokens',
      'x-llmgw-fallback-skipped',
    ],
    maxAge: 600,
    // A bare OPTIONS (no Origin) goes on to the routes and is answered in the listener's shape, not as a refused preflight.
    strictPreflight: false,
  };
}

/**
 * Mounts the OpenAI endpoints on the client listener. The routes live in
 * their own Fastify scope, whose JSON parser keeps the body as bytes so the
 * request is forwarded exactly as sent. Call before the app listens; the
 * app's close() closes the router's upstream pools.
 */
export function registerRouter(app: FastifyInstance, deps: RouterDeps): Router {
  const router = new Router(deps);
  const bodyLimit = router.bodyLimitBytes;
  const corsOrigins = router.options.corsOrigins;
  // At the listener's root, before the routes: browser apps calling llmgw as they would call OpenAI or vLLM.
  if (corsOrigins.length) void app.register(fastifyCors, clientCorsOptions(corsOrigins));
  void app.register(async (scope) => {
    scope.removeContentTypeParser(['application/json', 'text/plain']);
    scope.addContentTypeParser('application/json', { parseAs: 'buffer', bodyLimit }, (_request, body: Buffer, done) => {
      // A byte-order mark (PowerShell 5 writes one before UTF-8) is not JSON, and some engines refuse it: dropped.
      done(null, body[0] === 0xef && body[1] === 0xbb && body[2] === 0xbf ? body.subarray(3) : body);
    });
    // An audio upload, kept as its bytes (within the route's body limit: 413 past it) to be sent on as is, its form read as it arrives.
    // An upload (an audio file) is larger than any JSON body: its own limit, on its one route.
    const uploadLimit = router.options.uploadLimitBytes;
    scope.addContentTypeParser('multipart/form-data', readMultipartBody);
    scope.addContentTypeParser('*', (request, _payload, done) => {
      done(
        new LlmgwError(
          'LLMGW_BAD_REQUEST',
          `send the body as JSON with Content-Type: application/json, not ${request.headers['content-type']?.slice(0, 80)}`,
          { status: 415 },
        ),
      );
    });
    scope.addHook('onRequest', (request, reply, done) => {
      const post = request.method === 'POST';
      if (post && request.headers['content-type'] === undefined) {
        // Without keys, nothing but the type stops a web page in the user's browser from driving inference:
        // a page can send a body with no type (a Blob) without a CORS preflight, but never application/json.
        if (!deps.authRequired) {
          replyError(
            reply,
            415,
            'LLMGW_UNSUPPORTED_MEDIA_TYPE',
            'this gateway asks for no API key (api_keys: off), so it reads only bodies sent with Content-Type: application/json; send that header',
          );
          return;
        }
        // With keys, a body without a content type (a script that sets none) is read as JSON, as vLLM reads it.
        request.headers['content-type'] = 'application/json';
      }
      if (
        post &&
        !deps.authRequired &&
        /^multipart\/form-data\b/i.test(request.headers['content-type'] ?? '') &&
        request.headers.authorization === undefined
      ) {
        // A web page can post a form anywhere without a CORS preflight, but cannot add an Authorization header
        // without one: without keys, that header (any value; OpenAI's clients always send one) is what a form must carry.
        replyError(
          reply,
          415,
          'LLMGW_UNSUPPORTED_MEDIA_TYPE',
          'this gateway asks for no API key (api_keys: off), so it reads a multipart upload only with an Authorization header (any value, as OpenAI clients send); add one',
        );
        return;
      }
      const encoding = request.headers['content-encoding'];
      if (post && encoding !== undefined && encoding.trim().toLowerCase() !== 'identity') {
        replyError(
          reply,
          415,
          'LLMGW_BAD_REQUEST',
          `the body is sent with Content-Encoding: ${encoding.slice(0, 40)}, which llmgw does not decode; send it uncompressed`,
        );
        return;
      }
      // A client that starts a body and stalls is cut after idleBodyTimeoutMs of silence (Node destroys a socket whose timeout nobody handles).
      armBodyTimeout(request.raw.socket, router.timeouts.idleBodyTimeoutMs);
      if (ANTHROPIC_ROUTES.has(request.routeOptions.url ?? '')) {
        // Here, not in the Messages scope's own hooks, which run after the key hook below.
        // Anthropic's SDKs read the request id from `request-id` (message._request_id); x-request-id is sent too.
        reply.raw.setHeader('request-id', request.id);
        const apiKey = request.headers['x-api-key'];
        if (request.headers.authorization === undefined && typeof apiKey === 'string')
          request.headers.authorization = `Bearer ${apiKey}`;
      }
      done();
    });
    // The key, for every route here; then, per inference route, the call (body, model, permission, limits) and the rate limit.
    const admission = router.admission();
    scope.decorateRequest('apiKey', null);
    scope.decorateRequest('call', null);
    scope.decorateRequest('responsesTurn', null);
    scope.decorateRequest('uploadForm', null);
    scope.addHook('onRequest', keyHook(admission));
    // The body is in: its idle timeout is disarmed, and from here a slow reader is bounded by the total timeout.
    scope.addHook('preHandler', (request, _reply, done) => {
      armBodyTimeout(request.raw.socket, 0);
      done();
    });
    const rateLimit = rateLimitHook(admission);
    // count_tokens generates nothing and costs no tokens: it takes a request, and reserves none.
    const countRateLimit = rateLimitHook(admission, { countOnly: true });
    const inference = (endpoint: Endpoint) => ({ bodyLimit, preHandler: [callHook(admission, endpoint), rateLimit] });
    scope.get('/v1/models', async (request) => router.listModels(request));
    // RoutedModel names may hold "/" (org/name), so the id is the rest of the path.
    scope.get<{ Params: { '*': string } }>('/v1/models/*', async (request, reply) =>
      router.getModel(request.params['*'], request, reply),
    );
    scope.post('/v1/chat/completions', inference('chat'), (request, reply) => router.infer(request, reply));
    scope.post('/v1/completions', inference('completions'), (request, reply) => router.infer(request, reply));
    scope.post('/v1/embeddings', inference('embeddings'), (request, reply) => router.infer(request, reply));
    // Pass-through endpoints: relayed as the engine answers, through the same checks. Rerank answers on vLLM's three paths.
    for (const path of ['/v1/rerank', '/rerank', '/v2/rerank'])
      scope.post(path, inference('rerank'), (request, reply) => router.infer(request, reply));
    scope.post('/v1/score', inference('score'), (request, reply) => router.infer(request, reply));
    const upload: UploadRouteConfig = { multipartForm: true };
    scope.post(
      '/v1/audio/transcriptions',
      { ...inference('transcriptions'), bodyLimit: Math.max(bodyLimit, uploadLimit), config: upload },
      (request, reply) => router.infer(request, reply),
    );
    scope.post('/tokenize', inference('tokenize'), (request, reply) => router.infer(request, reply));
    scope.post('/detokenize', inference('detokenize'), (request, reply) => router.infer(request, reply));
    // OpenAI's Responses API: the previous response loaded (by key) before the body is translated to chat for the checks.
    scope.post(
      '/v1/responses',
      {
        bodyLimit,
        preHandler: [previousResponseHook(router), callHook(admission, 'responses', fromResponses), rateLimit],
      },
      (request, reply) => router.infer(request, reply),
    );
    scope.get<{ Params: { id: string } }>('/v1/responses/:id', async (request, reply) =>
      router.getResponse(request.params.id, request, reply),
    );
    scope.get<{ Params: { id: string }; Querystring: Record<string, unknown> }>(
      '/v1/responses/:id/input_items',
      async (request, reply) => router.listInputItems(request.params.id, request.query, request, reply),
    );
    scope.delete<{ Params: { id: string } }>('/v1/responses/:id', async (request, reply) =>
      router.deleteResponse(request.params.id, request, reply),
    );
    // Anthropic's Messages API, in a scope of its own: every refusal made for it (by the hooks above, by
    // Fastify) leaves in Anthropic's error shape. Its key may come as x-api-key (read by the first hook above).
    void scope.register(async (messages) => {
      messages.addHook('onSend', (_request, reply, payload, done) => {
        if (reply.statusCode < 400 || typeof payload !== 'string') return done(null, payload);
        done(null, toAnthropicError(payload, reply.statusCode));
      });
      messages.post(
        '/v1/messages',
        { bodyLimit, preHandler: [callHook(admission, 'messages', fromAnthropic), rateLimit] },
        (request, reply) => router.infer(request, reply),
      );
      messages.post(
        '/v1/messages/count_tokens',
        { bodyLimit, preHandler: [callHook(admission, 'messages', fromAnthropicCount), countRateLimit] },
        (request, reply) => router.countTokens(request, reply),
      );
    });
  });
  app.addHook('onClose', async () => router.close());
  return router;
}
