// Remotes that speak another API than Chat Completions: OpenAI's Responses
// API (`api: responses`) and Anthropic's Messages API (`api: anthropic`).
// Every request reaches an attempt as the internal chat call, so an
// interceptor translates it for such a remote (its path, body and key
// header: Attempt.upstream), and the remote's answer, whole or streamed, is
// translated back into chat before the dialect's relay reads it: the
// client's own dialect, usage, cost and the error rules then hold as for a
// chat remote. The translations themselves are the dialects' (remote-*.ts
// beside the client direction in src/gateway/dialects/{responses,anthropic});
// this is the wiring, apart from the guard so a chat remote pays nothing.
import type { IncomingHttpHeaders } from 'node:http';
import type { Dispatcher } from 'undici';
import type { Interceptor, UpstreamApi } from '../core/dispatch.js';
import { eventData, splitEvents, SseEvents, SSE_EVENT_LIMIT_BYTES } from '../core/sse-events.js';
import type { ForeignApiName } from '../ports/index.js';
import { unservableRetry } from '../core/unservable.js';
import { LlmgwError } from '../../errors/index.js';
import { messageToCompletion, MessagesToChatStream } from '../dialects/anthropic/remote-answer.js';
import { ANTHROPIC_VERSION, toMessagesRequest } from '../dialects/anthropic/remote-request.js';
import { responseToCompletion, ResponsesToChatStream } from '../dialects/responses/remote-answer.js';
import { toResponsesRequest } from '../dialects/responses/remote-request.js';

type Json = Record<string, unknown>;

/** One remote event stream's translation into chat SSE text. */
interface ChatStream {
  push(event: Json): string;
  end(): string;
}

/** What the wiring needs of one foreign API. */
interface ForeignApi {
  readonly path: string;
  /** Headers every request to it carries besides the key. */
  readonly headers: Readonly<Record<string, string>>;
  /** The header its key goes in; absent = authorization: Bearer. */
  readonly secretHeader?: string;
  request(chat: Json): Json;
  whole(answer: Json, nowS: number): Json;
  stream(includeUsage: boolean, nowS: number): ChatStream;
}

const APIS: Readonly<Record<ForeignApiName, ForeignApi>> = {
  responses: {
    path: '/v1/responses',
    headers: {},
    request: toResponsesRequest,
    whole: responseToCompletion,
    stream: (includeUsage, nowS) => new ResponsesToChatStream(includeUsage, nowS),
  },
  anthropic: {
    path: '/v1/messages',
    headers: { 'anthropic-version': ANTHROPIC_VERSION },
    secretHeader: 'x-api-key',
    request: toMessagesRequest,
    whole: messageToCompletion,
    stream: (includeUsage, nowS) => new MessagesToChatStream(includeUsage, nowS),
  },
};

const CHAT_PATH = '/v1/chat/completions';

/**
 * The headers a request to a remote speaking `api` carries for its key
 * (`secret`; undefined = it has none) and its API's version: Anthropic's
 * x-api-key and anthropic-version, a bearer token for every other API. The
 * one definition: an attempt gets the same from APIS through attachSecret,
 * and the control plane's probe of the remote calls this.
 */
export function remoteKeyHeaders(api: string, secret: string | undefined): Record<string, string> {
  const foreign = api === 'anthropic' || api === 'responses' ? APIS[api] : undefined;
  const out: Record<string, string> = { ...foreign?.headers };
  if (secret === undefined) return out;
  if (foreign?.secretHeader) out[foreign.secretHeader] = secret;
  else out.authorization = `Bearer ${secret}`;
  return out;
}

/**
 * The interceptor that sends an attempt at a remote speaking another API in
 * that API. A request it cannot express (n > 1 to Anthropic, a stop
 * sequence to the Responses API) is not sent: the attempt fails before any
 * byte naming the field, the router tries another replica at once, and if
 * none takes the request as written the client gets a 400 naming the field
 * (core/unservable.ts). `now`: for the translated answer's `created`.
 */
