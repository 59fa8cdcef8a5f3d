// What a client request passes before the router relays it, as Fastify
// preHandler hooks in the client listener's router scope: the key (every
// route), then for inference the body, the model and the key's permission
// for it, then the key's rate limit. Each hook sets a typed decoration the
// next one and the handler read (`request.apiKey`, `request.call`), and a
// refusal is the hook's reply: the chain stops there. Kept apart from
// router.ts so the handler is only the relay, and each check can be read,
// and reordered, on its own. The hooks run after the body is read (Fastify
// parses it between onRequest and preHandler), so a refusal for the body
// itself (415, 413) still comes before one for the key, as it always has.
//
// The hooks are callback-style and call `done` synchronously when nothing
// waits (a cached key): a request pays no extra turn of the event loop and
// no promise for them.
import { hashKey, type ApiKeyRecord, type KeyStore, type RoutedModel } from '../ports/index.js';
import type { Socket } from 'node:net';
import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import { isLlmgwError, type ErrorCode } from '../../errors/index.js';
import { nearestName } from '../../units/index.js';
import type { RouterOptions } from './options.js';
import type { Ledger, Tab } from './ledger.js';
import { checkModelLimits, parseFormRequest, parseRequest, type Endpoint, type ParsedRequest } from './validate.js';
import { modelServes } from '../ports/endpoints.js';
import { bearerToken, readForm } from '../../http/index.js';
import type { DialectTurn } from './dialect.js';
import { routeRequest, SplitDraws, type ShadowPlan } from '../traffic/index.js';

/** An inference request that passed every check: what the handler relays. */
export interface AdmittedCall {
  readonly endpoint: Endpoint;
  /**
   * The body's Content-Type, sent upstream with it: application/json, or a
   * form's multipart/form-data with its boundary (the bytes go on as sent).
   */
  readonly contentType: string;
  /** The body as the client sent it (a byte-order mark dropped), or as translated to the endpoint's shape (`anthropic`). */
  readonly raw: Buffer;
  readonly parsed: ParsedRequest;
  /** The model that serves the request: the one it names (by name or alias), or the target its split drew. */
  readonly model: RoutedModel;
  /** The split that chose `model`, for the request log ("split 90/10 → chat-v2"); null = the model named serves it. */
  readonly rule: string | null;
  /** The named model's shadow, when this request was drawn to be copied; null = not copied. */
  readonly shadow: ShadowPlan | null;
  /** Its account: the tokens reserved against the key's token limit (by the rate-limit hook), settled once when it ends. */
  readonly tab: Tab;
  /**
   * The max_tokens sent upstream for a request that set none, from a key with
   * a token limit: what was reserved for its completion, so the engine cannot
   * generate past it (to its context's end). Null = nothing added.
   */
  completionCap: number | null;
  /** Which of its key's per-minute buckets refused the call, set by the rate-limit hook as it refuses; absent = none did. */
  limitedBy?: 'requests' | 'tokens';
  /** What the dialect's translation made for each attempt (where it goes, how its answer comes back); null = OpenAI's own, untranslated. */
  readonly turn: DialectTurn | null;
}

/** A body translated to the endpoint's own (OpenAI's chat) shape, with the turn its attempts are sent and answered by. */
export interface Translated {
  readonly raw: Buffer;
  readonly turn: DialectTurn;
}

/** The client's body in another API's shape (its dialect's), turned into the endpoint's own (OpenAI's) before the checks. */
export type Translate = (raw: Buffer, request: FastifyRequest) => Translated;

declare module 'fastify' {
  interface FastifyRequest {
    /** The caller's API key, set by the router's key hook; null when keys are off (api_keys: off) and outside the router's routes. */
    apiKey: ApiKeyRecord | null;
    /** Set by the router's admission hooks on its inference routes; null before they ran and on every other route. */
    call: AdmittedCall | null;
  }
}

/** What the hooks need of the router: its collaborators, settings and its one way of refusing. */
export interface AdmissionDeps {
  readonly keys: KeyStore;
  readonly authRequired: boolean;
  readonly catalog: { resolve(nameOrAlias: string): RoutedModel | undefined; models(): readonly RoutedModel[] };
  /** Where a request's tokens are reserved and its usage recorded. */
  readonly ledger: Ledger;
  readonly options: RouterOptions;
  /** Logs the refusal (5xx as errors, 4xx at info), counts it unless `counted`, and sends it. */
  refuse(
    reply: FastifyReply,
    status: number,
    code: ErrorCode,
    message: string,
    param?: string | null,
    headers?: Record<string, string>,
    counted?: boolean,
  ): FastifyReply;
  count(model: string, status: number, key: ApiKeyRecord | null): void;
  /**
   * The key a request made in this process runs as (a batch line: see
   * batches/in-process.ts), or undefined for every request from a socket.
   */
  inProcess?(request: FastifyRequest): ApiKeyRecord | null | undefined;
}

