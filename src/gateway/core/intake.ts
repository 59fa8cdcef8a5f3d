// How a request's body is taken in on the gateway's routes, before any
// check of its own: JSON kept as its bytes (so it is forwarded exactly as
// sent), an upload's form read as it arrives, any other type refused (415);
// a body with no type read as JSON when keys are on, and refused when they
// are off (a web page could then drive inference from a user's browser); a
// compressed body refused; a stalled body cut after idleBodyTimeoutMs. The
// first hook also notes the route's dialect (request.dialect), in whose
// shape every refusal on the route is written, and runs the dialect's own
// onRequest. Apart from the router's wiring because none of it is about
// routing, and all of it runs before the key is looked at.
import type { FastifyInstance, FastifyReply } from 'fastify';
import { LlmgwError, type ErrorCode } from '../../errors/index.js';
import { armBodyTimeout } from './admission.js';
import type { Dialect, DialectRouteConfig } from './dialect.js';
import { replyErrorBody } from './errors.js';
import { readMultipartBody } from './upload.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The API dialect of the route this request is for (its refusals' shape), set by the first hook; null before it. */
    dialect: Dialect | null;
  }
}

export interface IntakeOptions {
  /** False: no key is asked for, and a body must declare itself JSON (or a form must carry an Authorization header). */
  readonly authRequired: boolean;
  readonly bodyLimitBytes: number;
  /** Longest silence while a body arrives (0 = none). */
  readonly idleBodyTimeoutMs: number;
  /** The dialect of a route that names none, in whose shape its refusals are written (OpenAI's: the engines' own). */
  readonly defaultDialect: Dialect;
}

/** Sets the body parsers and the first onRequest hook on the gateway's scope. */
export function registerIntake(scope: FastifyInstance, options: IntakeOptions): void {
  const { authRequired, bodyLimitBytes: bodyLimit, idleBodyTimeoutMs, defaultDialect } = options;
  scope.removeContentTypeParser(['application/json', 'text/plain']);
  scope.addContentTypeParser('application/json', { parseAs: 'buffer', bodyLimit }, (_request, body: Buffer, done) => {
    // A byte-order mark (PowerShell 5 writes one before UTF-8) is not JSON, and some engines refuse it: dropped.
    done(null, body[0] === 0xef && body[1] === 0xbb && body[2] === 0xbf ? body.subarray(3) : body);
  });
  // An audio upload, kept as its bytes (within the route's body limit: 413 past it) to be sent on as is, its form read as it arrives.
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
  scope.decorateRequest('dialect', null);
  scope.addHook('onRequest', (request, reply, done) => {
    // Read once per request: Fastify builds routeOptions anew at each read.
    const dialect = (request.routeOptions.config as Partial<DialectRouteConfig> | undefined)?.dialect ?? defaultDialect;
    request.dialect = dialect;
    const post = request.method === 'POST';
    if (post && request.headers['content-type'] === undefined) {
      // Without keys, nothing but the type stops a web page in the user's browser from driving inference:
      // a page can send a body with no type (a Blob) without a CORS preflight, but never application/json.
      if (!authRequired) {
        refuse415(
          reply,
          dialect,
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
      !authRequired &&
      /^multipart\/form-data\b/i.test(request.headers['content-type'] ?? '') &&
      request.headers.authorization === undefined
    ) {
      // A web page can post a form anywhere without a CORS preflight, but cannot add an Authorization header
      // without one: without keys, that header (any value; OpenAI's clients always send one) is what a form must carry.
      refuse415(
        reply,
        dialect,
        'LLMGW_UNSUPPORTED_MEDIA_TYPE',
        'this gateway asks for no API key (api_keys: off), so it reads a multipart upload only with an Authorization header (any value, as OpenAI clients send); add one',
      );
      return;
    }
    const encoding = request.headers['content-encoding'];
    if (post && encoding !== undefined && encoding.trim().toLowerCase() !== 'identity') {
      refuse415(
        reply,
        dialect,
        'LLMGW_BAD_REQUEST',
        `the body is sent with Content-Encoding: ${encoding.slice(0, 40)}, which llmgw does not decode; send it uncompressed`,
      );
      return;
    }
    // A client that starts a body and stalls is cut after idleBodyTimeoutMs of silence (Node destroys a socket whose timeout nobody handles).
    armBodyTimeout(request.raw.socket, idleBodyTimeoutMs);
    // Here, not in the dialect's own scope, whose hooks would run after the key hook.
    dialect.onRequest?.(request, reply);
    done();
  });
}

/** A body refused before it is read, in the route's dialect. */
function refuse415(reply: FastifyReply, dialect: Dialect, code: ErrorCode, message: string): void {
  void replyErrorBody(reply, 415, dialect.errorBody(415, code, message, null));
}
