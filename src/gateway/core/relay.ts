// One upstream attempt, relayed to the client as it arrives. Built on
// undici's dispatch handler rather than `request()`: the router needs no
// Readable between the engine's socket and the client's, and skipping it
// is most of undici's cost per request. Kept apart from router.ts because
// this is where the byte-level rules live: headers go out with the first
// byte (so a failure before it can still be retried), a stream is relayed in
// whole SSE events (so a break can end with an error event the client
// parses), and a read's worth of chunks goes out in one write. A whole
// answer to OpenAI's API has a relay of its own (relay-whole.ts).
import type { IncomingHttpHeaders, ServerResponse } from 'node:http';
import type { Dispatcher } from 'undici';
import type { ErrorCode } from '../../errors/index.js';
import { openAiErrorBody } from './errors.js';
import { TailKeeper } from './usage.js';
import { refusesStreamOptions } from './stream-options.js';
import { SSE_EVENT_LIMIT_BYTES, SseEvents } from './sse-events.js';
import { withoutUsageEvent } from './withheld-usage.js';
import { certificateProblem } from '../../tls/index.js';

/**
 * How an attempt ended: answered (whatever the status), failed before the
 * first byte and may be retried, or refused the stream_options the router
 * added (to be sent again as the client wrote it). A retry's `refusal` is
 * what the client is told if no later attempt answers (a remote's 429 and
 * its wait, a remote that hung: 504); absent = the router's 502.
 */
export type Outcome =
  | { kind: 'done'; status: number }
  | { kind: 'retry'; reason: string; refusal?: { readonly status: 429 | 504; readonly retryAfterS?: number } }
  | { kind: 'usageRefused' };

/** What the relay needs to know of the request it serves, and tells back. */
export interface RelayTarget {
  readonly res: ServerResponse;
  readonly clientGone: boolean;
  readonly timedOut: boolean;
  /** The key was revoked while the request ran: it ends as a timeout does, with the router's answer or error event. */
  readonly revoked: boolean;
  /** Set while this attempt runs, so a client that leaves or a timeout aborts it. */
  abort: (() => void) | null;
}

export interface RelayHooks {
  /** The first byte is about to be written (for time to first byte). */
  onFirstByte(): void;
  /** The attempt ended with an answer; `tail` holds the end of it, for usage; `events`: SSE events relayed (0 for a whole answer). */
  onAnswered(status: number, tail: TailKeeper, events: number): void;
  /** Written in the error event when a stream breaks after its first byte. */
  brokenMessage(): string;
  /** The code and status of that error event in OpenAI's shape (the engine broke: LLMGW_UPSTREAM, 502). */
  brokenCode(): { readonly code: ErrorCode; readonly status: number };
  /** Logged once when a response breaks after its first byte. */
  onBroken(reason: string): void;
  /** The answer for a request the router stopped before any byte was sent (timed out: 504; key revoked: 401); returns the status written. */
  timeout(): number;
}

/** How much of a non-stream answer is held before it is written: one write for almost every answer, bounded memory for the rest. */
export const WHOLE_ANSWER_SLICE = 256 * 1024;

/** Answers up to this size go out as one string write (see endWhole); larger ones are not worth the copy. */
const ONE_WRITE_BYTES = 64 * 1024;

/** Response headers passed to the client; the rest (hop-by-hop, server identity, the engine's own request id: llmgw's is sent) stay behind. */
const PASSED_HEADERS = ['content-type', 'content-length', 'cache-control', 'retry-after'] as const;

/** Copies into `out` the engine's response headers that the client gets (PASSED_HEADERS). */
export function passHeaders(headers: IncomingHttpHeaders, out: Record<string, string>): void {
  for (const name of PASSED_HEADERS) {
    const v = headers[name];
    if (typeof v === 'string') out[name] = v;
  }
}

/** The chunks held so far as one Buffer; the common single chunk is taken as it is, not copied. */
export function joined(chunks: readonly Buffer[]): Buffer {
  return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
}

/** Ends `res` with a whole answer nothing of which was written yet, in as few writes as Node allows. */
export function endWhole(res: ServerResponse, body: Buffer): void {
  // As a latin1 string (the same bytes), Node sends a small answer in one write with its headers; as a Buffer, in a writev of two.
  if (body.length <= ONE_WRITE_BYTES) res.end(body.toString('latin1'), 'latin1');
  else res.end(body);
}

/**
 * What every relay of one attempt shares, whatever it writes: the attempt's
 * controller (aborted when the client leaves), the status, the rule that
 * 502/503 move the request on, the tail kept for usage, and how an attempt
 * that failed before its first byte is settled (retried, or the timeout's
 * 504). The byte relay below and the dialects' translating relays (relay-translating.ts)
 * differ only in what they write.
 */
