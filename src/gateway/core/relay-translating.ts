// The relay of one attempt whose answer the client reads in another API
// than the engine speaks: the engine answers Chat Completions, the client
// reads Anthropic's Messages or OpenAI's Responses. What every such relay
// does is here once (upstream SSE read in whole events, a whole answer held
// to its end, the engine refusing stream_options, a stream that breaks after
// its first byte ended with the API's own error event); what differs, the
// translator and the shape of a whole answer, is the subclass's. The byte
// relay (relay.ts) stays as it is, so the chat path's hot loop carries none
// of this.
import type { IncomingHttpHeaders } from 'node:http';
import type { Dispatcher } from 'undici';
import { refusesStreamOptions } from './stream-options.js';
import { AttemptRelay, describeNetError, type Outcome, type RelayHooks, type RelayTarget } from './relay.js';
import { eventData, splitEvents, SseEvents, SSE_EVENT_LIMIT_BYTES } from './sse-events.js';

/** Chat stream chunks in, the client API's SSE events out: each call returns whole events, '' when it makes none. */
export interface StreamTranslator {
  push(chunk: object): string;
  /** The closing events; '' once ended (it is called at [DONE] and again when the stream ends). */
  end(): string;
  /** The API's error event, saying why the stream stopped; '' once ended. */
  fail(message: string): string;
}

/** Why a stream was cut off: logged and kept in the request log as the reason it broke. */
const EVENT_TOO_LONG = `the engine sent more than ${SSE_EVENT_LIMIT_BYTES / 2 ** 20} MiB without ending an event`;

export abstract class TranslatingRelay extends AttemptRelay {
  private sse = false;
  /** A whole answer (or an error body), held until its end: it is translated whole. */
  private pending: Buffer[] = [];
  /** The engine's stream, split into whole events (bounded: an engine that never ends an event is cut off). */
  private readonly upstream = new SseEvents();
  private closed = false;

  constructor(
    target: RelayTarget,
    hooks: RelayHooks,
    resolve: (o: Outcome) => void,
    protected readonly translator: StreamTranslator,
    /** The router asked this stream for its usage: an engine refusing that is sent the request again without it. */
    private readonly askedUsage: boolean,
  ) {
    super(target, hooks, resolve);
  }

  /**
   * A whole answer in the client's API: the engine's body (a chat
   * completion when `status` < 400, its error otherwise) translated, with
   * the status to send (502 when the body is not what it should be).
   */
  protected abstract whole(body: string, status: number): { readonly status: number; readonly body: string };

  /**
   * Called once when a stream ends (at [DONE], or when the engine closes it
   * without one), before its closing events are written: what is kept of
   * the answer is kept before the client can ask for it. Nothing by default.
   */
  protected streamEnded(): void {}

  onResponseStart(_controller: Dispatcher.DispatchController, statusCode: number, headers: IncomingHttpHeaders): void {
    if (!this.takeStatus(statusCode)) return;
    const type = headers['content-type'];
    this.sse = statusCode < 400 && typeof type === 'string' && type.startsWith('text/event-stream');
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.retryReason !== null || this.target.clientGone) return;
    this.tail.push(chunk);
    if (!this.sse) {
      this.pending.push(chunk);
      return;
    }
    // Decoded in whole events only: a character split across two reads is never cut in half.
    const text = this.upstream.push(chunk);
    // onResponseError then ends the stream with the API's error event (or, before any byte, the attempt is retried).
    if (text === null) return controller.abort(new Error(EVENT_TOO_LONG));
    if (text !== '') this.write(this.translate(text));
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
      this.write(this.translate(this.upstream.rest()) + this.close());
      res.end();
    } else {
      const bytes = Buffer.concat(this.pending);
      this.pending = [];
      if (refusesStreamOptions(this.askedUsage, this.status, bytes)) return this.settle({ kind: 'usageRefused' });
      const answer = this.whole(bytes.toString('utf8'), this.status);
      this.started = true;
      this.hooks.onFirstByte();
      this.status = answer.status;
      res.writeHead(answer.status, {
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(answer.body),
      });
      res.end(answer.body);
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

  /** The client API's events for whole upstream SSE events. */
  private translate(text: string): string {
    let out = '';
    for (const event of splitEvents(text)) {
      const data = eventData(event);
      if (data === '') continue;
      this.events++;
      if (data === '[DONE]') {
        out += this.close();
        continue;
      }
      try {
        const chunk = JSON.parse(data) as { error?: { message?: unknown } };
        // An engine that reports an error inside its stream: the client gets it as its API's error event.
        if (chunk.error && typeof chunk.error === 'object')
          out += this.translator.fail(
            typeof chunk.error.message === 'string' ? chunk.error.message : 'the engine failed mid-response',
          );
        else out += this.translator.push(chunk);
      } catch {
        // A line that is not JSON (a comment, a keep-alive) carries nothing to translate.
      }
    }
    return out;
  }

  /** The translator's closing events, with streamEnded() run once first. */
  private close(): string {
    const out = this.translator.end();
    if (!this.closed) {
      this.closed = true;
      this.streamEnded();
    }
    return out;
  }

  /** Sends translated events (the status line and headers first, once); '' sends nothing. */
  protected write(out: string): void {
    const res = this.target.res;
    if (out === '' || res.destroyed) return;
    if (!this.started) {
      this.started = true;
      this.hooks.onFirstByte();
      res.writeHead(200, {
        'content-type': 'text/event-stream; charset=utf-8',
        'cache-control': 'no-cache',
        'x-accel-buffering': 'no',
      });
    }
    this.writePaced(out);
  }
}
