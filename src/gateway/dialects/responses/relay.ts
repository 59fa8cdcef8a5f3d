// The relays of one attempt for POST /v1/responses, one per path the replica
// decides: an engine that serves the Responses API itself (native.ts) gets
// the request as is and its answer goes back byte for byte, tapped for the
// finished Response (kept for previous_response_id and GET); any other
// engine gets the request translated to Chat Completions, and its answer is
// translated back here, as ../anthropic/relay.ts does for Messages. Variants of
// AttemptRelay rather than branches in relay.ts, so the chat path's hot loop
// stays as it is; the rules are the same: nothing before the first byte
// (a failure before it is retried), 502/503 move the request on, a stream
// that breaks after its first byte ends with an error event (translated:
// `response.failed`; native: the byte relay's own), and usage is read from
// the engine's own bytes (the tail).
import type { IncomingHttpHeaders } from 'node:http';
import type { Dispatcher } from 'undici';
import type { ErrorCode } from '../../../errors/index.js';
import { openAiErrorBody, openAiErrorType } from '../../core/errors.js';
import { renameErrorParams } from '../../core/param-names.js';
import { RelayHandler, type Outcome, type RelayHooks, type RelayTarget } from '../../core/relay.js';
import { eventData, splitEvents, SseEvents } from '../../core/sse-events.js';
import { TranslatingRelay, type StreamTranslator } from '../../core/relay-translating.js';
import { RESPONSES_PARAMS } from './translations.js';

/**
 * What the router needs of a Responses request once admitted: how to send it
 * (natively or as chat), translate its answer, and keep it. Built from the
 * translation of src/gateway/responses by the admission hook.
 */
export interface ResponsesRelayCall {
  /**
   * The response's id, the router's own (`resp_` and 128 random bits): the
   * translated answer is made with it, and a native answer has the
   * engine's id replaced by it, so ids of two engines (or two keys) never
   * meet in what is kept.
   */
  readonly id: string;
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

/** The shortest engine id replaced by the router's own; shorter ones (none an engine makes) are left as they are. */
const MIN_ENGINE_ID_LENGTH = 8;

/**
 * The native path: RelayHandler's byte relay, with a tap that finds the
 * finished Response (the whole JSON answer, or the `response` of the final
 * `response.completed`/`response.incomplete` event) and hands it to `keep`
 * before the client has its last byte, so a continuation sent the moment
 * the answer ends finds it. The engine's response id is replaced by the
 * router's (`ownId`) wherever it stands as a JSON string: learnt from the
 * first event that carries the response (a stream) or from the whole
 * answer. An answer whose length is fixed before it is read whole (a
 * non-stream one larger than a slice, a stream with Content-Length) keeps
 * the engine's id; the kept copy remembers it, so continuing from it works.
 */
export class NativeResponsesRelay extends RelayHandler {
  private sseTap = false;
  private tapped: Buffer[] = [];
  private tappedBytes = 0;
  /** The stream tapped, split into whole events; an event past the tap's limit is not kept (its bytes still go out). */
  private readonly tapSplit = new SseEvents(TAP_LIMIT_BYTES);
  private finished: Record<string, unknown> | null = null;
  private kept = false;
  /** The engine's id as a JSON string's bytes, once known; null before. */
  private engineIdJson: Buffer | null = null;
  private readonly ownIdJson: Buffer;
  /** The engine sent a Content-Length: no byte count may change. */
  private fixedLength = false;

  constructor(
    target: RelayTarget,
    hooks: RelayHooks,
    resolve: (o: Outcome) => void,
    private readonly keep: KeepResponse,
    ownId: string,
  ) {
    super(target, hooks, resolve, false);
    this.ownIdJson = Buffer.from(JSON.stringify(ownId));
  }

  override onResponseStart(
    controller: Dispatcher.DispatchController,
    statusCode: number,
    headers: IncomingHttpHeaders,
  ): void {
    super.onResponseStart(controller, statusCode, headers);
    const type = headers['content-type'];
    this.sseTap = typeof type === 'string' && type.startsWith('text/event-stream');
    this.fixedLength = headers['content-length'] !== undefined;
  }

