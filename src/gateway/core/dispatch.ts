// One upstream attempt as a chain: small interceptors around the dispatch
// to the replica's pool, each doing one thing before the attempt and,
// where it must, one after it (the body the engine hears, the request id
// it is sent under, the replica's in-flight count, the router's overhead). The same
// shape as undici's interceptors, `(next) => (attempt) => …`, but over the
// router's own attempt (the exchange, the model and replica chosen), which
// undici's dispatch options cannot carry; composed once when the router
// is built, so an attempt pays one plain call per interceptor.
import type { Dispatcher } from 'undici';
import type { ReplicaUse, RoutedModel, RouterReplica } from '../ports/index.js';
import type { RouterMetrics } from './metrics.js';
import type { Outcome } from './relay.js';
import { FinishedSends } from './finished-sends.js';
import type { ParsedRequest } from './validate.js';
import { withFormField } from '../../http/index.js';
import type { ShadowPlan } from '../traffic/index.js';

/** What the interceptors read of the client request an attempt serves. */
export interface AttemptExchange {
  /** The listener's request id: upstream ids are made from it. */
  readonly id: string;
  readonly parsed: ParsedRequest;
  /** The body as the client sent it. */
  readonly raw: Buffer;
  /** Its Content-Type: a multipart form's names its boundary; absent = application/json. */
  readonly contentType?: string;
  /** The model the client asked for (a fallback may serve it). */
  readonly requested: RoutedModel;
  /** performance.now() at arrival. */
  readonly startedAt: number;
  /** An attempt was dispatched already (the router's overhead is observed once, at the first). */
  dispatched: boolean;
  /** The engine refused the stream_options the router added: sent as the client wrote it from then on (stream-options.ts). */
  usageRefused: boolean;
  /** max_tokens to add to a body that set none (a key's token limit holds the engine to what was reserved); absent or null = none. */
  readonly completionCap?: number | null;
  /** The copy of this request for its model's shadow, sent after its first attempt (mirror.ts); absent or null = none. */
  readonly shadow?: ShadowPlan | null;
}

/** One attempt on its way upstream; `E` is the router's whole exchange, which the dispatch at the end of the chain needs. */
export interface Attempt<E extends AttemptExchange = AttemptExchange> {
  readonly ex: E;
  /** The model this attempt asks for: the requested one or a fallback. */
  readonly model: RoutedModel;
  readonly replica: RouterReplica;
  /** The engine's path for this attempt (`/v1/chat/completions`, ...): the endpoint's, or another API's where the replica serves it natively. */
  readonly path: string;
  /**
   * The body is in another API's shape that the engine serves natively (a
   * Responses request passed through): only the model name may be
   * rewritten, since stream_options is a Chat Completions field.
   */
  readonly passThrough: boolean;
  /** The bytes sent upstream; the client's own (or their translation) until an interceptor rewrites them. */
  body: Buffer;
  /** The upstream request's headers; interceptors add theirs. */
  readonly headers: Record<string, string>;
  /** Set by an interceptor when the replica is a remote speaking another API than chat (src/gateway/remote/foreign.ts); absent = none. */
  upstream?: UpstreamApi;
}

/**
 * What an attempt at a remote that speaks another API (Anthropic's Messages,
 * OpenAI's Responses) is sent with instead: its path, the header its API
 * key goes in, and the relay that turns its answer back into chat before
 * the dialect's relay reads it. The body is already translated (Attempt.body).
 */
export interface UpstreamApi {
  /** The remote's path, in place of the attempt's (which the shadow copy keeps reading). */
  readonly path: string;
  /** The header the replica's secret goes in, as it is (`x-api-key`); absent = `authorization: Bearer`. */
  readonly secretHeader?: string;
  /** `inner` (the dialect's relay) behind the translation of the remote's answer into chat. */
  wrap(inner: Dispatcher.DispatchHandler): Dispatcher.DispatchHandler;
}

