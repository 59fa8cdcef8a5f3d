// The relays of one attempt for POST /v1/responses, one per path the replica
// decides: an engine that serves the Responses API itself (native.ts) gets
// the request as is and its answer goes back byte for byte, tapped for the
// finished Response (kept for previous_response_id and GET); any other
// engine gets the request translated to Chat Completions, and its answer is
// translated back here, as relay-anthropic.ts does for Messages. Variants of
// AttemptRelay rather than branches in relay.ts, so the chat path's hot loop
// stays as it is; the rules are the same: nothing before the first byte
// (a failure before it is retried), 502/503 move the request on, a stream
// that breaks after its first byte ends with an error event (translated:
// `response.failed`; native: the byte relay's own), and usage is read from
// the engine's own bytes (the tail).
import type { IncomingHttpHeaders } from 'node:http';
import type { Dispatcher } from 'undici';
import { openAiErrorBody } from './errors.js';
import { AttemptRelay, RelayHandler, describeNetError, eventEnd, type Outcome, type RelayHooks, type RelayTarget } from './relay.js';

/**
 * What the router needs of a Responses request once admitted: how to send it
 * (natively or as chat), translate its answer, and keep it. Built from the
 * translation of src/router/responses by the admission hook.
 */
export interface ResponsesRelayCall {
  readonly stream: boolean;
  /** Keep the finished Response for previous_response_id and GET (the request's `store`, default true). */
  readonly store: boolean;
  /** The response this one continues; null = a new conversation. */
  readonly previousResponseId: string | null;
  /** The request as an engine serving the API natively gets it: the whole conversation in `input`, no previous_response_id, `store: false`. */
  readonly native: Buffer;
  /** The Response for a whole chat completion. */
  toResponse(chat: unknown): Record<string, unknown>;
  /** A translator of one attempt's chat stream into Responses events. */
  newStream(): ResponsesStream;
  /** The conversation as kept with `response`: the previous response's items, this request's input, the response's output. */
  itemsAfter(response: Readonly<Record<string, unknown>>): unknown[];
}

/** Chat chunks in, Responses SSE events out (each a string of whole events, '' when a chunk makes none). */
export interface ResponsesStream {
  push(chunk: unknown): string;
  /** The closing events (completed or incomplete); '' once ended. */
  end(): string;
  /** A `response.failed` event saying why; '' once ended. */
  fail(message: string): string;
  /** The finished Response once end() has run; null before it, or after fail(). */
  response(): Record<string, unknown> | null;
}

/** Called with the finished Response an attempt delivered whole (status 200), to be kept when the request asks. */
export type KeepResponse = (response: Record<string, unknown>) => void;

const STREAM_OPTIONS = 'stream_options';

/** The most of a native answer the tap holds to find its Response; a larger one is relayed but not kept. */
const TAP_LIMIT_BYTES = 16 * 2 ** 20;

/**
 * The native path: RelayHandler's byte relay, with a tap that finds the
 * finished Response (the whole JSON answer, or the `response` of the final
 * `response.completed`/`response.incomplete` event) and hands it to `keep`
 * before the client has its last byte, so a continuation sent the moment
 * the answer ends finds it.
 */
export class NativeResponsesRelay extends RelayHandler {
  private sseTap = false;
  private tapped: Buffer[] = [];
  private tappedBytes = 0;
  /** Bytes after the last event boundary (stream), waiting for the rest of their event. */
  private tapCarry: Buffer | null = null;
  private finished: Record<string, unknown> | null = null;

  constructor(
    target: RelayTarget,
    hooks: RelayHooks,
    resolve: (o: Outcome) => void,
    private readonly keep: KeepResponse,
  ) {
    super(target, hooks, resolve, false);
  }

  override onResponseStart(controller: Dispatcher.DispatchController, statusCode: number, headers: IncomingHttpHeaders): void {
    super.onResponseStart(controller, statusCode, headers);
    const type = headers['content-type'];
    this.sseTap = typeof type === 'string' && type.startsWith('text/event-stream');
  }

