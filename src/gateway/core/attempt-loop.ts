// The attempt loop: one request's attempts, from the fallback chain to the
// answer or the refusal. Before the first byte reaches the client a refused
// or reset connection, or a 502/503 from an engine, moves the request to
// another replica of the model and then to its fallbacks (bounded by
// attemptsPerModel and maxAttempts, with jittered backoff); after it, never.
// A model with no ready replica holds the request in the cold hold first, or
// is served by a ready fallback at once when it says fallback_while_cold. A
// request that got no answer is refused here: 502 (every attempt failed),
// 503 (nothing ready), 504 (the total timeout), 401 (its key was revoked),
// in its dialect's shape. Separate from the router's wiring, from the chooser
// (which replica) and from the relays (the bytes of one attempt). The chain
// of models is fallbackChain(), a pure function.
import type { Logger } from 'pino';
import { allows } from './admission.js';
import type { ColdHold } from './cold-hold.js';
import { waitFor } from './cold-hold.js';
import type { ReplicaChooser } from './chooser.js';
import { attachSecret, compose, upstreamRelay, type Attempt, type Dispatch, type Interceptor } from './dispatch.js';
import { modelServes } from '../ports/endpoints.js';
import { writeErrorBody } from './errors.js';
import { revokedMessage, type Exchange } from './exchange.js';
import type { RouterMetrics } from './metrics.js';
import type { RouterOptions } from './options.js';
import type { ApiKeyRecord, ReplicaDirectory, RoutedModel, RoutedModels, RouterReplica } from '../ports/index.js';
import type { Outcome, RelayHooks } from './relay.js';
import type { UpstreamPools } from './upstreams.js';
import type { RemotePolicy } from './remote-policy.js';
import type { FairShare, Placed, QueueRefusal } from '../fair-share/index.js';
import { coldRecord, type ChoiceRecord, type RequestAttempt } from './request-log.js';
import type { Endpoint } from './validate.js';
import { refuseUnservable, tallyUnservable, type UnservableTally } from './unservable.js';
import type { ErrorCode } from '../../errors/index.js';

const RETRY_BACKOFF_CAP_MS = 500;

/** The headers every upstream request starts from (its request id is added per request). */
const STREAM_HEADERS = Object.freeze({ 'content-type': 'application/json', accept: 'text/event-stream' });
const WHOLE_HEADERS = Object.freeze({ 'content-type': 'application/json', accept: 'application/json' });
const NONE_SKIPPED: readonly string[] = Object.freeze([]);

/**
 * The models a request may be served by, in order: `model`, then those of
 * its fallbacks that exist, serve `endpoint` (one that does not would
 * answer an engine's 404) and are not listed already. A fallback `key` may
 * not use is left out and named in `skipped`: a key limited to some models
 * is never served by another through a fallback.
 */
export function fallbackChain(
  model: RoutedModel,
  endpoint: Endpoint,
  key: ApiKeyRecord | null,
  catalog: Pick<RoutedModels, 'resolve'>,
): { chain: RoutedModel[]; skipped: readonly string[] } {
  const chain: RoutedModel[] = [model];
  let skipped: string[] | null = null;
  for (const name of model.fallbacks) {
    const f = catalog.resolve(name);
    if (!f || chain.includes(f) || !modelServes(f, endpoint)) continue;
    if (key && !allows(key, f)) {
      skipped ??= [];
      if (!skipped.includes(f.name)) skipped.push(f.name);
      continue;
    }
    chain.push(f);
  }
  return { chain, skipped: skipped ?? NONE_SKIPPED };
}

/** What the loop is run with: the gateway's parts it asks, and the interceptors around each attempt. */
export interface AttemptLoopDeps {
  readonly options: RouterOptions;
  readonly catalog: RoutedModels;
  readonly replicas: ReplicaDirectory;
  readonly logger: Logger;
  readonly metrics: RouterMetrics;
  readonly chooser: ReplicaChooser;
  readonly cold: ColdHold;
  readonly pools: UpstreamPools;
  /** Around each attempt, the first listed outermost (dispatch.ts); the send to the pool is the end of the chain. */
  readonly interceptors: readonly Interceptor[];
  /** Remote replicas' circuits and spill-over (src/gateway/remote); absent = every replica is treated as local. */
  readonly remote?: RemotePolicy;
  /** Places at models with a declared capacity (src/gateway/fair-share); absent = never queued. */
  readonly fairShare?: FairShare;
}

const PLACED: Placed = Object.freeze({ ok: true as const, queuedMs: 0 });

export class AttemptLoop {
  /** One upstream attempt: send() behind the interceptors, composed once. */
  private readonly dispatch: Dispatch<Exchange>;