/** A preHandler hook of the router's inference routes, callback-style (see the top of this file). */
export type Hook = (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => void;

/** Whether the key may use the model (by its name or any alias). */
export function allows(key: ApiKeyRecord, model: RoutedModel): boolean {
  if (key.allowedModels === null) return true;
  return key.allowedModels.includes(model.name) || model.aliases.some((a) => key.allowedModels!.includes(a));
}

/** Socket timeouts per connection: armed when a request starts, disarmed once its body is in (see registerRouter). */
export function armBodyTimeout(socket: Socket | null | undefined, ms: number): void {
  // An injected request (Fastify's inject, in tests) has a socket stand-in without timeouts.
  if (typeof socket?.setTimeout === 'function') socket.setTimeout(ms);
}

/**
 * The key hook, for every route of the router, run as soon as the headers
 * are in: `request.apiKey` is the caller's key, or the request is refused
 * with 401 saying why before any of its body is read. Checked after the
 * body, a connection trickling a large body without a key stayed busy (and
 * so safe from the listener's connection cap) for as long as the body's
 * idle timeout let it, and a few thousand of them shut honest clients out.
 */
export function keyHook(deps: AdmissionDeps): Hook {
  const admitKey = (key: ApiKeyRecord | null | undefined, reply: FastifyReply): ApiKeyRecord | undefined => {
    if (!key) {
      deps.refuse(
        reply,
        401,
        'LLMGW_UNAUTHORIZED',
        'the API key is not valid; ask the operator for one (`POST /api/v1/keys`)',
      );
      return undefined;
    }
    if (key.revokedAtMs !== null) {
      deps.refuse(
        reply,
        401,
        'LLMGW_UNAUTHORIZED',
        `the API key ${key.prefix}… was revoked; ask the operator for a new one`,
      );
      return undefined;
    }
    if (key.expiresAtMs !== null && key.expiresAtMs <= deps.options.now()) {
      deps.refuse(
        reply,
        401,
        'LLMGW_UNAUTHORIZED',
        `the API key ${key.prefix}… expired at ${new Date(key.expiresAtMs).toISOString()}; ask the operator for a new one`,
      );
      return undefined;
    }
    return key;
  };
  return (request, reply, done) => {
    if (!deps.authRequired) return done();
    const inProcess = deps.inProcess?.(request);
    if (inProcess !== undefined) {
      // Looked up again by the caller for each call, and checked here as any key is: a line of a revoked key is refused.
      const key = admitKey(inProcess, reply);
      if (key === undefined) return;
      request.apiKey = key;
      return done();
    }
    const presented = bearerToken(request.headers.authorization);
    if (presented === null) {
      deps.refuse(reply, 401, 'LLMGW_UNAUTHORIZED', 'no API key: send it as `Authorization: Bearer <key>`');
      return;
    }
    const found = deps.keys.lookupByHash(hashKey(presented));
    if (!(found instanceof Promise)) {
      const key = admitKey(found, reply);
      if (key === undefined) return;
      request.apiKey = key;
      return done();
    }
    found.then(
      (looked) => {
        const key = admitKey(looked, reply);
        if (key === undefined) return;
        request.apiKey = key;
        done();
      },
      (err: unknown) => done(err as Error),
    );
  };
}

/** The endpoint that takes a multipart form (the audio upload); every other one takes JSON. */
const FORM_ENDPOINTS: ReadonlySet<Endpoint> = new Set(['transcriptions']);

/** The API and path a refusal names: "rerank (POST /v1/rerank)". */
function endpointPhrase(endpoint: Endpoint, path: string): string {
  return `${endpoint} (POST ${path})`;
}

/**
 * The call hook, for one inference endpoint: the body parsed and checked,
 * the model resolved (404 with the nearest name this key may use), the key
 * allowed to use it (403), the model serving the endpoint (400 naming what
 * it does serve), the request within the model's limits; then
 * `request.call` holds it all.
 */
export function callHook(deps: AdmissionDeps, endpoint: Endpoint, translate: Translate | null = null): Hook {
  const { maxN, maxTokens } = deps.options;
  const form = FORM_ENDPOINTS.has(endpoint);
  // One sequence per model and route: requests split evenly even when another endpoint's requests are interleaved.
  const splitDraws = new SplitDraws(deps.options.random);
  /** A check's refusal as the client's error; anything else is a fault, for the listener's 500. */
  const refuseError = (reply: FastifyReply, err: unknown, done: HookHandlerDoneFunction): void => {
    if (!isLlmgwError(err)) return done(err as Error);
    const param = typeof err.context.param === 'string' ? err.context.param : null;
    deps.refuse(reply, err.status, err.code, err.message, param);
  };
  return (request, reply, done) => {
    const body = request.body;
    const contentType = request.headers['content-type'] ?? 'application/json';
    const isForm = /^multipart\/form-data\b/i.test(contentType);
    if (!Buffer.isBuffer(body) || isForm !== form) {
      deps.refuse(
        reply,
        415,
        'LLMGW_BAD_REQUEST',
        form
          ? 'send the upload as multipart/form-data, with the audio as a file part named "file" and a model field'
          : 'send the body as application/json',
      );
      return;
    }
    if (form) {
      // The body parser read the form as it arrived (src/gateway/core/upload.ts); read here only if it did not.
      const read = request.uploadForm;
      const reading =
        read === null ? readForm(body, contentType) : isLlmgwError(read) ? Promise.reject(read) : Promise.resolve(read);
      reading.then(
        (read) => {
          let parsed: ParsedRequest;
          try {
            parsed = parseFormRequest(endpoint, read, { maxN, maxTokens });
          } catch (err) {
            return refuseError(reply, err, done);
          }
          admit(request, reply, done, parsed, body, null, contentType);
        },
        (err: unknown) => refuseError(reply, err, done),
      );
      return;
    }
    let parsed: ParsedRequest;
    let raw: Buffer = body;
    let turn: DialectTurn | null = null;
    try {
      if (translate) {
        const t = translate(raw, request);
        raw = t.raw;
        turn = t.turn;
      }
      parsed = parseRequest(endpoint, raw, { maxN, maxTokens });
    } catch (err) {
      return refuseError(reply, err, done);
    }
    admit(request, reply, done, parsed, raw, turn, 'application/json');
  };

  /** The checks that need the model, once the body is read. */
  function admit(
    request: FastifyRequest,
    reply: FastifyReply,
    done: HookHandlerDoneFunction,
    parsed: ParsedRequest,
    raw: Buffer,
    turn: DialectTurn | null,
    contentType: string,
  ): void {
    const key = request.apiKey;
    const named = deps.catalog.resolve(parsed.model);
    if (!named) {
      const visible = deps.catalog.models().filter((m) => !key || allows(key, m));
      const near = nearestName(
        parsed.model,
        visible.flatMap((m) => [m.name, ...m.aliases]),
      );
      deps.refuse(
        reply,
        404,
        'LLMGW_MODEL_NOT_FOUND',
        `The model \`${parsed.model}\` does not exist.${near ? ` Did you mean \`${near}\`?` : ''} GET /v1/models lists the models this key may use.`,
        'model',
      );
      return;
    }
    if (key && !allows(key, named)) {
      deps.refuse(
        reply,
        403,
        'LLMGW_FORBIDDEN',
        `this API key (${key.prefix}…) may not use the model \`${named.name}\`; it may use ${key.allowedModels!.map((m) => `\`${m}\``).join(', ') || 'no model'}`,
        'model',
      );
      return;
    }
    // A split is the operator's choice behind the name the key may use: its targets need no permission of their own.
    const { model, rule, shadow } = routeRequest(
      named,
      endpoint,
      key?.id,
      parsed.body.user,
      deps.catalog,
      deps.options.random,
      splitDraws,
    );
    if (!modelServes(model, endpoint)) {
      deps.refuse(
        reply,
        400,
        'LLMGW_ENDPOINT_NOT_SERVED',
        `model \`${model.name}\` does not serve ${endpointPhrase(endpoint, request.routeOptions.url ?? request.url)}; it serves ${model.endpoints.join(', ')}. ` +
          "Send the request to one of those, or ask the operator to list the endpoint in the model's `endpoints` if its engine serves it",
        'model',
      );
      return;
    }
    try {
      checkModelLimits(endpoint, parsed, model.name, model.limits);
    } catch (err) {
      return refuseError(reply, err, done);
    }
    request.call = {
      endpoint,
      contentType,
      raw,
      parsed,
      model,
      rule,
      shadow,
      tab: deps.ledger.open(key, endpoint),
      completionCap: null,
      turn,
    };
    done();
  }
}
