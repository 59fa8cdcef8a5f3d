// The relay of one attempt for POST /v1/messages: the engine answers in
// Chat Completions and the client reads Anthropic's Messages, so this relay
// translates instead of passing bytes. A variant of relay.ts rather than a
// branch in it, so the chat path's hot loop stays as it is. The same rules
// hold: nothing goes out before the first translated byte (so a failure
// before it is retried), 502/503 from an engine move the request on, a
// stream that breaks after its first byte ends with an error event, and
// usage is read from the engine's own bytes (the tail) for accounting.
import type { IncomingHttpHeaders } from 'node:http';
import type { Dispatcher } from 'undici';
import { MessageStreamTranslator, toAnthropicError, toMessage, type AnthropicCall } from './anthropic/index.js';
import { AttemptRelay, describeNetError, eventEnd, type Outcome, type RelayHooks, type RelayTarget } from './relay.js';

const STREAM_OPTIONS = Buffer.from('stream_options');

export class AnthropicRelayHandler extends AttemptRelay {
  private sse = false;
  /** A whole answer (or an error body), held until its end: it is translated whole. */
  private pending: Buffer[] = [];
  /** Bytes after the last SSE event boundary, waiting for the rest of their event. */
  private carry: Buffer | null = null;
  private readonly translator: MessageStreamTranslator;

  constructor(
    target: RelayTarget,
    hooks: RelayHooks,
    resolve: (o: Outcome) => void,
    private readonly call: AnthropicCall,
    /** Names the message when the engine gives no id: the request id. */
    private readonly requestId: string,
    /** The router asked this stream for its usage: an engine refusing that is sent the request again without it. */
    private readonly askedUsage: boolean,
  ) {
    super(target, hooks, resolve);
    this.translator = new MessageStreamTranslator(call, requestId);
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
      const out = (this.carry ? this.translate(this.carry.toString('utf8')) : '') + this.translator.end();
      this.carry = null;
      this.write(out);
      res.end();
    } else {
      const body = Buffer.concat(this.pending).toString('utf8');
      this.pending = [];
      if (this.askedUsage && (this.status === 400 || this.status === 422) && body.includes(STREAM_OPTIONS.toString())) {
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

  /** Anthropic events for whole upstream SSE events. */
  private translate(text: string): string {
    let out = '';
    for (const event of text.split(/\r?\n\r?\n/)) {
      let data = '';
      for (const line of event.split(/\r?\n/)) if (line.startsWith('data:')) data += line.slice(5).trimStart();
      if (data === '') continue;
      this.events++;
      if (data === '[DONE]') {
        out += this.translator.end();
        continue;
      }
      try {
        const chunk = JSON.parse(data) as { error?: { message?: unknown } };
        // An engine that reports an error inside its stream: the client gets it as Anthropic's error event.
        if (chunk.error && typeof chunk.error === 'object') out += this.translator.fail(typeof chunk.error.message === 'string' ? chunk.error.message : 'the engine failed mid-response');
        else out += this.translator.push(chunk as Parameters<MessageStreamTranslator['push']>[0]);
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

  /** A whole answer, or an error in Anthropic's shape with the engine's status. */
  private answerWhole(body: string): void {
    let status = this.status;
    let out: string;
    if (status >= 400) out = toAnthropicError(body, status);
    else {
      try {
        out = JSON.stringify(toMessage(JSON.parse(body) as Parameters<typeof toMessage>[0], this.call, this.requestId));
      } catch {
        status = 502;
        out = toAnthropicError('{"error":{"message":"the engine answered with a body that is not a chat completion"}}', 502);
      }
    }
    this.started = true;
    this.hooks.onFirstByte();
    this.status = status;
    this.target.res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(out) });
    this.target.res.end(out);
  }
}