export abstract class AttemptRelay implements Dispatcher.DispatchHandler {
  protected controller: Dispatcher.DispatchController | null = null;
  protected status = 0;
  /** Why this attempt is to be retried; null = it is not (yet). */
  protected retryReason: string | null = null;
  protected started = false;
  private settled = false;
  protected readonly tail = new TailKeeper();
  /** SSE events relayed: a lower bound on tokens when the engine's usage never comes. */
  protected events = 0;
  protected readonly onDrain = () => this.controller?.resume();

  constructor(
    protected readonly target: RelayTarget,
    protected readonly hooks: RelayHooks,
    private readonly resolve: (o: Outcome) => void,
  ) {}

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    if (this.target.clientGone || this.target.timedOut || this.target.revoked) {
      controller.abort(new Error('the client went away before the request was sent'));
      return;
    }
    this.target.abort = () => controller.abort(new Error('the client went away'));
  }

  /** Records the status; true when the answer is to be relayed, false for a 502/503 (nothing of it reaches the client: the request moves on). */
  protected takeStatus(statusCode: number): boolean {
    this.status = statusCode;
    if (statusCode !== 502 && statusCode !== 503) return true;
    this.retryReason = `the engine answered ${statusCode}`;
    return false;
  }

  /**
   * Settles an error when nothing is left to write: the client is gone, or
   * no byte went out yet (a retry, or the timeout's answer). False = bytes
   * were written, and the subclass ends the response its own way.
   */
  protected settledEarly(err: Error): boolean {
    this.target.res.off('drain', this.onDrain);
    if (this.target.clientGone) {
      this.hooks.onAnswered(0, this.tail, this.events);
      this.settle({ kind: 'done', status: 0 });
      return true;
    }
    if (this.started) return false;
    if (this.target.timedOut || this.target.revoked) {
      this.settle({ kind: 'done', status: this.hooks.timeout() });
      return true;
    }
    const reason =
      this.retryReason ??
      (this.status ? `the answer broke before its first byte (${describeNetError(err)})` : describeNetError(err));
    this.settle({ kind: 'retry', reason });
    return true;
  }

  /** Writes `data` to the client; when its buffer is full, the engine's answer is paused until it drains. */
  protected writePaced(data: string | Buffer): void {
    if (!this.target.res.write(data) && this.controller) {
      this.controller.pause();
      this.target.res.once('drain', this.onDrain);
    }
  }

  protected settle(o: Outcome): void {
    if (this.settled) return;
    this.settled = true;
    this.target.abort = null;
    this.resolve(o);
  }

  abstract onResponseStart(
    controller: Dispatcher.DispatchController,
    statusCode: number,
    headers: IncomingHttpHeaders,
  ): void;
  abstract onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void;
  abstract onResponseEnd(controller: Dispatcher.DispatchController, trailers: IncomingHttpHeaders): void;
  abstract onResponseError(controller: Dispatcher.DispatchController | undefined, err: Error): void;
}

/**
 * The byte relay of a stream, and of any answer whose relay adds to it (the
 * Responses API's native path): SSE answers in whole events, anything else
 * held to its end as WholeAnswerRelay holds it.
 */
export class RelayHandler extends AttemptRelay {
  private sse = false;
  private out: Record<string, string> = {};
  private pending: Buffer[] = [];
  private scheduled = false;
  /** Bytes of a non-stream answer held since the last write. */
  private pendingBytes = 0;
  /** Bytes after the last SSE event boundary, waiting for the rest of their event (bounded: SSE_EVENT_LIMIT_BYTES). */
  private readonly carry = new SseEvents();
  private readonly flushBound = () => this.flush();

  constructor(
    target: RelayTarget,
    hooks: RelayHooks,
    resolve: (o: Outcome) => void,
    /** The router asked this stream for its usage on the client's behalf: the usage-only event is kept from the client. */
    private readonly withholdUsage = false,
  ) {
    super(target, hooks, resolve);
  }

  onResponseStart(_controller: Dispatcher.DispatchController, statusCode: number, headers: IncomingHttpHeaders): void {
    if (!this.takeStatus(statusCode)) return;
    passHeaders(headers, this.out);
    this.sse = (this.out['content-type'] ?? '').startsWith('text/event-stream');
    if (this.sse) this.out['x-accel-buffering'] = 'no';
  }

