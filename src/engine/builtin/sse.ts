// Server-sent events in OpenAI's framing, as the builtin engine streams them.
// Its own module because how often the engine writes is a throughput
// decision, not an HTTP detail: each write is a syscall and, for the reader,
// a wakeup, and on a small (often virtual) machine those wakeups compete
// with llama.cpp's threads for the same cores. Measured on two vCPUs, one
// write per token made a 64-token stream about 30% slower than the same
// generation answered whole; coalescing writes to one per 4 ms brought it
// within 10%.
import type { ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import { clearTimeout, setImmediate, setTimeout } from 'node:timers';

/** Without --stream-interval-ms: at most one write per this many ms once a stream has started. */
export const DEFAULT_STREAM_INTERVAL_MS = 4;

/** Runs `fn` after `ms` (0: on the next turn of the event loop) and returns how to cancel it; tests pass their own. */
export type Schedule = (ms: number, fn: () => void) => () => void;

const eventLoop: Schedule = (ms, fn) => {
  if (ms <= 0) {
    setImmediate(fn);
    // An immediate that runs after done() finds the stream ended and writes nothing.
    return () => undefined;
  }
  const timer = setTimeout(fn, ms);
  return () => clearTimeout(timer);
};

/**
 * Headers (and any opening chunks) go out with the first event, not before,
 * so that a request refused before its first token still gets a plain JSON
 * error with a real status. The first event is written on the next turn of
 * the event loop: node-llama-cpp asks for the next token only after our
 * per-token callback returns, so writing inside it would add the socket's
 * cost to every token, while writing afterwards overlaps it with the next
 * token's computation. Later events wait until `intervalMs` has passed since
 * the last write and go out together; 0 writes every event on the next turn.
 * The end is written at once.
 */
export class SseWriter {
  private started = false;
  private pending: string[] = [];
  /** Cancels the write that is due; null = none is. */
  private scheduled: (() => void) | null = null;
  /** When the last write went out (ms, from `now`); -Infinity before the first. */
  private lastWriteMs = -Infinity;

  constructor(
    private readonly res: ServerResponse,
    private readonly opening: () => object[],
    private readonly intervalMs: number = DEFAULT_STREAM_INTERVAL_MS,
    private readonly now: () => number = () => performance.now(),
    private readonly schedule: Schedule = eventLoop,
  ) {}

  send(event: object): void {
    this.pending.push(`data: ${JSON.stringify(event)}\n\n`);
    if (this.scheduled !== null) return;
    this.scheduled = this.schedule(Math.max(0, this.lastWriteMs + this.intervalMs - this.now()), () => this.flush());
  }

  done(): void {
    this.scheduled?.();
    this.flush();
    this.res.end('data: [DONE]\n\n');
  }

  private flush(): void {
    this.scheduled = null;
    if (this.res.destroyed || this.res.writableEnded) return;
    if (!this.started) {
      this.started = true;
      this.res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
      this.pending.unshift(...this.opening().map((event) => `data: ${JSON.stringify(event)}\n\n`));
    }
    if (this.pending.length === 0) return;
    this.res.write(this.pending.join(''));
    this.pending = [];
    this.lastWriteMs = this.now();
  }
}
