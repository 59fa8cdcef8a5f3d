// What the control plane's three listeners share: a Fastify instance that
// answers every failure in one shape (the admin and agent listeners'
// `{"error": "..."}`; the client listener passes OpenAI's shape), a 405 that
// names the verbs a path does accept, a body limit that holds for chunked
// bodies too, bounded time for a TLS handshake, headers and body, a cap on
// connections, and logging that keeps 4xx at info and 5xx at error without
// ever putting internals in a 5xx body. Outside src/control because the
// router's client listener uses it as much as the admin and agent listeners
// do: the router and the control plane both import it, it imports neither.
import Fastify, {
  LogController,
  type FastifyBaseLogger,
  type FastifyHttpOptions,
  type FastifyError,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
} from 'fastify';
import { randomBytes } from 'node:crypto';
import { type IncomingMessage, type Server, STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import FindMyWay from 'find-my-way';
import type { Logger } from 'pino';
import { isLlmgwError, LlmgwError, type ErrorCode } from '../errors/index.js';
import type { ServerTls } from '../tls/index.js';
import { capConnections } from './connections.js';
import { RequestInvalidError, zodValidatorCompiler } from './schema.js';

export { actorOf, actorText, auditActor, setIdentity, type AuditActor } from './actor.js';
export { bearerToken, sameSecret } from './bearer.js';
export {
  allows,
  isPermission,
  isRole,
  mayActOnTeam,
  needs,
  PERMISSIONS,
  PERSON_TOKEN_PREFIX,
  principalOf,
  ROLE_PERMISSIONS,
  ROLES,
  rolesHolding,
  setPrincipal,
  teamsInScope,
  type Permission,
  type Principal,
  type Role,
} from './permissions.js';
export {
  capConnections,
  capWithinOpenFiles,
  connectionCapsFor,
  fitConnectionCaps,
  openFileLimit,
  registerConnectionRefusals,
  reservedFiles,
  throttledRefusals,
  type ConnectionCap,
  type ListenerName,
} from './connections.js';
export {
  listOrderQuery,
  RequestInvalidError,
  requestProblems,
  wholeNumberQuery,
  zodValidatorCompiler,
  type ZodTypeProvider,
} from './schema.js';
export { FORM_LIMITS, FormReader, formBoundary, readForm, withFormField, type ReadForm } from './multipart.js';
export {
  checkHost,
  crossSiteProblem,
  hasBody,
  hostAllowlist,
  hostNameOf,
  isJsonContentType,
  originMatchesHost,
  type HostAllowlist,
  type HostAllowlistInput,
} from './guards.js';

export interface ErrorBody {
  status: number;
  code: ErrorCode;
  message: string;
  /** The request field the error is about, for a shape that names it (OpenAI's `param`); absent = none. */
  param?: string;
}

/** Turns an error into the listener's body. The admin form is `{"error": message}`. */
export type ErrorShaper = (error: ErrorBody) => unknown;

/**
 * A route's `config` that names its own error shape, for the errors Fastify
 * answers on it (413, 415, a body that is not JSON): an API with its own
 * error body (the gateway's Messages API) declares it on its routes. Absent
 * = the listener's (`shapeError`).
 */
export interface ShapedRouteConfig {
  readonly shapeError?: ErrorShaper;
}

export const adminErrorShape: ErrorShaper = (e) => ({ error: e.message });

export interface JsonAppOptions {
  logger: Logger;
  /** Largest request body in bytes; beyond it the answer is 413 before the body is parsed. */
  bodyLimitBytes: number;
  shapeError?: ErrorShaper;
  /** Seconds a client may take to send its headers; slow-loris connections are closed. */
  headersTimeoutMs?: number;
  /**
   * Most a request may take to arrive whole once its headers are in, ms: a
   * body that stalls is cut with 408 within this (plus the header timeout)
   * and a check interval. Only the request counts: an answer the server is
   * still preparing (a long-polled heartbeat) is no stall. Absent or 0 = no
   * limit (the client listener, whose router arms its own idle timeout: a
   * socket timeout while a body is arriving is answered 408 all the same).
   */
  bodyTimeoutMs?: number;
  /** How long an idle keep-alive connection is kept open, ms. Absent = Fastify's 72 s. */
  keepAliveTimeoutMs?: number;
  /** Close every connection on close(), not only idle ones: for long-polled listeners, whose sockets are never idle for long. */
  forceCloseConnections?: boolean;
  /**
   * False: requests log through the listener's logger itself, without the
   * child logger (bound to a request id) Fastify makes for each request. For
   * the client listener, whose hot path logs nothing per request: a pino child
   * per request is allocation the garbage collector pays for under load.
   * Absent = true.
   */
  requestLoggers?: boolean;
  /**
   * True: every request gets an id, the client's own `x-request-id` when it
   * sends a sane one (up to 128 of [A-Za-z0-9._:-]) or a new `req_…`; it is
   * `request.id`, and every answer carries it back as `x-request-id`, so a
   * user's failure can be matched to a log line. Absent = Fastify's counter,
   * not sent back.
   */
  requestIds?: boolean;
  /** Certificate and key to serve TLS with; absent or null = plain HTTP. */
  https?: ServerTls | null;
  /**
   * Most connections the listener holds at once; at the cap the oldest one
   * with no request in flight is closed to make room (src/http/connections.ts).
   * Absent or 0 = no cap.
   */
  maxConnections?: number;
  /** Called for each connection closed because the listener was at maxConnections (a metric counts them). */
  onConnectionRefused?: () => void;
}

const CLIENT_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** The client's request id when it is one we can log and send on as it is; otherwise a new one. */
function requestIdFor(raw: { headers: Record<string, string | string[] | undefined> }): string {
  const given = raw.headers['x-request-id'];
  return typeof given === 'string' && CLIENT_REQUEST_ID.test(given) ? given : `req_${REQUEST_ID_BYTES.next()}`;
}

/**
 * 16 random bytes as hex for each request id, from one draw per 256 ids:
 * every request of the client listener gets one, and a UUID per request
 * (made, then stripped of its dashes) cost three times as much.
 */
class RandomHex {
  private pool = Buffer.alloc(0);
  private at = 0;

  constructor(private readonly bytes: number) {}

  next(): string {
    if (this.at + this.bytes > this.pool.length) {
      this.pool = randomBytes(this.bytes * 256);
      this.at = 0;
    }
    const hex = this.pool.toString('hex', this.at, this.at + this.bytes);
    this.at += this.bytes;
    return hex;
  }
}

const REQUEST_ID_BYTES = new RandomHex(16);

const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;

/**
 * Reads application/json bodies on `scope`, which has no parser for them:
 * an empty body is "nothing to say" (POST /weights/collect), not bad JSON,
 * and anything else goes through Fastify's own parser, which refuses
 * __proto__ tricks. `dropByteOrderMark`: a leading byte-order mark
 * (PowerShell 5 writes one) is dropped rather than refused.
 */
export function addJsonParser(scope: FastifyInstance, options: { dropByteOrderMark?: boolean } = {}): void {
  const strictJson = scope.getDefaultJsonParser('error', 'error');
  scope.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    const text = options.dropByteOrderMark ? (body as string).replace(/^\uFEFF/, '') : (body as string);
    if (text.trim() === '') return done(null, undefined);
    void strictJson(request, text, done);
  });
}

