// The relay of an answer the client asked for whole (no `stream`): held
// until its end and written with its headers in one write, a large one
// (past WHOLE_ANSWER_SLICE) in slices as it comes. Apart from the stream
// relay (RelayHandler, relay.ts) so that a whole answer makes none of a
// stream's objects (the SSE splitter, the scheduled flush) and
// runs none of its branches: in bench/router.mjs, whose router relays
// streams before it counts whole answers, the router's CPU per whole answer
// fell from 1.62-1.68x the bare proxy's to 1.43-1.53x with it, with a third
// less time collecting garbage (bench/README.md says where it did not show).
// A non-stream request that an engine answers as a stream anyway is held
// whole too: its bytes arrive as sent, at the end.
import type { IncomingHttpHeaders } from 'node:http';
import type { Dispatcher } from 'undici';
import { AttemptRelay, describeNetError, endWhole, joined, passHeaders, WHOLE_ANSWER_SLICE } from './relay.js';

export class WholeAnswerRelay extends AttemptRelay {
  private readonly out: Record<string, string> = {};
  private pending: Buffer[] = [];
  /** Bytes held since the last write. */
  private pendingBytes = 0;

  onResponseStart(_controller: Dispatcher.DispatchController, statusCode: number, headers: IncomingHttpHeaders): void {
    if (!this.takeStatus(statusCode)) return;
    passHeaders(headers, this.out);
  }

  onResponseData(_controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.retryReason !== null || this.target.clientGone) return;
    this.tail.push(chunk);
    this.pending.push(chunk);
    this.pendingBytes += chunk.length;
    if (this.pendingBytes < WHOLE_ANSWER_SLICE) return;
    // A large answer (embeddings of a long batch) goes out in slices: memory bounded, the client paced.
    this.pendingBytes = 0;
    if (!this.started) this.begin();
    this.flush();
  }

  onResponseEnd(): void {
    if (this.retryReason !== null) return this.settle({ kind: 'retry', reason: this.retryReason });
    if (this.target.clientGone) {
      this.hooks.onAnswered(0, this.tail, 0);
      return this.settle({ kind: 'done', status: 0 });
    }
    const res = this.target.res;
    if (!this.started) {
      const body = joined(this.pending);
      this.pending = [];
      this.begin();
      endWhole(res, body);
    } else {
      this.flush();
      res.end();
    }
    this.settle({ kind: 'done', status: this.status });
    this.hooks.onAnswered(this.status, this.tail, 0);
  }

  onResponseError(_controller: Dispatcher.DispatchController | undefined, err: Error): void {
    if (this.settledEarly(err)) return;
    // Slices went out, so the status and length did: what arrived is written, and the cut connection says the rest never came.
    this.flush();
    this.hooks.onBroken(describeNetError(err));
    const { status } = this.hooks.brokenCode();
    this.target.res.destroy();
    this.hooks.onAnswered(status, this.tail, 0);
    this.settle({ kind: 'done', status });
  }

  private begin(): void {
    this.started = true;
    this.hooks.onFirstByte();
    this.target.res.writeHead(this.status, this.out);
  }

  private flush(): void {
    const res = this.target.res;
    if (this.pending.length === 0 || res.destroyed) return;
    const data = joined(this.pending);
    this.pending = [];
    this.writePaced(data);
  }
}