export function foreignApis(now: () => number): Interceptor {
  return (next) => (a) => {
    const name = a.replica.remote?.api;
    const api = name ? APIS[name] : undefined;
    if (!api || a.passThrough) return next(a);
    if (a.path !== CHAT_PATH)
      return Promise.resolve({ kind: 'retry', reason: `the remote speaks ${name}, which serves chat only` });
    let chat: Json;
    let body: Json;
    try {
      chat = JSON.parse(a.body.toString('utf8')) as Json;
      body = api.request(chat);
    } catch (err) {
      const reason = `not sent to the ${name} remote: ${(err as Error).message}`;
      // A field the remote's API has no counterpart for: the request's fault, not the remote's (unservable.ts).
      const param = err instanceof LlmgwError ? err.context.param : undefined;
      if (typeof param === 'string')
        return Promise.resolve(unservableRetry(reason, { param, message: (err as Error).message }));
      return Promise.resolve({ kind: 'retry', reason });
    }
    a.body = Buffer.from(JSON.stringify(body), 'utf8');
    Object.assign(a.headers, api.headers);
    const options = chat.stream_options as { include_usage?: unknown } | null | undefined;
    const includeUsage = chat.stream === true && options?.include_usage === true;
    const upstream: UpstreamApi = {
      path: api.path,
      ...(api.secretHeader ? { secretHeader: api.secretHeader } : {}),
      wrap: (inner) => new ForeignAnswer(inner, api, includeUsage, Math.floor(now() / 1000)),
    };
    a.upstream = upstream;
    return next(a);
  };
}

/** The most of a whole answer held to be translated; a remote sending more is cut off as a failed attempt. */
const WHOLE_LIMIT = 32 * 1024 * 1024;

/** Why a stream was cut off: logged and kept in the request log as the reason it broke. */
const EVENT_TOO_LONG = `the remote sent more than ${SSE_EVENT_LIMIT_BYTES / 2 ** 20} MiB without ending an event`;

/**
 * The remote's answer as chat, fed to the dialect's relay (`inner`): a
 * stream event by event as it comes (the same controller, so the relay's
 * backpressure reaches the remote's socket), a whole answer or an error at
 * its end, with its headers then (its length is the translation's). A 429
 * never reaches here: the remote guard outside settles it.
 */
export class ForeignAnswer implements Dispatcher.DispatchHandler {
  private sse: ChatStream | null = null;
  private status = 0;
  private retryAfter: string | undefined;
  private pending: Buffer[] = [];
  private held = 0;
  /** The remote's stream, split into whole events (bounded: a remote that never ends an event is cut off). */
  private readonly events = new SseEvents();

  constructor(
    private readonly inner: Dispatcher.DispatchHandler,
    private readonly api: ForeignApi,
    private readonly includeUsage: boolean,
    private readonly nowS: number,
  ) {}

  onRequestStart(controller: Dispatcher.DispatchController, context: unknown): void {
    this.inner.onRequestStart?.(controller, context as object);
  }

  onResponseStart(
    controller: Dispatcher.DispatchController,
    statusCode: number,
    headers: IncomingHttpHeaders,
    statusMessage?: string,
  ): void {
    this.status = statusCode;
    const type = headers['content-type'];
    const retryAfter = headers['retry-after'];
    this.retryAfter = typeof retryAfter === 'string' ? retryAfter : undefined;
    if (statusCode < 300 && typeof type === 'string' && type.startsWith('text/event-stream')) {
      this.sse = this.api.stream(this.includeUsage, this.nowS);
      this.inner.onResponseStart?.(controller, statusCode, { 'content-type': 'text/event-stream' }, statusMessage);
    }
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (!this.sse) {
      this.held += chunk.length;
      if (this.held > WHOLE_LIMIT) return controller.abort(new Error('the remote answer is larger than llmgw holds'));
      this.pending.push(chunk);
      return;
    }
    // Translated in whole events only: a character split across two reads is never cut in half.
    const text = this.events.push(chunk);
    // The dialect's relay then ends the stream with its error event (or, before any byte, tries another replica).
    if (text === null) return controller.abort(new Error(EVENT_TOO_LONG));
    if (text !== '') this.forward(controller, this.translate(text));
  }