  protected override transform(data: Buffer, whole: boolean): Buffer {
    if (this.status !== 200) return data;
    if (this.engineIdJson === null) {
      // A slice of a whole answer is no JSON to read the id from; a stream of fixed length cannot grow or shrink.
      if (this.sseTap ? this.fixedLength : !whole) return data;
      const id = this.sseTap ? responseIdInEvents(data) : responseIdOfWhole(data);
      // Replaced wherever its JSON string appears: a short or empty id ("") would also match the answer's own text.
      if (id === null || id.length < MIN_ENGINE_ID_LENGTH) return data;
      this.engineIdJson = Buffer.from(JSON.stringify(id));
    }
    return replaceAll(data, this.engineIdJson, this.ownIdJson);
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

  /**
   * A stream the engine broke ends as the Responses API ends one, with an
   * `error` event (not Chat Completions' bare error line), numbered after the
   * events relayed: an engine numbers its events from 0, one each.
   */
  protected override brokenEvent(message: string, code: ErrorCode, status: number): string {
    const error = {
      type: 'error',
      code: openAiErrorType(status),
      message,
      param: null,
      sequence_number: this.events,
      llmgw_code: code,
    };
    return `event: error\ndata: ${JSON.stringify(error)}\n\n`;
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
    let text = this.tapSplit.push(chunk) ?? '';
    if (last) text += this.tapSplit.rest();
    if (!text.includes('response.completed') && !text.includes('response.incomplete')) return;
    for (const event of splitEvents(text)) {
      if (!event.includes('response.completed') && !event.includes('response.incomplete')) continue;
      const payload = eventData(event);
      try {
        const parsed = JSON.parse(payload) as { type?: unknown; response?: unknown };
        if (
          (parsed.type === 'response.completed' || parsed.type === 'response.incomplete') &&
          isResponse(parsed.response)
        )
          this.finished = parsed.response;
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
    if (status >= 400) return { status, body: renameErrorParams(body, RESPONSES_PARAMS) };
    try {
      const response = this.call.toResponse(JSON.parse(body));
      this.keep(response);
      return { status, body: JSON.stringify(response) };
    } catch {
      return {
        status: 502,
        body: openAiErrorBody('the engine answered with a body that is not a chat completion', 'LLMGW_UPSTREAM', 502),
      };
    }
  }
}

/** The response id of the first event in `data` that carries the response (response.created, in_progress, …); null when none does. */
function responseIdInEvents(data: Buffer): string | null {
  if (!data.includes('"response"')) return null;
  for (const event of splitEvents(data.toString('utf8'))) {
    if (!event.includes('"response"')) continue;
    try {
      const parsed = JSON.parse(eventData(event)) as { response?: unknown };
      if (isResponse(parsed.response)) return parsed.response.id as string;
    } catch {
      // Not JSON: not an event that carries the response.
    }
  }
  return null;
}

/** The id of a whole answer that is a Response; null for anything else. */
function responseIdOfWhole(data: Buffer): string | null {
  try {
    const parsed = JSON.parse(data.toString('utf8')) as unknown;
    return isResponse(parsed) ? (parsed.id as string) : null;
  } catch {
    return null;
  }
}

/** `data` with every `from` replaced by `to`; `data` itself when there is none. */
function replaceAll(data: Buffer, from: Buffer, to: Buffer): Buffer {
  let at = data.indexOf(from);
  if (at === -1) return data;
  const parts: Buffer[] = [];
  let start = 0;
  while (at !== -1) {
    parts.push(data.subarray(start, at), to);
    start = at + from.length;
    at = data.indexOf(from, start);
  }
  parts.push(data.subarray(start));
  return Buffer.concat(parts);
}

function isResponse(v: unknown): v is Record<string, unknown> {
  return (
    typeof v === 'object' &&
    v !== null &&
    (v as { object?: unknown }).object === 'response' &&
    typeof (v as { id?: unknown }).id === 'string'
  );
}