/** Puts the replica's secret where its API takes it, replacing anything the client sent. */
export function attachSecret(a: Attempt): void {
  const secret = a.replica.engineSecret;
  if (secret === undefined) return;
  if (a.upstream?.secretHeader) a.headers[a.upstream.secretHeader] = secret;
  else a.headers.authorization = `Bearer ${secret}`;
}

/** The relay an attempt's answer goes through: the dialect's own, behind the remote API's translation where there is one. */
export function upstreamRelay(a: Attempt, inner: Dispatcher.DispatchHandler): Dispatcher.DispatchHandler {
  return a.upstream ? a.upstream.wrap(inner) : inner;
}

export type Dispatch<E extends AttemptExchange = AttemptExchange> = (attempt: Attempt<E>) => Promise<Outcome>;
/** Reads and adds to the attempt, passes it on with `next`, and may act on the outcome; it never needs more of the exchange than AttemptExchange. */
export type Interceptor = <E extends AttemptExchange>(next: Dispatch<E>) => Dispatch<E>;

/** `base` wrapped in `interceptors`, the first listed outermost (it sees the attempt first and its end last). */
export function compose<E extends AttemptExchange>(
  base: Dispatch<E>,
  interceptors: readonly Interceptor[],
): Dispatch<E> {
  let dispatch = base;
  for (let i = interceptors.length - 1; i >= 0; i--) dispatch = interceptors[i]!(dispatch);
  return dispatch;
}

/**
 * The bytes sent upstream: the client's own, unless the engine must hear
 * another model name, a request from a key with a token limit set no
 * max_tokens (the engine is held to what was reserved), or a stream must
 * be asked for its usage (without it
 * a stream's tokens go uncounted and past the key's token limit; the
 * usage chunk is then kept from the client, who did not ask for it). Those
 * fields are appended to the client's bytes, not re-serialised: JSON
 * readers keep a repeated key's last value, and the rest (a 64-bit seed,
 * key order) reaches the engine exactly as sent. A multipart form (an
 * upload) has its model field's value replaced in place, likewise.
 */
export function rewriteBody(): Interceptor {
  return (next) => (a) => {
    const { ex, model, replica } = a;
    const requested = ex.parsed.model;
    // The names the engine answers to: a name the client used that is not among them (a fallback's, a split's) is renamed.
    const served = replica.servedNames ?? [model.name, ...model.aliases];
    const rename = !served.includes(requested);
    // A replica serving the model under another name (a remote endpoint's `remote.model`) hears that name.
    const upstreamName = served.length > 0 && !served.includes(model.name) ? served[0]! : model.name;
    const askUsage = !a.passThrough && withholdsUsage(ex);
    // Not on a natively served Responses body (passThrough), which names its cap max_output_tokens.
    const cap = !a.passThrough && ex.completionCap != null ? ex.completionCap : null;
    if (rename && ex.contentType !== undefined && ex.contentType !== 'application/json') {
      // A form (an audio upload): its model field's value is replaced, every other byte sent as it came.
      a.body = withFormField(ex.raw, ex.contentType, 'model', upstreamName) ?? ex.raw;
    } else if (rename || askUsage || cap !== null) {
      let tail = '';
      if (rename) tail += `,"model":${JSON.stringify(upstreamName)}`;
      if (askUsage)
        tail += `,"stream_options":${JSON.stringify({ ...(ex.parsed.body.stream_options as object | null | undefined), include_usage: true })}`;
      if (cap !== null) tail += `,"max_tokens":${cap}`;
      a.body = appendFields(a.body, tail);
    }
    return next(a);
  };
}

/**
 * The upstream request id: the client's request id, then this router's
 * attempt number and `tag`, unique per attempt (vLLM takes it as its own
 * request id and refuses one already running: a client reusing its id, a
 * retry), and across control planes and restarts by the tag.
 */
export function requestId(tag: string): Interceptor {
  /** Upstream attempts made through this chain: numbers every id. */
  let seq = 0;
  return (next) => (a) => {
    a.headers['x-request-id'] = `${a.ex.id}-${(++seq).toString(36)}${tag}`;
    return next(a);
  };
}

