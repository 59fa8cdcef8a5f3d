// A connection to an engine and the request it carries. The request is its
// handler's controller (abort, pause, resume) and its response reader's
// sink; what ends it (an error, a timeout, the pool's destruction) goes
// through the pool, which decides whether its connection can be reused.
import type { Socket } from 'node:net';
import type { IncomingHttpHeaders } from 'node:http';
import type { Dispatcher } from 'undici';
import { ResponseReader, type ResponseSink } from './response-reader.js';

/** What a call needs of its pool: the one way a request ends early. */
export interface CallOwner {
  fail(call: Call, err: Error): void;
}

export class Connection {
  /** The request this connection carries; null = idle. */
  call: Call | null = null;
  /** When it went idle (the pool's clock), for its keep-alive. */
  idleSinceMs = 0;
  /** How long it may stay idle: the pool's keep-alive, or the engine's hint when shorter. */
  keepAliveMs: number;
  /** The socket's error, reported when it closes. */
  error: Error | null = null;
  dead = false;

  constructor(
    readonly socket: Socket,
    keepAliveMs: number,
  ) {
    this.keepAliveMs = keepAliveMs;
  }
}

/** One request in flight; it is its handler's controller. */
export class Call implements Dispatcher.DispatchController, ResponseSink {
  readonly reader: ResponseReader;
  finished = false;
  /** Its bytes were written: failing it now leaves the connection unusable. */
  sent = false;
  private abortedReason: Error | null = null;
  private pausedNow = false;
  /** Absolute deadline for the head (the pool's clock); 0 = none or the head came. */
  headDeadlineMs = 0;
  /** A read arrived since the last sweep. */
  readSinceSweep = true;
  /** Since when the body has been silent (the pool's clock, at sweeps). */
  silentSinceMs = 0;

  constructor(
    readonly pool: CallOwner,
    readonly conn: Connection,
    readonly handler: Dispatcher.DispatchHandler,
    readonly bodyTimeoutMs: number,
  ) {
    this.reader = new ResponseReader(this);
  }

  get aborted(): boolean {
    return this.abortedReason !== null;
  }
  get paused(): boolean {
    return this.pausedNow;
  }
  get reason(): Error | null {
    return this.abortedReason;
  }

  abort(reason: Error): void {
    if (this.finished || this.abortedReason) return;
    this.abortedReason = reason;
    this.pool.fail(this, reason);
  }

  // Once the call has ended, its connection may carry another request: a
  // late pause or resume (a client's drain after the answer's end) must not
  // reach it. The pool resumes a connection a handler left paused.
  pause(): void {
    if (this.finished) return;
    this.pausedNow = true;
    this.conn.socket.pause();
  }

  resume(): void {
    if (!this.pausedNow || this.finished) return;
    this.pausedNow = false;
    this.readSinceSweep = true;
    this.conn.socket.resume();
  }

  head(status: number, headers: IncomingHttpHeaders, statusText: string): void {
    this.headDeadlineMs = 0;
    const hint = headers['keep-alive'];
    if (typeof hint === 'string') {
      const seconds = /timeout=(\d+)/i.exec(hint);
      if (seconds) this.conn.keepAliveMs = Math.min(this.conn.keepAliveMs, Number(seconds[1]) * 1000 - 1000);
    }
    this.handler.onResponseStart?.(this, status, headers, statusText);
  }

  data(chunk: Buffer): void {
    this.handler.onResponseData?.(this, chunk);
  }

  end(trailers: IncomingHttpHeaders): void {
    this.finished = true;
    this.handler.onResponseEnd?.(this, trailers);
  }
}