  onResponseData(_controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.retryReason !== null || this.target.clientGone) return;
    this.tail.push(chunk);
    this.pending.push(chunk);
    if (!this.sse) {
      // A whole answer usually arrives in one read: held until its end, it goes
      // out with the headers in one write (each syscall is a real cost on a
      // small VM). A large one (embeddings of a long batch) streams in slices.
      this.pendingBytes += chunk.length;
      if (this.pendingBytes < WHOLE_ANSWER_SLICE) return;
      this.pendingBytes = 0;
      if (!this.started) this.start();
      this.flush();
      return;
    }
    if (!this.started) this.start();
    if (!this.scheduled) {
      // Engines send one HTTP chunk per token and undici hands each over in one
      // socket read: gathering them until the next tick makes one write of many.
      this.scheduled = true;
      process.nextTick(this.flushBound);
    }
  }

  onResponseEnd(): void {
    const res = this.target.res;
    if (this.retryReason !== null) return this.settle({ kind: 'retry', reason: this.retryReason });
    if (this.target.clientGone) {
      this.hooks.onAnswered(0, this.tail, this.events);
      return this.settle({ kind: 'done', status: 0 });
    }
    if (!this.started) {
      const body = joined(this.pending);
      if (refusesStreamOptions(this.withholdUsage, this.status, body)) {
        this.pending = [];
        return this.settle({ kind: 'usageRefused' });
      }
      // Nothing written yet: headers, body and end in one write.
      const out = this.transform(body, true);
      if (out.length !== body.length) this.out['content-length'] = String(out.length);
      this.start();
      this.pending = [];
      endWhole(res, out);
    } else {
      this.flush();
      // The engine's last event may end without its blank line: what is left is filtered as whole events are.
      const rest = this.carry.restBytes();
      const last = rest && this.withholdUsage ? withoutUsageEvent(rest) : rest;
      res.end(last ? this.transform(last, false) : undefined);
    }
    this.settle({ kind: 'done', status: this.status });
    this.hooks.onAnswered(this.status, this.tail, this.events);
  }

  onResponseError(_controller: Dispatcher.DispatchController | undefined, err: Error): void {
    if (this.settledEarly(err)) return;
    const res = this.target.res;
    // After the first byte: never retried. What arrived whole is delivered, a half event dropped, then one error event says why.
    this.carry.clear();
    this.flush();
    this.carry.clear();
    this.hooks.onBroken(describeNetError(err));
    const { code, status } = this.hooks.brokenCode();
    if (this.sse) res.end(this.brokenEvent(this.hooks.brokenMessage(), code, status));
    else res.destroy();
    // Recorded with the status it ended with: a revoked key's stream is no engine failure.
    this.hooks.onAnswered(status, this.tail, this.events);
    this.settle({ kind: 'done', status });
  }

  /** The one event a stream broken after its first byte ends with: Chat Completions' error line, unless the API has its own. */
  protected brokenEvent(message: string, code: ErrorCode, status: number): string {
    return `data: ${openAiErrorBody(message, code, status)}\n\n`;
  }

  /**
   * What is written of the engine's bytes: whole SSE events, a slice of a
   * large answer (its length must not change: the engine's Content-Length
   * went out), or a whole answer (`whole`, before its headers, so its
   * length may change). As they came by default; the native Responses
   * relay puts the router's response id in place of the engine's.
   */
  protected transform(data: Buffer, _whole: boolean): Buffer {
    return data;
  }

  private start(): void {
    this.started = true;
    this.hooks.onFirstByte();
    this.target.res.writeHead(this.status, this.out);
  }

  private flush(): void {
    this.scheduled = false;
    const res = this.target.res;
    if (this.pending.length === 0 || res.destroyed) return;
    let data = joined(this.pending);
    this.pending = [];
    if (this.sse) {
      const whole = this.carry.pushBytes(data);
      // An engine that never ends its event would have the carry grow without limit: the stream is ended instead.
      if (whole === null) {
        this.controller?.abort(
          new Error(`the engine sent over ${SSE_EVENT_LIMIT_BYTES >> 20} MiB without ending an event`),
        );
        return;
      }
      if (whole.length === 0) return;
      data = whole;
      if (this.withholdUsage) {
        // The same bytes back, at the cost of two searches, unless the read holds the usage-only event.
        data = withoutUsageEvent(data);
        if (data.length === 0) return;
      }
      this.events += countEvents(data);
    }
    this.writePaced(this.transform(data, false));
  }
}

const LF_LF = Buffer.from('\n\n');
const CRLF_CRLF = Buffer.from('\r\n\r\n');

/** SSE events that end in `data` (their blank lines, LF or CRLF framed). */
export function countEvents(data: Buffer): number {
  let n = 0;
  for (const boundary of [LF_LF, CRLF_CRLF]) {
    for (let i = data.indexOf(boundary); i !== -1; i = data.indexOf(boundary, i + boundary.length)) n++;
    if (n > 0) return n;
  }
  return n;
}

/** A network failure in words, without addresses: "connection refused", "connection reset". */
export function describeNetError(err: unknown): string {
  // An engine serving a certificate the router cannot verify: say where its CA is configured.
  const tls = certificateProblem(err, 'engine_ca');
  if (tls) return tls;
  const e = err as { code?: string; cause?: { code?: string }; message?: string };
  const code = e.code ?? e.cause?.code ?? '';
  switch (code) {
    case 'ECONNREFUSED':
      return 'connection refused';
    case 'ECONNRESET':
    case 'UND_ERR_SOCKET':
      return 'connection reset';
    case 'UND_ERR_CONNECT_TIMEOUT':
      return 'connect timed out';
    case 'UND_ERR_HEADERS_TIMEOUT':
      return 'no response headers in time';
    case 'UND_ERR_BODY_TIMEOUT':
      return 'the answer went silent';
    default:
      return code || (e.message ?? 'failed');
  }
}