/** What replicaUse keeps of the router's attempts, per replica id. */
export interface ReplicaUseBook {
  /** In-flight count and last use of a replica, for the router's choice and the reconciler's scaling; absent = not kept. */
  readonly useOf?: (replicaId: string) => ReplicaUse;
  /** Start times of the attempts in flight, oldest first; a replica's list is dropped once empty. */
  readonly sends: Map<string, number[]>;
  /** The attempts per replica that ended in the last `keepFinishedMs` (at least); a replica's entry is made on its first end. */
  readonly finished: Map<string, FinishedSends>;
  /** 0 = ended attempts are not kept. */
  readonly keepFinishedMs: number;
  readonly now: () => number;
}

/**
 * What each attempt leaves in the router's view of its replica, while it
 * runs and after: its in-flight count and last use, its start time while
 * in flight, and its start and end for `keepFinishedMs` after it ends
 * (least-load counts the sends an engine's last sample cannot have seen,
 * and takes off the ones it saw that have finished since: FinishedSends). One
 * interceptor with one callback on the outcome: it runs on every attempt,
 * and a promise per bookkeeping step (a `.finally` each) cost more than
 * the bookkeeping itself.
 */
export function replicaUse(book: ReplicaUseBook): Interceptor {
  const { useOf, sends, finished, keepFinishedMs, now } = book;
  return (next) => (a) => {
    const id = a.replica.id;
    const use = useOf?.(id);
    const started = now();
    if (use) {
      use.inFlight++;
      use.lastUsedAtMs = started;
    }
    let list = sends.get(id);
    if (!list) sends.set(id, (list = []));
    list.push(started);
    const end = (): void => {
      const ended = now();
      if (use) {
        use.inFlight--;
        use.lastUsedAtMs = ended;
      }
      const mine = sends.get(id);
      if (mine) {
        const i = mine.indexOf(started);
        if (i >= 0) mine.splice(i, 1);
        if (mine.length === 0) sends.delete(id);
      }
      if (keepFinishedMs <= 0) return;
      let done = finished.get(id);
      if (!done) finished.set(id, (done = new FinishedSends(keepFinishedMs)));
      done.add(started, ended);
    };
    return next(a).then(
      (o) => {
        end();
        return o;
      },
      (err: unknown) => {
        end();
        throw err;
      },
    );
  };
}

/**
 * The router's own overhead, observed at a request's first attempt. (The
 * replica in-flight gauge is read from inFlight's counts at each scrape.)
 */
export function attemptMetrics(metrics: RouterMetrics): Interceptor {
  return (next) => (a) => {
    if (!a.ex.dispatched) {
      a.ex.dispatched = true;
      metrics.overhead.observe((performance.now() - a.ex.startedAt) / 1000);
    }
    return next(a);
  };
}

/** Whether the router asks this request's stream for usage on the client's behalf (not after the engine refused the field). */
export function withholdsUsage(ex: AttemptExchange): boolean {
  return ex.parsed.usageWithheld && !ex.usageRefused;
}

/** A JSON object's bytes with `,"k":v…` added before its closing brace (the body was parsed as an object, so it has one). */
function appendFields(raw: Buffer, fields: string): Buffer {
  const end = lastNonSpace(raw, raw.length - 1);
  // An empty object takes no leading comma.
  const before = lastNonSpace(raw, end - 1);
  const text = raw[before] === 0x7b ? fields.slice(1) : fields;
  return Buffer.concat([raw.subarray(0, end), Buffer.from(text, 'utf8'), raw.subarray(end)]);
}

/** The index of the last byte at or before `from` that is not JSON whitespace. */
function lastNonSpace(raw: Buffer, from: number): number {
  let i = from;
  while (i > 0 && (raw[i] === 0x20 || raw[i] === 0x0a || raw[i] === 0x0d || raw[i] === 0x09)) i--;
  return i;
}
