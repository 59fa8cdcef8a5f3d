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
import { RelayHandler, eventEnd, type Outcome, type RelayHooks, type RelayTarget } from './relay.js';
import { TranslatingRelay, type StreamTranslator } from './relay-translating.js';

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

/** Chat chunks in, Responses SSE events out (end: completed or incomplete; fail: response.failed), and the Response they made. */
export interface ResponsesStream extends StreamTranslator {
  /** The finished Response once end() has run; null before it, or after fail(). */
  response(): Record<string, unknown> | null;
}

/** Called with the finished Response an attempt delivered whole (status 200), to be kept when the request asks. */
export type KeepResponse = (response: Record<string, unknown>) => void;

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
  private kept = false;

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
    if (this.status === 200 && this.retryReason === null && !this.target.clientGone) {
      this.tap(chunk);
      // The final event is kept before its bytes go on: an engine may hold the stream open after it.
      this.keepOnce();
    }
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
      this.keepOnce();
    }
    super.onResponseEnd();
  }

  private keepOnce(): void {
    if (this.finished === null || this.kept) return;
    this.kept = true;
    this.keep(this.finished);
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
export class ResponsesRelayHandler extends TranslatingRelay {
  private readonly stream: ResponsesStream;

  constructor(
    target: RelayTarget,
    hooks: RelayHooks,
    resolve: (o: Outcome) => void,
    private readonly call: ResponsesRelayCall,
    private readonly keep: KeepResponse,
    askedUsage: boolean,
  ) {
    const stream = call.newStream();
    super(target, hooks, resolve, stream, askedUsage);
    this.stream = stream;
  }

  /** The finished Response is kept before its closing events reach the client, who may continue from it at once. */
  protected override streamEnded(): void {
    const finished = this.stream.response();
    if (finished) this.keep(finished);
  }

  /** A whole answer as a Response (kept), or the engine's error as it sent it (OpenAI's shape already) with its status. */
  protected whole(body: string, status: number): { status: number; body: string } {
    if (status >= 400) return { status, body };
    try {
      const response = this.call.toResponse(JSON.parse(body));
      this.keep(response);
      return { status, body: JSON.stringify(response) };
    } catch {
      return { status: 502, body: openAiErrorBody('the engine answered with a body that is not a chat completion', 'LLMGW_UPSTREAM', 502) };
    }
  }
}

function isResponse(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && (v as { object?: unknown }).object === 'response' && typeof (v as { id?: unknown }).id === 'string';
}