  override onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.status === 200 && this.retryReason === null && !this.target.clientGone) this.tap(chunk);
    super.onResponseData(controller, chunk);
  }

  override onResponseEnd(): void {
    if (this.status === 200 && this.retryReason === null && !this.target.clientGone) {
      if (this.sseTap) this.tapEvents(Buffer.alloc(0), true);
      else if (this.tappedBytes > 0 && this.tappedBytes <= TAP_LIMIT_BYTES) {
        try {
          const body = JSON.parse(Buffer.concat(this.tapped).toString('utf8')) as unknown;
          if (isResponse(body)) this.finished = body;
        } catch {
          // Not JSON: nothing to keep; the client gets the bytes as they came.
        }
      }
      this.tapped = [];
      if (this.finished) this.keep(this.finished);
    }
    super.onResponseEnd();
  }

  private tap(chunk: Buffer): void {
    if (!this.sseTap) {
      this.tappedBytes += chunk.length;
      if (this.tappedBytes <= TAP_LIMIT_BYTES) this.tapped.push(chunk);
      else this.tapped = [];
      return;
    }
    this.tapEvents(chunk, false);
  }

  /** Reads whole events (as bytes, so no character is cut) for the final one; only events naming a final type are parsed. */
  private tapEvents(chunk: Buffer, last: boolean): void {
    const data = this.tapCarry ? Buffer.concat([this.tapCarry, chunk]) : chunk;
    const end = last ? data.length : eventEnd(data);
    this.tapCarry = end < data.length && data.length - end <= TAP_LIMIT_BYTES ? data.subarray(end) : null;
    if (end === 0) return;
    const text = data.toString('utf8', 0, end);
    if (!text.includes('response.completed') && !text.includes('response.incomplete')) return;
    for (const event of text.split(/\r?\n\r?\n/)) {
      if (!event.includes('response.completed') && !event.includes('response.incomplete')) continue;
      let payload = '';
      for (const line of event.split(/\r?\n/)) if (line.startsWith('data:')) payload += line.slice(5).trimStart();
      try {
        const parsed = JSON.parse(payload) as { type?: unknown; response?: unknown };
        if ((parsed.type === 'response.completed' || parsed.type === 'response.incomplete') && isResponse(parsed.response)) this.finished = parsed.response;
      } catch {
        // A delta that merely mentions the words: not the final event.
      }
    }
  }
}

/** The translated path: the engine answers in Chat Completions, the client reads the Responses API. */
export class ResponsesRelayHandler extends AttemptRelay {
  private sse = false;
  /** A whole answer (or an error body), held until its end: it is translated whole. */
  private pending: Buffer[] = [];
  /** Bytes after the last SSE event boundary, waiting for the rest of their event. */
  private carry: Buffer | null = null;
  private readonly translator: ResponsesStream;

  constructor(
    target: RelayTarget,
    hooks: RelayHooks,
    resolve: (o: Outcome) => void,
    private readonly call: ResponsesRelayCall,
    private readonly keep: KeepResponse,
    /** The router asked this stream for its usage: an engine refusing that is sent the request again without it. */
    private readonly askedUsage: boolean,
  ) {
    super(target, hooks, resolve);
    this.translator = call.newStream();
  }

  onResponseStart(_controller: Dispatcher.DispatchController, statusCode: number, headers: IncomingHttpHeaders): void {
    if (!this.takeStatus(statusCode)) return;
    const type = headers['content-type'];
    this.sse = statusCode < 400 && typeof type === 'string' && type.startsWith('text/event-stream');
  }

