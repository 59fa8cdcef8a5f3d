// Keep-alive connections to one plain-HTTP engine endpoint, and requests
// sent over them one at a time (no pipelining: an engine's answer can take
// minutes, and a request queued behind it would wait as long). A request
// takes the most recently used idle connection or opens one; there is no
// cap, as the router's undici pools had none. Timeouts are checked by one
// sweep per pool instead of a timer per request: a read marks its request
// busy, and the sweep counts idle time from the marks. Handlers are
// undici's (`Dispatcher.DispatchHandler`), so every relay of the gateway
// works over either client, and errors carry undici's codes for the same
// failures (UND_ERR_SOCKET, UND_ERR_HEADERS_TIMEOUT, ...).
import { connect } from 'node:net';
import type { Dispatcher } from 'undici';
import { Call, Connection } from './call.js';
import { EngineRequestError, encodeRequest, requestProblem, type EngineRequest } from './request.js';

export interface EnginePoolOptions {
  /** An idle connection is closed after this long, or after the engine's own keep-alive hint less a second when that is shorter. */
  readonly keepAliveTimeoutMs: number;
  /** A connection not established in this long fails its request (UND_ERR_CONNECT_TIMEOUT); 0 = no limit. */
  readonly connectTimeoutMs: number;
}

/** What a sweep is for, at the most: requests' timeouts and idle connections' keep-alive are checked this often. */
const SWEEP_MS = 500;
/** The least sweep period, for timeouts far below a second (tests, a remote's short timeout). */
const MIN_SWEEP_MS = 10;

export class EnginePool {
  private readonly host: string;
  private readonly port: number;
  private readonly hostHeader: string;
  /** Idle connections, the most recently used last. */
  private readonly idle: Connection[] = [];
  private readonly busy = new Set<Connection>();
  private sweepTimer: NodeJS.Timeout | null = null;
  private sweepMs = SWEEP_MS;
  private closing: { resolve: () => void; promise: Promise<void> } | null = null;
  private destroyed = false;

  /** `origin`: `http://host:port`. */
  constructor(
    origin: string,
    private readonly options: EnginePoolOptions,
  ) {
    const url = new URL(origin);
    if (url.protocol !== 'http:')
      throw new Error(`the engine client speaks plain HTTP; ${url.protocol} goes through undici`);
    this.host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
    this.port = Number(url.port || 80);
    this.hostHeader = url.host;
  }

  /** Requests in flight (`pending` is always 0: none waits for a connection). */
  get stats(): { running: number; pending: number; connected: number; free: number } {
    return {
      running: this.busy.size,
      pending: 0,
      connected: this.busy.size + this.idle.length,
      free: this.idle.length,
    };
  }

  /**
   * Sends `req`; its handler hears the response, or one error, as undici's
   * would. A request that cannot be sent (a bad header, a closed pool)
   * fails at once with onResponseError. Returns true, as undici's does
   * while it can take more.
   */
  dispatch(req: EngineRequest, handler: Dispatcher.DispatchHandler): boolean {
    const problem = this.destroyed || this.closing ? 'the engine pool is closed' : requestProblem(req);
    if (problem) {
      // No controller yet, as undici's handlers hear an invalid request.
      const noController = undefined as unknown as Dispatcher.DispatchController;
      handler.onResponseError?.(noController, new EngineRequestError('UND_ERR_INVALID_ARG', problem));
      return true;
    }
    const now = Date.now();
    const conn = this.takeConnection(now);
    const call = new Call(this, conn, handler, req.bodyTimeout ?? 0);
    conn.call = call;
    this.busy.add(conn);
    try {
      handler.onRequestStart?.(call, {});
    } catch (err) {
      this.fail(call, err as Error);
      return true;
    }
    if (call.aborted) return true;
    const headersTimeout = req.headersTimeout ?? 0;
    if (headersTimeout > 0) call.headDeadlineMs = now + headersTimeout;
    this.armSweep(Math.min(headersTimeout || SWEEP_MS * 4, call.bodyTimeoutMs || SWEEP_MS * 4));
    conn.socket.ref();
    call.sent = true;
    conn.socket.write(encodeRequest(req, this.hostHeader));
    return true;
  }

  /** Closes the pool once its requests end; none is taken meanwhile. */
  close(): Promise<void> {
    if (!this.closing) {
      let resolve!: () => void;
      const promise = new Promise<void>((r) => (resolve = r));
      this.closing = { resolve, promise };
      this.settleClose();
    }
    return this.closing.promise;
  }

  /** Ends every connection now; requests in flight fail. */
  async destroy(): Promise<void> {
    this.destroyed = true;
    for (const conn of [...this.busy]) {
      const call = conn.call;
      if (call && !call.finished)
        this.fail(call, new EngineRequestError('UND_ERR_DESTROYED', 'the engine pool was destroyed'));
    }
    for (const conn of this.idle.splice(0)) this.kill(conn);
    this.stopSweep();
    this.closing?.resolve();
  }

  /** Ends `call` with `err`: its connection is closed (the rest of its response would be garbage on it). */
  fail(call: Call, err: Error): void {
    if (call.finished) return;
    call.finished = true;
    call.reader.stop();
    // Aborted before a byte was written (the client left): the connection is as good as it was.
    this.release(call.conn, !call.sent);
    call.handler.onResponseError?.(call, err);
  }

  private takeConnection(now: number): Connection {
    while (this.idle.length > 0) {
      const conn = this.idle.pop()!;
      if (!conn.dead && now - conn.idleSinceMs < conn.keepAliveMs) return conn;
      this.kill(conn);
    }
    return this.open();
  }