  constructor(private readonly deps: AttemptLoopDeps) {
    this.dispatch = compose((a) => this.send(a), deps.interceptors);
  }

  /** Runs the attempts; returns the status the client got (0 if it went away). */
  async run(ex: Exchange): Promise<number> {
    const model = ex.requested;
    const { chain, skipped } = fallbackChain(model, ex.endpoint, ex.key, this.deps.catalog);
    if (skipped.length > 0) {
      // Said in the answer, where the caller learns why a fallback it expected did not answer. The same for every
      // request of that key and model, so the log has it at debug only, not a line per request.
      ex.res.setHeader('x-llmgw-fallback-skipped', skipped.join(', '));
      this.deps.logger.debug(
        { model: model.name, skipped, key: ex.key!.prefix, request: ex.id },
        'fallbacks this API key may not use were skipped',
      );
    }
    // Spill-over: the model's spill target goes first when its policy says so (src/gateway/remote/spill.ts).
    const spill = this.deps.remote?.spill(model, this.deps.catalog, (m) => this.deps.chooser.candidates(m)) ?? null;
    if (spill?.to) {
      const at = chain.indexOf(spill.to);
      if (at >= 0) chain.splice(at, 1);
      chain.unshift(spill.to);
      // Served remotely meanwhile, a model at zero still gets a local replica started.
      if (this.deps.chooser.candidates(model).length === 0) this.deps.replicas.demand(model.name);
    }
    let skipPrimary = false;
    let coldNote = '';
    if (!spill?.to && this.deps.chooser.candidates(model).length === 0) {
      const willStart = this.deps.replicas.demand(model.name);
      // Serve a fallback meanwhile only if one can answer now; otherwise holding for the model itself is the better wait.
      if (model.fallbackWhileCold && chain.some((f) => f !== model && this.deps.chooser.candidates(f).length > 0)) {
        skipPrimary = true;
        ex.trace.cold = {
          model: model.name,
          startMs: performance.now() - ex.startedAt,
          heldMs: 0,
          end: 'served_by_fallback',
        };
      } else if (willStart) {
        // One key cannot fill the control plane with waiting requests (each holds a socket and a timer for minutes).
        const refusal = this.deps.cold.refusal(ex.key, model);
        if (refusal !== null) {
          this.deps.logger.info(
            { code: 'LLMGW_RATE_LIMITED', model: model.name, key: ex.key!.prefix, request: ex.id },
            refusal,
          );
          this.fail(ex, 429, 'LLMGW_RATE_LIMITED', refusal, { 'retry-after': '5' });
          return 429;
        }
        ex.tracing?.holdStarted(model);
        const holdFrom = performance.now();
        ex.trace.heldMs = await this.deps.cold.hold(
          ex,
          ex.key,
          model,
          () => this.deps.chooser.candidates(model).length > 0,
        );
        ex.trace.cold = coldRecord(ex, model.name, holdFrom, ex.trace.heldMs, this.deps.chooser.candidates(model));
        ex.tracing?.holdEnded(this.deps.chooser.candidates(model).length > 0, ex.trace.heldMs);
        if (ex.clientGone) return 0;
        if (ex.timedOut) return this.timeout(ex);
        if (ex.revoked) return this.revokedAnswer(ex);
        if (this.deps.chooser.candidates(model).length === 0)
          coldNote = ` after waiting ${Math.round(this.deps.options.timeouts.coldStartTimeoutMs / 1000)} s for one to start`;
      }
    }

    let attempts = 0;
    let lastFailure = '';
    /** What the last failed attempt asks the client be told (a remote's 429 or hang); null = the router's 502. */
    let lastRefusal: { readonly status: 429 | 504; readonly retryAfterS?: number } | null = null;
    let unservable: UnservableTally | null = null;
    for (let i = skipPrimary ? 1 : 0; i < chain.length; i++) {
      const m = chain[i]!;
      const tried = new Set<string>();
      for (let k = 0; k < this.deps.options.attemptsPerModel && attempts < this.deps.options.maxAttempts; k++) {
        const candidates = this.deps.chooser.candidates(m).filter((r) => !tried.has(r.id));
        if (candidates.length === 0) break;
        // A model at its declared capacity: wait for a place in its fair-share queue, then choose among what is free.
        // Awaited only when the model queues: an attempt with nothing to wait for pays no turn of the microtask queue.
        const entered = this.deps.fairShare ? this.deps.fairShare.enter(ex, m, ex.res.req?.headers) : PLACED;
        const placed = entered instanceof Promise ? await entered : entered;
        if (!placed.ok) return placed.refusal ? this.refuse(ex, placed.refusal) : this.ended(ex);
        // Filled by the chooser with numbers only; the request log says it in words when asked.
        const why: ChoiceRecord = { by: 'only-candidate', candidates: [] };
        const replica = this.deps.chooser.choose(m, candidates, ex.parsed, why);
        tried.add(replica.id);
        let backoffMs = 0;
        if (attempts > 0) {
          this.deps.metrics.retries.inc({ model: model.name });
          const waitFrom = performance.now();
          if (!unservable?.last) await this.backoff(ex, attempts);
          backoffMs = unservable?.last ? 0 : performance.now() - waitFrom;
          if (ex.clientGone) return 0;
          if (ex.timedOut) return this.timeout(ex);
          if (ex.revoked) return this.revokedAnswer(ex);
        }
        attempts++;
        const attemptFrom = performance.now();
        ex.tracing?.attemptStarted(m, replica);
        let outcome: Outcome;
        try {
          outcome = await this.forward(ex, m, replica);
        } finally {
          this.deps.fairShare?.leave(m);
        }
        // Made once, its optional fields set only when present: object spreads here cost every request a few copies.
        const traced: RequestAttempt = {
          model: m.name,
          replica: replica.id,
          outcome: outcome.kind === 'done' ? 'answered' : 'failed',
          durationMs: performance.now() - attemptFrom,
          startMs: attemptFrom - ex.startedAt,
          choice: why,
        };
        if (replica.nodes) traced.nodes = replica.nodes;
        if (placed.queuedMs > 0) traced.queuedMs = placed.queuedMs;
        if (backoffMs > 0) traced.backoffMs = backoffMs;
        if (spill && (m === model || m === spill.to))
          traced.rule = m === spill.to || !spill.to ? spill.decision.rule : `local (${spill.to.name} did not answer)`;
        if (outcome.kind === 'done') {
          ex.trace.attempts.push(traced);
          ex.tracing?.attemptEnded(traced);
          if (m !== model) this.deps.metrics.fallbacks.inc({ model: model.name, fallback: m.name });
          return outcome.status;
        }
        if (ex.clientGone) return 0;
        if (ex.timedOut) return this.timeout(ex);
        if (ex.revoked) return this.revokedAnswer(ex);
        const reason = outcome.kind === 'retry' ? outcome.reason : 'the engine refused stream_options';
        lastRefusal = outcome.kind === 'retry' ? (outcome.refusal ?? null) : null;
        unservable = tallyUnservable(unservable, outcome);
        traced.reason = reason;
        ex.trace.attempts.push(traced);
        ex.tracing?.attemptEnded(traced);
        lastFailure = `replica ${replica.id} of \`${m.name}\`: ${reason}`;
        this.deps.logger.warn(
          { model: m.name, replica: replica.id, reason, request: ex.id },
          'upstream attempt failed before the first byte',
        );
      }
      if (attempts >= this.deps.options.maxAttempts) break;
    }

    if (unservable?.all) return refuseUnservable(ex, model.name, unservable, attempts, this.deps.logger);
    if (attempts > 0 && lastRefusal) return this.remoteRefusal(ex, model, attempts, lastFailure, lastRefusal);
    if (attempts > 0) {
      const message = `model \`${model.name}\`: ${attempts} attempt${attempts === 1 ? '' : 's'} failed before any answer; the last: ${lastFailure}`;
      this.deps.logger.error({ model: model.name, attempts, request: ex.id }, message);
      this.fail(ex, 502, 'LLMGW_UPSTREAM', message);
      return 502;
    }
    const waitS = this.deps.remote?.retryAfterS(chain) ?? null;
    if (waitS !== null) return this.remoteRefusal(ex, model, 0, '', { status: 429, retryAfterS: waitS });
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

  /** The answer when remotes refused and nothing else answered: 429 with the soonest Retry-After, or 504 for a remote that hung. */
  private remoteRefusal(
    ex: Exchange,
    model: RoutedModel,
    attempts: number,
    lastFailure: string,
    refusal: { readonly status: 429 | 504; readonly retryAfterS?: number },
  ): number {
    const tried = attempts > 0 ? `; the last of ${attempts} attempt${attempts === 1 ? '' : 's'}: ${lastFailure}` : '';
    if (refusal.status === 504) {
      const message = `model \`${model.name}\`: no answer in time${tried}`;
      this.deps.logger.error({ model: model.name, attempts, request: ex.id }, message);
      this.fail(ex, 504, 'LLMGW_UPSTREAM', message);
      return 504;
    }
    const waitS = refusal.retryAfterS ?? 1;
    const message = `model \`${model.name}\`: every replica that could serve it is a remote asking to be left alone for ${waitS} s${tried}`;
    this.deps.logger.info({ code: 'LLMGW_REMOTE_BUSY', model: model.name, request: ex.id }, message);
    this.fail(ex, 429, 'LLMGW_REMOTE_BUSY', message, { 'retry-after': String(waitS) });
    return 429;
  }

  /** A queue's refusal, in the client's dialect. */
  private refuse(ex: Exchange, r: QueueRefusal): number {
    this.deps.logger.info({ code: r.code, model: ex.requested.name, key: ex.key?.prefix, request: ex.id }, r.message);
    this.fail(ex, r.status, r.code, r.message, r.headers);
    return r.status;
  }

  /** The answer for a request that ended while it waited: its client left, its time ran out or its key was revoked. */
  private ended(ex: Exchange): number {
    if (ex.clientGone) return 0;
    return ex.timedOut ? this.timeout(ex) : this.revokedAnswer(ex);
  }

  private backoff(ex: Exchange, attempt: number): Promise<void> {
    const ms = Math.min(
      RETRY_BACKOFF_CAP_MS,
      this.deps.options.retryBackoffMs * 2 ** (attempt - 1) * (0.5 + this.deps.options.random()),
    );
    return waitFor(ex, ms);
  }

  /** A refusal written on the raw response, in the shape of the API the client speaks. */
  fail(ex: Exchange, status: number, code: ErrorCode, message: string, headers: Record<string, string> = {}): void {
    ex.trace.failure = { code, message };
    writeErrorBody(ex.res, status, ex.dialect.errorBody(status, code, message, null), headers);
  }

  /** The 401 for a request whose key was revoked before its answer's first byte. */
  private revokedAnswer(ex: Exchange): number {
    this.fail(ex, 401, 'LLMGW_UNAUTHORIZED', revokedMessage(ex.key!));
    return 401;
  }

  private timeout(ex: Exchange): number {
    this.fail(
      ex,
      504,
      'LLMGW_UPSTREAM',
      `the request took longer than ${this.deps.options.timeouts.totalTimeoutMs} ms and was stopped`,
    );
    return 504;
  }

  // ---- one upstream attempt ---------------------------------------------

  /**
   * One attempt at `replica` of `model`, through the interceptors (the body,
   * the request id, in-flight, metrics). A request whose dialect the
   * replica's engine serves itself goes as the client wrote it (its turn's
   * native path and body), any other as the internal call.
   */
  private forward(ex: Exchange, model: RoutedModel, replica: RouterReplica): Promise<Outcome> {
    const headers: Record<string, string> = { ...(ex.parsed.stream ? STREAM_HEADERS : WHOLE_HEADERS) };
    if (ex.contentType !== 'application/json') headers['content-type'] = ex.contentType;
    const native = ex.turn.native(replica);
    if (native !== null) {
      return this.dispatch({ ex, model, replica, path: native.path, passThrough: true, body: native.body, headers });
    }
    return this.dispatch({ ex, model, replica, path: ex.path, passThrough: false, body: ex.raw, headers });
  }

  /** The end of the chain: the attempt sent to the replica's pool, relayed to the client as it comes. */
  private send(a: Attempt<Exchange>): Promise<Outcome> {
    const { ex, model, replica } = a;
    const { pool, basePath } = this.deps.pools.of(replica.endpoint, replica.nodes?.[0]);
    // The engine's secret replaces anything the client sent: a client's key never reaches an engine.
    attachSecret(a);
    return new Promise<Outcome>((resolve) => {
      const hooks: RelayHooks = {
        onFirstByte: () => {
          const ms = performance.now() - ex.startedAt;
          ex.trace.ttftMs = ms;
          ex.tracing?.firstByte(ms);
          this.deps.metrics.forModel(ex.requested.name).ttft.observe(ms / 1000);
        },
        onAnswered: (status, tail, events) => {
          ex.tracing?.answered(() => tail.text(), events);
          ex.tab.settleFromAnswer(model.name, status, tail, events, ex.parsed, ex.trace, replica.id);
        },
        brokenMessage: () =>
          ex.revoked
            ? revokedMessage(ex.key!)
            : ex.timedOut
              ? `the request took longer than ${this.deps.options.timeouts.totalTimeoutMs} ms and was stopped`
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
          path: basePath + (a.upstream?.path ?? a.path),
          method: 'POST',
          headers: a.headers,
          body: a.body,
          headersTimeout: replica.remote?.timeoutMs || this.deps.options.timeouts.headersTimeoutMs,
          bodyTimeout: this.deps.options.timeouts.idleBodyTimeoutMs,
        },
        this.deps.remote
          ? this.deps.remote.guard(upstreamRelay(a, ex.turn.relay(a, hooks, resolve)), replica, ex, resolve)
          : upstreamRelay(a, ex.turn.relay(a, hooks, resolve)),
      );
    });
  }
}
