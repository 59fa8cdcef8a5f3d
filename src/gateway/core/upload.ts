// The client listener's reader of multipart bodies (the audio upload's
// form). The body is kept as the bytes that came, to go on to the engine
// exactly as sent, and on the upload route it is parsed as it arrives, a
// socket read at a time, so that a form past FORM_LIMITS is refused at the
// part that passes a limit. Buffering the body and parsing it whole in one
// call let 200,000 tiny fields hold every listener, heartbeats included,
// for 5.7 s (issue #33).
import { constants } from 'node:buffer';
import type { IncomingMessage } from 'node:http';
import { errorCodes, type FastifyRequest } from 'fastify';
import type { LlmgwError } from '../../errors/index.js';
import { FormReader, type ReadForm } from '../../http/index.js';

declare module 'fastify' {
  interface FastifyRequest {
    /**
     * The upload's form as the body parser read it, or why it could not be
     * read: refused by the call hook, after the key check, as any other bad
     * body is. null = no form was read (another route, or no multipart body).
     */
    uploadForm: ReadForm | LlmgwError | null;
  }
}

/** A route's `config` that has the body parser read its multipart form. */
export interface UploadRouteConfig {
  readonly multipartForm?: boolean;
}

/**
 * The content type parser for multipart/form-data: the body as a Buffer,
 * within the route's body limit (413 past it, or past a declared length
 * over it, as Fastify's own parser answers; 400 when the length is not the
 * one declared). On a route whose config has `multipartForm`, the form is
 * read on the way and left on `request.uploadForm`; a form past one of
 * FORM_LIMITS is refused with its 413 at once, and the listener's error
 * handler reads and drops the rest so the client can read it.
 */
export function readMultipartBody(
  request: FastifyRequest,
  payload: IncomingMessage,
  done: (err: Error | null, body?: Buffer) => void,
): void {
  // The body is held whole in one Buffer: past Node's largest (4 GiB on Node 20) Buffer.concat would throw at the
  // end of the body, out of every handler, and end the process.
  const limit = Math.min(request.routeOptions.bodyLimit ?? Number.POSITIVE_INFINITY, constants.MAX_LENGTH);
  const declared = Number(request.headers['content-length']);
  if (declared > limit) return done(new errorCodes.FST_ERR_CTP_BODY_TOO_LARGE());
  const reader = (request.routeOptions.config as UploadRouteConfig | undefined)?.multipartForm
    ? new FormReader(request.headers['content-type'])
    : null;
  const chunks: Buffer[] = [];
  let received = 0;
  const stop = () => {
    payload.removeListener('data', onData);
    payload.removeListener('end', onEnd);
    payload.removeListener('error', onEnd);
  };
  function onData(chunk: Buffer): void {
    received += chunk.length;
    if (received > limit) {
      stop();
      return done(new errorCodes.FST_ERR_CTP_BODY_TOO_LARGE());
    }
    chunks.push(chunk);
    // One read a turn of the event loop: libuv reads up to 32 × 64 KiB from a socket that keeps up before it
    // serves anything else, so ten uploads at loopback speed would hold the heartbeats between turns.
    payload.pause();
    setImmediate(() => payload.resume());
    // A form that cannot be read (400) waits for the key check; one past a limit need not be read further.
    if (reader && !reader.write(chunk) && reader.refusal!.status === 413) {
      stop();
      done(reader.refusal!);
    }
  }
  function onEnd(err?: Error & { statusCode?: number }): void {
    stop();
    if (err) {
      // The client went away mid-body: a 400 for the log, as Fastify's own parser answers it.
      if (!(typeof err.statusCode === 'number' && err.statusCode >= 400)) err.statusCode = 400;
      return done(err);
    }
    if (!Number.isNaN(declared) && received !== declared)
      return done(new errorCodes.FST_ERR_CTP_INVALID_CONTENT_LENGTH());
    const raw = Buffer.concat(chunks, received);
    if (!reader) return done(null, raw);
    reader.end().then(
      (form) => {
        request.uploadForm = form;
        done(null, raw);
      },
      (refusal: LlmgwError) => {
        request.uploadForm = refusal;
        done(null, raw);
      },
    );
  }
  payload.on('data', onData);
  payload.on('end', onEnd);
  payload.on('error', onEnd);
  payload.resume();
}