  onResponseData(_controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.retryReason !== null || this.target.clientGone) return;
    this.tail.push(chunk);
    if (!this.sse) {
      this.pending.push(chunk);
      return;
    }
    // Decoded in whole events only: a character split across two reads is never cut in half.
    const data = this.carry ? Buffer.concat([this.carry, chunk]) : chunk;
    const end = eventEnd(data);
    this.carry = end < data.length ? data.subarray(end) : null;
    if (end > 0) this.write(this.translate(data.toString('utf8', 0, end)));
  }

  onResponseEnd(): void {
    const res = this.target.res;
    if (this.retryReason !== null) return this.settle({ kind: 'retry', reason: this.retryReason });
    if (this.target.clientGone) {
      this.hooks.onAnswered(0, this.tail, this.events);
      return this.settle({ kind: 'done', status: 0 });
    }
    if (this.sse) {
      // The engine's last event may end without its blank line; a stream without [DONE] is ended here.
      let out = this.carry ? this.translate(this.carry.toString('utf8')) : '';
      this.carry = null;
      out += this.translator.end();
      const finished = this.translator.response();
      if (finished) this.keep(finished);
      this.write(out);
      res.end();
    } else {
      const body = Buffer.concat(this.pending).toString('utf8');
      this.pending = [];
      if (this.askedUsage && (this.status === 400 || this.status === 422) && body.includes(STREAM_OPTIONS)) {
        return this.settle({ kind: 'usageRefused' });
      }
      this.answerWhole(body);
    }
    this.settle({ kind: 'done', status: this.status });
    this.hooks.onAnswered(this.status, this.tail, this.events);
  }

  onResponseError(_controller: Dispatcher.DispatchController | undefined, err: Error): void {
    if (this.settledEarly(err)) return;
    const res = this.target.res;
    this.hooks.onBroken(describeNetError(err));
    if (this.sse) res.end(this.translator.fail(this.hooks.brokenMessage()));
    else res.destroy();
    this.hooks.onAnswered(502, this.tail, this.events);
    this.settle({ kind: 'done', status: 502 });
  }

  /** Responses events for whole upstream SSE events. */
  private translate(text: string): string {
    let out = '';
    for (const event of text.split(/\r?\n\r?\n/)) {
      let data = '';
      for (const line of event.split(/\r?\n/)) if (line.startsWith('data:')) data += line.slice(5).trimStart();
      if (data === '') continue;
      this.events++;
      if (data === '[DONE]') continue;
      try {
        const chunk = JSON.parse(data) as { error?: { message?: unknown } };
        // An engine that reports an error inside its stream: the client gets it as response.failed.
        if (chunk.error && typeof chunk.error === 'object') out += this.translator.fail(typeof chunk.error.message === 'string' ? chunk.error.message : 'the engine failed mid-response');
        else out += this.translator.push(chunk);
      } catch {
        // A line that is not JSON (a comment, a keep-alive) carries nothing to translate.
      }
    }
    return out;
  }

  private write(out: string): void {
    const res = this.target.res;
    if (out === '' || res.destroyed) return;
    if (!this.started) {
      this.started = true;
      this.hooks.onFirstByte();
      res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', 'x-accel-buffering': 'no' });
    }
    if (!res.write(out) && this.controller) {
      this.controller.pause();
      res.once('drain', this.onDrain);
    }
  }

  /** A whole answer as a Response, or the engine's error as it sent it (OpenAI's shape already) with its status. */
  private answerWhole(body: string): void {
    let status = this.status;
    let out: string;
    if (status >= 400) out = body;
    else {
      try {
        const response = this.call.toResponse(JSON.parse(body));
        this.keep(response);
        out = JSON.stringify(response);
      } catch {
        status = 502;
        out = openAiErrorBody('the engine answered with a body that is not a chat completion', 'LLMGW_UPSTREAM', 502);
      }
    }
    this.started = true;
    this.hooks.onFirstByte();
    this.status = status;
    this.target.res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(out) });
    this.target.res.end(out);
  }
}

function isResponse(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && (v as { object?: unknown }).object === 'response' && typeof (v as { id?: unknown }).id === 'string';
}
