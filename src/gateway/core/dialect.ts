// What an API dialect is to the gateway: an API its clients speak (OpenAI's,
// Anthropic's Messages, OpenAI's Responses) over the one internal call, a
// Chat Completions (or other OpenAI endpoint) request to an engine. A dialect
// mounts its routes, translates its body to the internal call at admission
// (its routes' call hooks), relays each attempt's answer back in its own
// shape (its turn's relay), and writes every refusal on its routes in its own
// error shape: the admission hooks', Fastify's own (413, 415) and the attempt
// loop's. The gateway carries a request's dialect and turn on its exchange and
// never branches on which one it is. Adding one is a folder under
// src/gateway/dialects and a line in its index.ts. The interface is here,
// in the core, because the core carries it; the dialects sit above the core.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Dispatcher } from 'undici';
import type { ErrorCode } from '../../errors/index.js';
import type { ErrorShaper } from '../../http/index.js';
import type { AdmissionDeps } from './admission.js';
import type { Attempt, AttemptExchange } from './dispatch.js';
import type { RouterOptions } from './options.js';
import type { ApiKeyRecord, ResponseStore, RoutedModel, RouterReplica, RoutedModels } from '../ports/index.js';
import type { Outcome, RelayHooks, RelayTarget } from './relay.js';
import type { Upstream } from './upstreams.js';
import type { ParsedRequest } from './validate.js';
import type { ParamRenames } from './param-names.js';
import type { Logger } from 'pino';

export interface Dialect {
  /** For log lines and tests: 'openai', 'anthropic', 'responses'. */
  readonly name: string;
  /** A refusal's body in this dialect's shape (`param`: the field at fault; null = none). */
  errorBody(status: number, code: ErrorCode, message: string, param: string | null): string;
  /**
   * Chat's field names as this dialect's clients write them, for a refusal
   * that names a field of the internal call (a foreign remote's: unservable.ts);
   * absent = its clients write Chat's names.
   */
  readonly params?: ParamRenames;
  /** The same for the errors Fastify answers on this dialect's routes (413, 415): declared in each route's config. */
  readonly errorShape: ErrorShaper;
  /**
   * Run as soon as a request's headers are in, before the key hook, on this
   * dialect's routes: headers its clients read from every answer, another
   * header its key may come in. Absent = nothing.
   */
  onRequest?(request: FastifyRequest, reply: FastifyReply): void;
  /** Mounts its routes on the gateway's scope; each names this dialect in its config (routeConfig). */
  routes(scope: FastifyInstance, gateway: DialectHost): void;
}

/** A route's config on the gateway's listener: its dialect, and its error shape for Fastify's own refusals. */
export interface DialectRouteConfig {
  readonly dialect: Dialect;
  readonly shapeError: ErrorShaper;
  /** The body parser reads this route's multipart form as it arrives (upload.ts). */
  readonly multipartForm?: boolean;
}

/** The config for a route of `dialect`. */
export function routeConfig(dialect: Dialect, extra: { multipartForm?: boolean } = {}): DialectRouteConfig {
  return { dialect, shapeError: dialect.errorShape, ...extra };
}

/** What one exchange offers its turn's relay: the relay's target, the attempt chain's view of the request, its key. */
export interface TurnExchange extends AttemptExchange, RelayTarget {
  readonly key: ApiKeyRecord | null;
}

/**
 * What one request carries from its dialect's translation to each attempt:
 * where an attempt at a given replica goes, and the relay that writes its
 * answer in the dialect. OpenAI's is one shared object; a translated
 * dialect's holds what the answer's translation needs (names, ids).
 */
export interface DialectTurn {
  /**
   * The path and body for a replica whose engine serves this dialect
   * itself, passed through with only the model renamed; null = the
   * endpoint's path and the (translated) body, as for every engine.
   */
  native(replica: RouterReplica): { readonly path: string; readonly body: Buffer } | null;
  /** The relay for one attempt (`a.passThrough`: sent natively). */
  relay(a: Attempt<TurnExchange>, hooks: RelayHooks, resolve: (o: Outcome) => void): Dispatcher.DispatchHandler;
}

/** What a dialect's routes use of the gateway. */
export interface DialectHost {
  readonly options: RouterOptions;
  readonly catalog: RoutedModels;
  readonly logger: Logger;
  /** Where Responses answers are kept; null = none is kept. */
  readonly responseStore: ResponseStore | null;
  /** The admission hooks' collaborators (admission.ts): callHook and rateLimitHook (limits-hook.ts) are built from them. */
  admission(): AdmissionDeps;
  /** Relays an admitted inference request (request.call) to the end of its answer. */
  infer(request: FastifyRequest, reply: FastifyReply): Promise<unknown>;
  /** Logs, counts (unless `counted`) and sends a refusal in the route's dialect: the admission hooks' own. */
  readonly refuse: AdmissionDeps['refuse'];
  readonly count: AdmissionDeps['count'];
  /** A ready replica for a request that asks a replica something (count_tokens), and its pool; null = none is ready. */
  replicaFor(model: RoutedModel, parsed: ParsedRequest): { replica: RouterReplica; upstream: Upstream } | null;
  /** The keep-alive pool to a replica, for a dialect that asks the replica of an attempt a question of its own. */
  upstreamOf(replica: RouterReplica): Upstream;
  /** Words for a model's replicas, for a refusal: "1 starting, 0 ready". */
  describe(model: string): string;
  /** Seconds since epoch reported as every model's `created`. */
  readonly createdS: number;
}