  private open(): Connection {
    const socket = connect({ host: this.host, port: this.port, noDelay: true });
    socket.setKeepAlive(true, 60_000);
    const conn = new Connection(socket, this.options.keepAliveTimeoutMs);
    let connectTimer: NodeJS.Timeout | null = null;
    if (this.options.connectTimeoutMs > 0) {
      connectTimer = setTimeout(() => {
        conn.error = new EngineRequestError(
          'UND_ERR_CONNECT_TIMEOUT',
          `connect timed out after ${this.options.connectTimeoutMs} ms`,
        );
        socket.destroy();
      }, this.options.connectTimeoutMs);
      connectTimer.unref();
    }
    socket.once('connect', () => {
      if (connectTimer) clearTimeout(connectTimer);
    });
    socket.on('data', (chunk: Buffer) => this.onData(conn, chunk));
    socket.on('end', () => this.onEnd(conn));
    socket.on('error', (err) => {
      conn.error ??= err;
    });
    socket.on('close', () => {
      if (connectTimer) clearTimeout(connectTimer);
      this.onClose(conn);
    });
    return conn;
  }

  private onData(conn: Connection, chunk: Buffer): void {
    const call = conn.call;
    if (!call || call.finished) {
      // Bytes on an idle connection: no request asked for them, so nothing on it can be trusted.
      this.kill(conn);
      return;
    }
    call.readSinceSweep = true;
    try {
      call.reader.feed(chunk);
    } catch (err) {
      // The engine's bytes, or a handler: either way the rest of this response cannot be read on this connection.
      if (!call.finished) return this.fail(call, err as Error);
      // A handler threw at the response's end, when nothing is left to tell it: the bug is not hidden.
      if (conn.call === call) this.release(conn, false);
      throw err;
    }
    if (call.reader.done && conn.call === call) this.release(conn, !call.reader.closes && !call.reader.extra);
  }

  private onEnd(conn: Connection): void {
    const call = conn.call;
    if (call && !call.finished) {
      if (call.reader.eof()) this.release(conn, false);
      else this.fail(call, conn.error ?? new EngineRequestError('UND_ERR_SOCKET', 'other side closed'));
    }
    conn.dead = true;
  }

  private onClose(conn: Connection): void {
    conn.dead = true;
    const call = conn.call;
    if (call && !call.finished) {
      if (call.reader.eof()) this.release(conn, false);
      else this.fail(call, conn.error ?? new EngineRequestError('UND_ERR_SOCKET', 'other side closed'));
    }
    this.busy.delete(conn);
    const i = this.idle.indexOf(conn);
    if (i >= 0) this.idle.splice(i, 1);
    this.settleClose();
  }

  /** The connection's request ended: back to idle when `reuse`, closed otherwise. */
  private release(conn: Connection, reuse: boolean): void {
    const paused = conn.call?.paused === true;
    conn.call = null;
    this.busy.delete(conn);
    if (reuse && !conn.dead && !this.destroyed && !this.closing && conn.keepAliveMs > 0) {
      conn.idleSinceMs = Date.now();
      // Paused for a slow client when the whole answer was already read: left so, the next answer on it would never be read.
      if (paused) conn.socket.resume();
      conn.socket.unref();
      this.idle.push(conn);
    } else this.kill(conn);
    this.settleClose();
  }

  private kill(conn: Connection): void {
    conn.dead = true;
    conn.socket.destroy();
  }

  private settleClose(): void {
    if (!this.closing || this.busy.size > 0) return;
    for (const conn of this.idle.splice(0)) this.kill(conn);
    this.stopSweep();
    this.closing.resolve();
  }

  /** Runs the sweep often enough for a timeout of `timeoutMs`. */
  private armSweep(timeoutMs: number): void {
    const period = Math.max(MIN_SWEEP_MS, Math.min(SWEEP_MS, Math.floor(timeoutMs / 4)));
    if (this.sweepTimer && period >= this.sweepMs) return;
    this.stopSweep();
    this.sweepMs = period;
    this.sweepTimer = setInterval(() => this.sweep(), period);
    this.sweepTimer.unref();
  }

  private stopSweep(): void {
    if (this.sweepTimer) clearInterval(this.sweepTimer);
    this.sweepTimer = null;
    this.sweepMs = SWEEP_MS;
  }

  /** Times out requests past their deadlines and closes connections idle past their keep-alive. */
  private sweep(): void {
    const now = Date.now();
    for (const conn of [...this.busy]) {
      const call = conn.call;
      if (!call || call.finished) continue;
      if (call.reader.status === 0) {
        // The body's silence is counted from its head on, as undici counts it.
        if (call.headDeadlineMs > 0 && now >= call.headDeadlineMs)
          this.fail(
            call,
            new EngineRequestError('UND_ERR_HEADERS_TIMEOUT', 'the engine sent no response head in time'),
          );
        continue;
      }
      if (call.bodyTimeoutMs <= 0) continue;
      if (call.readSinceSweep || call.paused) {
        call.readSinceSweep = false;
        call.silentSinceMs = now;
      } else if (now - call.silentSinceMs >= call.bodyTimeoutMs)
        this.fail(call, new EngineRequestError('UND_ERR_BODY_TIMEOUT', 'the engine went silent mid-response'));
    }
    for (let i = this.idle.length - 1; i >= 0; i--) {
      const conn = this.idle[i]!;
      if (now - conn.idleSinceMs >= conn.keepAliveMs) {
        this.idle.splice(i, 1);
        this.kill(conn);
      }
    }
    if (this.busy.size === 0 && this.idle.length === 0) this.stopSweep();
    else if (this.busy.size === 0 && this.sweepMs < SWEEP_MS) {
      // Only keep-alive left to watch: the coarse period will do.
      this.stopSweep();
      this.armSweep(SWEEP_MS * 4);
    }
  }
}