  onResponseEnd(controller: Dispatcher.DispatchController, trailers: IncomingHttpHeaders): void {
    if (this.sse) {
      this.forward(controller, this.translate(this.events.rest()) + this.sse.end());
      this.inner.onResponseEnd?.(controller, trailers);
      return;
    }
    const { status, body } = this.whole(Buffer.concat(this.pending).toString('utf8'));
    this.pending = [];
    const bytes = Buffer.from(body, 'utf8');
    const headers: IncomingHttpHeaders = { 'content-type': 'application/json', 'content-length': String(bytes.length) };
    if (this.retryAfter !== undefined) headers['retry-after'] = this.retryAfter;
    this.inner.onResponseStart?.(controller, status, headers, '');
    this.inner.onResponseData?.(controller, bytes);
    this.inner.onResponseEnd?.(controller, trailers);
  }

  onResponseError(controller: Dispatcher.DispatchController, err: Error): void {
    this.inner.onResponseError?.(controller, err);
  }

  /** A whole answer as a chat completion, an error as OpenAI's error shape; a body that is neither is a 502. */
  private whole(text: string): { status: number; body: string } {
    if (this.status >= 300) return { status: this.status, body: chatErrorBody(text, this.status) };
    try {
      const answer = JSON.parse(text) as unknown;
      if (typeof answer !== 'object' || answer === null) throw new Error('not an object');
      return { status: this.status, body: JSON.stringify(this.api.whole(answer as Json, this.nowS)) };
    } catch {
      return { status: 502, body: chatErrorBody('the remote answered with a body its API does not have', 502) };
    }
  }

  /** Chat SSE text for whole remote SSE events. */
  private translate(text: string): string {
    let out = '';
    for (const event of splitEvents(text)) {
      const data = eventData(event);
      if (data === '' || data === '[DONE]') continue;
      try {
        const parsed = JSON.parse(data) as unknown;
        if (typeof parsed === 'object' && parsed !== null) out += this.sse!.push(parsed as Json);
      } catch {
        // A line that is not JSON (a comment, a keep-alive) carries nothing.
      }
    }
    return out;
  }

  private forward(controller: Dispatcher.DispatchController, out: string): void {
    if (out !== '') this.inner.onResponseData?.(controller, Buffer.from(out, 'utf8'));
  }
}

/**
 * A remote's error body in OpenAI's error shape, keeping its message and
 * type: Anthropic's `{"type": "error", "error": {"type", "message"}}` and
 * OpenAI's `{"error": {"message", "type"}}` alike. A body that is neither is
 * described by its status. The dialect's relay then shapes it for the client.
 */
export function chatErrorBody(text: string, status: number): string {
  let message = `the remote answered ${status}`;
  let type = status >= 500 ? 'api_error' : 'invalid_request_error';
  try {
    const parsed = JSON.parse(text) as { error?: unknown; message?: unknown; detail?: unknown };
    const e = parsed.error;
    if (typeof e === 'object' && e !== null) {
      const { message: m, type: t } = e as { message?: unknown; type?: unknown };
      if (typeof m === 'string') message = m;
      if (typeof t === 'string') type = t;
    } else if (typeof e === 'string') message = e;
    else if (typeof parsed.message === 'string') message = parsed.message;
    else if (typeof parsed.detail === 'string') message = parsed.detail;
  } catch {
    // Not JSON: the status says enough.
  }
  return JSON.stringify({ error: { message, type, param: null, code: null } });
}
