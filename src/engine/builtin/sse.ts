// Server-sent events in OpenAI's framing, as the builtin engine streams them.
// Its own module because how often the engine writes is a throughput
// decision, not an HTTP detail: each write is a syscall and, for the reader,
// a wakeup, and on a small (often virtual) machine those wakeups compete
// with llama.cpp's threads for the same cores. Measured on two vCPUs, one
// write per token made a 64-token stream about 30% slower than the same
// generation answered whole; coalescing writes to one per 4 ms brought it
// within 10%, and one per 16 ms (a frame at 60 Hz, as often as a reader's
// screen changes) within 5%: a loopback write there costs about 160 µs and
// wakes the reader, which on `llmgw up` is the router on the same cores.
// With several streams at once a fixed interval per stream multiplies the
// writes again (8 streams: one write per 1.5 tokens at 4 ms), so the
// interval is the engine's, shared by the streams it is writing.
import type { ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import { clearTimeout, setImmediate, setTimeout } from 'node:timers';

/**
 * Without --stream-interval-ms: the engine writes about once per this many
 * ms, however many streams it serves. Tokens slower than 62 a second (a real
 * model's on a CPU) are written as they come.
 */
export const DEFAULT_STREAM_INTERVAL_MS = 16;

/** Most ms a stream waits between writes for the others' sake (unless the interval alone is longer): 25 updates a second still read as streaming. */
export const MAX_SHARED_STREAM_INTERVAL_MS = 40;

/**
 * The engine's write budget, shared by the streams it is writing: with k of
 * them each waits k intervals between writes, so the engine as a whole
 * writes about once per interval, never holding a stream more than
 * MAX_SHARED_STREAM_INTERVAL_MS (or the interval, if longer). Tokens that
 * come slower than that (a real model's usually do) are written as they come.
 */
export class StreamPacer {
  private streaming = 0;

  /** `intervalMs` 0: no coalescing at all, every event on the next turn. */
  constructor(readonly intervalMs: number = DEFAULT_STREAM_INTERVAL_MS) {}

  /** How long one stream waits between writes now. */
  streamIntervalMs(): number {
    if (this.intervalMs <= 0) return 0;
    return Math.min(
      Math.max(this.intervalMs, MAX_SHARED_STREAM_INTERVAL_MS),
      this.intervalMs * Math.max(1, this.streaming),
    );
  }

  /** Counts a stream as writing until the returned function is called (more calls do nothing). */
  join(): () => void {
    this.streaming++;
    let left = false;
    return () => {
      if (left) return;
      left = true;
      this.streaming--;
    };
  }
}

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
 * token's computation. Later events wait until the pacer's interval has
 * passed since the last write and go out together; an interval of 0 writes
 * every event on the next turn. The end is written at once. The stream
 * counts on the pacer from its first event until its end or its client
 * going away.
 */
export class SseWriter {
  private started = false;
  private pending: string[] = [];
  /** Cancels the write that is due; null = none is. */
  private scheduled: (() => void) | null = null;
  /** When the last write went out (ms, from `now`); -Infinity before the first. */
  private lastWriteMs = -Infinity;
  /** Takes this stream off the pacer; null until the first event. */
  private leave: (() => void) | null = null;

  constructor(
    private readonly res: ServerResponse,
    private readonly opening: () => object[],
    private readonly pacer: StreamPacer,
    private readonly now: () => number = () => performance.now(),
    private readonly schedule: Schedule = eventLoop,
  ) {}

  send(event: object): void {
    this.sendJson(JSON.stringify(event));
  }

  /** An event already serialised, as jsonTemplate makes them. */
  sendJson(json: string): void {
    this.pending.push(`data: ${json}\n\n`);
    // A client that goes away ends the stream without done(); one already
    // gone (its 'close' has been and will not come again) is never counted.
    if (this.leave === null && !this.res.destroyed) {
      this.leave = this.pacer.join();
      this.res.once('close', this.leave);
    }
    if (this.scheduled !== null) return;
    this.scheduled = this.schedule(Math.max(0, this.lastWriteMs + this.pacer.streamIntervalMs() - this.now()), () =>
      this.flush(),
    );
  }

  done(): void {
    this.scheduled?.();
    this.flush();
    this.res.end('data: [DONE]\n\n');
    this.leave?.();
  }

  private flush(): void {
    this.scheduled = null;
    if (this.res.destroyed || this.res.writableEnded) return;
    if (!this.started) {
      this.started = true;
      this.res.writeHead(200, {
        'content-type': 'text/event-stream',
        'cache-control': 'no-cache',
        connection: 'keep-alive',
      });
      this.pending.unshift(...this.opening().map((event) => `data: ${JSON.stringify(event)}\n\n`));
    }
    if (this.pending.length === 0) return;
    this.res.write(this.pending.join(''));
    this.pending = [];
    this.lastWriteMs = this.now();
  }
}

/**
 * A JSON event with one string field that changes per token, serialised
 * once with a hole where that field goes: each token then costs one
 * JSON.stringify of its text instead of building and serialising the whole
 * chunk. That work sits between a token and llama.cpp's next step, so on one
 * stream it delays every token. The text is the same as
 * JSON.stringify(make(value)).
 */
export function jsonTemplate(make: (value: string) => object): (value: string) => string {
  const hole = JSON.stringify('\u0000llmgw-template-hole\u0000');
  const json = JSON.stringify(make(JSON.parse(hole) as string));
  const at = json.indexOf(hole);
  // The hole is found once or the template is not used: never a wrong event.
  if (at < 0 || json.lastIndexOf(hole) !== at) return (value) => JSON.stringify(make(value));
  const before = json.slice(0, at);
  const after = json.slice(at + hole.length);
  return (value) => before + JSON.stringify(value) + after;
}