/**
 * Node server options that bound a client's time, as every listener llmgw
 * runs bounds it: headers within `headersTimeoutMs`; the whole request within
 * `bodyTimeoutMs` more (Node times requestTimeout from the request's start
 * and stops once the request is in, so a long answer is not cut; 0 = no
 * limit); checked often enough for a short limit to hold (Node checks every
 * 30 s by default).
 */
export function boundedTimeouts(
  headersTimeoutMs: number,
  bodyTimeoutMs: number,
): { headersTimeout: number; requestTimeout: number; connectionsCheckingInterval: number } {
  return {
    headersTimeout: headersTimeoutMs,
    requestTimeout: bodyTimeoutMs ? headersTimeoutMs + bodyTimeoutMs : 0,
    connectionsCheckingInterval: Math.min(1000, Math.max(100, Math.floor(headersTimeoutMs / 4))),
  };
}

export function createJsonApp(options: JsonAppOptions): FastifyInstance {
  const shape = options.shapeError ?? adminErrorShape;
  const headersTimeoutMs = options.headersTimeoutMs ?? 30_000;
  const timeouts = boundedTimeouts(headersTimeoutMs, options.bodyTimeoutMs ?? 0);
  const app = Fastify(
    withTls(options.https, headersTimeoutMs, {
      loggerInstance: options.logger as unknown as FastifyBaseLogger,
      bodyLimit: options.bodyLimitBytes,
      // Per-request lines are the router's own business (metrics, usage); Fastify's would double them.
      logController: new LogController({ disableRequestLogging: true }),
      return503OnClosing: true,
      forceCloseConnections: options.forceCloseConnections ?? 'idle',
      // Clients get to send their headers in bounded time, like any server exposed to a network (boundedTimeouts).
      // Fastify sets these two on the server itself, over anything in `http`.
      ...(options.keepAliveTimeoutMs ? { keepAliveTimeout: options.keepAliveTimeoutMs } : {}),
      requestTimeout: timeouts.requestTimeout,
      http: { ...timeouts, requestTimeout: 0 } as never,
      routerOptions: { ignoreTrailingSlash: true },
      ...(options.requestLoggers === false ? { childLoggerFactory: (logger: FastifyBaseLogger) => logger } : {}),
      ...(options.requestIds ? { genReqId: requestIdFor } : {}),
      // What Node's HTTP parser refuses never reaches a route: it still gets an answer in the listener's shape.
      // A socket with no request to answer is closed instead (see answerable).
      clientErrorHandler: (err: NodeJS.ErrnoException, socket: Socket) => {
        if (!answerable(err, socket)) {
          socket.destroy();
          return;
        }
        const { status, message } = clientErrorOf(err.code);
        const body = JSON.stringify(
          shape({ status, code: status === 408 ? 'LLMGW_REQUEST_TIMEOUT' : 'LLMGW_BAD_REQUEST', message }),
        );
        socket.end(
          `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
        );
      },
    }),
  );

  // Route schemas are zod, on every listener (src/http/schema.ts); no route declares JSON Schema.
  app.setValidatorCompiler(zodValidatorCompiler);

  const connections = capConnections(app.server, {
    maxConnections: options.maxConnections ?? 0,
    ...(options.onConnectionRefused ? { onRefused: options.onConnectionRefused } : {}),
  });
  // Once the listener closes, the answer a connection is still writing is its last. Node closes only the connections
  // idle when close() is called: one that finishes its answer later (a stream running at shutdown) stayed open for
  // the whole keep-alive timeout, and held close() (and the process's exit) that long. Node reads the timeout as each
  // answer ends. Nor does Node count a connection that never sent a request as idle, and it stops the header timeout
  // that would have ended it: one silent client (a browser's spare connection, a probe, an attacker) held close()
  // for good. Those are closed here (capConnections' closing()).
  app.addHook('preClose', (done) => {
    app.server.keepAliveTimeout = 1;
    connections.closing();
    done();
  });
  // A socket timeout while a request's body is still arriving (the router arms one per request on the client
  // listener): answered with 408, where Node alone would close the connection without a word.
  app.server.on('request', (request: IncomingMessage) => request.on('timeout', answerStalledBody));

  addJsonParser(app);

  if (options.requestIds) {
    // On the raw response: answers the router writes itself (relayed, or written after hijacking) carry it too.
    app.addHook('onRequest', (request, reply, done) => {
      reply.raw.setHeader('x-request-id', request.id);
      done();
    });
  }

  // A shadow router that knows each path's verbs, so a wrong verb is 405 with
  // Allow rather than a 404 that suggests the path does not exist.
  const shadow = FindMyWay({ ignoreTrailingSlash: true });
  app.addHook('onRoute', (route) => {
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    for (const m of methods) {
      if (m === 'HEAD' || m === 'OPTIONS') continue;
      try {
        shadow.on(m as 'GET', route.url, () => {});
      } catch {
        // Already known: Fastify registers HEAD beside GET; nothing to add.
      }
    }
  });

  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split('?')[0] ?? '/';
    const allowed = METHODS.filter((m) => shadow.find(m, path) !== null);
    if (allowed.length) {
      void reply
        .header('allow', allowed.join(', '))
        .code(405)
        .send(
          shape({
            status: 405,
            code: 'LLMGW_METHOD_NOT_ALLOWED',
            message: `${request.method} is not allowed on ${path}; use ${allowed.join(' or ')}`,
          }),
        );
      return;
    }
    void reply
      .code(404)
      .send(shape({ status: 404, code: 'LLMGW_NOT_FOUND', message: `no route ${request.method} ${path}` }));
  });

  app.setErrorHandler((error: FastifyError | LlmgwError, request: FastifyRequest, reply: FastifyReply) => {
    const body = toErrorBody(error, request);
    if (body.status >= 500) request.log.error({ err: error, url: request.url.split('?')[0] }, 'request failed');
    else request.log.info({ code: body.code, status: body.status, url: request.url.split('?')[0] }, body.message);
    if (body.status === 413) discardRestOfBody(request, reply);
    const routeShape = (request.routeOptions.config as ShapedRouteConfig | undefined)?.shapeError;
    void reply.code(body.status).send((routeShape ?? shape)(body));
  });

  return app;
}

/**
 * Fastify gives Node's server only `https` when it is set, so the limits
 * under `http` move there beside the certificate. The plain-HTTP type is
 * kept so routes need not care; the server is an https.Server then.
 *
 * The TLS handshake gets the headers' allowance: Node's own is 120 s, and
 * its timer is not moved by handshake bytes, so it bounds a handshake
 * dribbled a byte at a time as well as one never begun. Node's headers
 * timeout starts only once the handshake is done.
 */
function withTls(
  tls: ServerTls | null | undefined,
  handshakeTimeoutMs: number,
  fastifyOptions: FastifyHttpOptions<Server>,
): FastifyHttpOptions<Server> {
  if (!tls) return fastifyOptions;
  const { http, ...rest } = fastifyOptions;
  return {
    ...rest,
    https: { ...http, cert: tls.cert, key: tls.key, handshakeTimeout: handshakeTimeoutMs },
  } as FastifyHttpOptions<Server>;
}

/**
 * Whether a client error has a request to answer. Only what Node's HTTP
 * parser refused (HPE_*: bytes arrived, and on TLS only after the handshake)
 * and a timeout once a request's headers are in (a stalled body: Node has
 * made its response, `_httpMessage`) do. Anything else is closed without a
 * word: a reset or unwritable socket; a TLS handshake that failed or never
 * finished, where a written answer waits for a handshake that never comes
 * and holds the connection open for good; a timeout before any request
 * arrived, which a client that sent nothing, or half a request line, has
 * no use for.
 */
function answerable(err: NodeJS.ErrnoException, socket: Socket): boolean {
  if (err.code === 'ECONNRESET' || !socket.writable) return false;
  if (err.code?.startsWith('HPE_')) return true;
  if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT')
    return (socket as Socket & { _httpMessage?: unknown })._httpMessage != null;
  return false;
}

const STALLED_BODY_MESSAGE = 'the request (its headers or its body) took too long to arrive; the connection is closed';

/**
 * A request's socket timed out while its body was still arriving. When
 * Fastify is reading that body (its parser listens for the stream's errors),
 * the read fails with LLMGW_REQUEST_TIMEOUT: Fastify then answers 408 through
 * the scope's error handler, in the listener's shape, and closes the
 * connection. With no reader there is nobody to answer for: the socket is
 * closed, as Node would have.
 */
function answerStalledBody(this: IncomingMessage, socket: Socket): void {
  if (this.listenerCount('error') > 0) {
    this.emit('error', new LlmgwError('LLMGW_REQUEST_TIMEOUT', STALLED_BODY_MESSAGE));
    // Handling 'timeout' tells Node not to close the socket itself, and the
    // listener may not be the body's reader (a hook still running when the
    // timer fired answers nothing): the connection must not outlive the stall
    // for good, so it is closed after a grace whether or not a 408 went out.
    const grace = setTimeout(() => socket.destroy(), STALLED_ANSWER_GRACE_MS);
    grace.unref();
    socket.once('close', () => clearTimeout(grace));
    // A 408 that went out ends the grace: the next request on a kept connection is not cut by it.
    const response = (socket as Socket & { _httpMessage?: { once(event: 'finish', f: () => void): void } | null })
      ._httpMessage;
    response?.once('finish', () => clearTimeout(grace));
    return;
  }
  socket.destroy();
}

/** How long a 408 for a stalled body has to leave before its connection is closed anyway. */
const STALLED_ANSWER_GRACE_MS = 1000;

/** The status and sentence for a request Node's HTTP parser refused, by its error code. */
function clientErrorOf(code: string | undefined): { status: number; message: string } {
  switch (code) {
    case 'HPE_HEADER_OVERFLOW':
      return { status: 431, message: 'the request headers are larger than 16 KiB; an API key or token is far shorter' };
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return { status: 408, message: STALLED_BODY_MESSAGE };
    case 'HPE_INVALID_HEADER_TOKEN':
      return {
        status: 400,
        message:
          'a request header holds a character HTTP does not allow (such as NUL or a line break); send it without',
      };
    default:
      return { status: 400, message: `the request is not valid HTTP/1.1${code ? ` (${code})` : ''}` };
  }
}

/** What a refused body may still send before its connection is cut: enough for any honest client to read its 413. */
const DISCARD_CAP_BYTES = 64 * 2 ** 20;
const DISCARD_CAP_MS = 10_000;

/**
 * A client still sending a body it was refused for cannot read the 413 if the
 * connection is cut under it: HTTP clients (the openai client's fetch among
 * them) report a reset instead. So, like nginx's lingering close, the rest of
 * the body is read and thrown away, and the connection cut only if it goes on
 * past a bound in bytes or time.
 */
function discardRestOfBody(request: FastifyRequest, reply: FastifyReply): void {
  const raw = request.raw;
  if (raw.complete) return;
  reply.removeHeader('connection');
  let discarded = 0;
  const cut = () => {
    clearTimeout(timer);
    raw.socket?.destroy();
  };
  const timer = setTimeout(cut, DISCARD_CAP_MS);
  timer.unref();
  raw.on('data', (chunk: Buffer) => {
    discarded += chunk.length;
    if (discarded > DISCARD_CAP_BYTES) return cut();
    // One read a turn of the event loop, as an upload is read (src/gateway/core/upload.ts): bytes thrown away must not hold heartbeats.
    raw.pause();
    setImmediate(() => raw.resume());
  });
  raw.once('end', () => clearTimeout(timer));
  raw.once('close', () => clearTimeout(timer));
  raw.resume();
}

/** Per-route wording for a body that is not JSON, e.g. "the model definition is not valid JSON". */
export interface RouteJsonWording {
  invalidJson?: string;
  /** What a body that does not fit the route's schema is called, before its problems: "join request". Absent = the problems alone. */
  invalidBody?: string;
}

function toErrorBody(error: FastifyError | LlmgwError, request: FastifyRequest): ErrorBody {
  if (error instanceof RequestInvalidError) {
    // A route's wording for its body goes in front of a body's problems; a query's or a path's speak for themselves.
    const what =
      error.part === 'body' ? (request.routeOptions.config as RouteJsonWording | undefined)?.invalidBody : undefined;
    const message = what ? `${what}: ${error.message}` : error.message;
    return { status: 400, code: error.code, message, ...(error.param === null ? {} : { param: error.param }) };
  }
  if (isLlmgwError(error)) {
    // 5xx messages from our own code are still kept out of the body: they may name internals.
    if (error.status >= 500 && error.code !== 'LLMGW_NO_STORE' && error.code !== 'LLMGW_STORE_UNAVAILABLE') {
      return {
        status: error.status,
        code: error.code,
        message: 'internal error; the control plane log has the details',
      };
    }
    return { status: error.status, code: error.code, message: error.message };
  }
  const fe = error as FastifyError;
  if (fe.code === 'FST_ERR_CTP_BODY_TOO_LARGE' || fe.statusCode === 413) {
    const limit = request.routeOptions.bodyLimit ?? 0;
    return {
      status: 413,
      code: 'LLMGW_BODY_TOO_LARGE',
      message: `the request body is larger than ${limit} bytes; send less`,
    };
  }
  if (
    fe.code === 'FST_ERR_CTP_INVALID_JSON_BODY' ||
    fe.code === 'FST_ERR_CTP_EMPTY_JSON_BODY' ||
    error instanceof SyntaxError
  ) {
    const wording =
      (request.routeOptions.config as RouteJsonWording | undefined)?.invalidJson ??
      'the request body is not valid JSON';
    return { status: 400, code: 'LLMGW_INVALID_JSON', message: `${wording}: ${error.message}` };
  }
  if (fe.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') {
    return { status: 415 as number, code: 'LLMGW_BAD_REQUEST', message: 'send the body as application/json' };
  }
  if (fe.validation) return { status: 400, code: 'LLMGW_BAD_REQUEST', message: fe.message };
  if (typeof fe.statusCode === 'number' && fe.statusCode >= 400 && fe.statusCode < 500) {
    return { status: fe.statusCode, code: 'LLMGW_BAD_REQUEST', message: fe.message };
  }
  return { status: 500, code: 'LLMGW_INTERNAL', message: 'internal error; the control plane log has the details' };
}
