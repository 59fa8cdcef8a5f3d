// What the builtin engine's KV cache holds, told as KV events so the
// gateway can route a prompt to the replica that already holds its prefix.
// Each sequence of the context keeps the tokens of its last request (prompt
// and reply) until the next request on it reuses or overwrites them, so the
// cache is exactly each sequence's tokens; when a sequence is handed back
// its tokens are cut into blocks (src/protocol/kv-blocks.ts, as llama.cpp's
// /slots are) and the difference from what it held before is published.
//
// Served as GET /kv-events exactly as the sim serves its simulated cache:
// JSON lines of KvEventBatch, each stream opening with a snapshot (a batch
// of 'cleared' then every block held, numbered as the last batch sent), so
// the gateway's http source reads both and a reconnect loses nothing.
// Separate from the runtime (node-llama-cpp) and the server (routes)
// because it is neither: a small state of blocks per sequence and its
// readers.
import type { ServerResponse } from 'node:http';
import { runBlocks, runDiff } from '../../protocol/kv-blocks.js';
import type { KvBlock, KvEvent, KvEventBatch } from '../../protocol/kv-events.js';

/** Tokens per block: vLLM's default, and what the gateway's other sources use; only whole blocks are told. */
export const BUILTIN_KV_BLOCK_SIZE = 16;

export class SequenceKvEvents {
  /** Blocks each sequence holds, by its index in the context; absent = none. */
  private readonly held = new Map<number, readonly KvBlock[]>();
  private seq = 0;
  private readonly streams = new Set<ServerResponse>();

  constructor(
    readonly blockSize: number = BUILTIN_KV_BLOCK_SIZE,
    private readonly nowMs: () => number = Date.now,
  ) {}

  /** Sequence `index` now holds `tokens` (from its start); publishes what changed, nothing when nothing did. */
  update(index: number, tokens: readonly number[]): void {
    const before = this.held.get(index) ?? [];
    const after = runBlocks(index, tokens, this.blockSize);
    const events = runDiff(before, after);
    if (after.length === 0) this.held.delete(index);
    else this.held.set(index, after);
    this.publish(events);
  }

  /** 'cleared', then each sequence's blocks as one stored run, in sequence order. */
  snapshot(): KvEvent[] {
    const events: KvEvent[] = [{ kind: 'cleared' }];
    for (const index of [...this.held.keys()].sort((a, b) => a - b))
      events.push({ kind: 'stored', blocks: this.held.get(index)! });
    return events;
  }

  /**
   * A new reader: the snapshot, then every batch, until the client goes away
   * or `signal` aborts (the engine stopping), when the stream is ended.
   */
  serve(res: ServerResponse, signal: AbortSignal): Promise<void> {
    res.writeHead(200, { 'content-type': 'application/x-ndjson', 'cache-control': 'no-cache' });
    res.write(`${JSON.stringify(this.batch(this.seq - 1, this.snapshot()))}\n`);
    this.streams.add(res);
    return new Promise((resolve) => {
      const done = () => {
        this.streams.delete(res);
        signal.removeEventListener('abort', done);
        if (!res.writableEnded) res.end();
        resolve();
      };
      if (signal.aborted) return done();
      signal.addEventListener('abort', done, { once: true });
      res.once('close', done);
    });
  }

  private publish(events: readonly KvEvent[]): void {
    if (events.length === 0) return;
    const batch = this.batch(this.seq++, events);
    if (this.streams.size === 0) return;
    const line = `${JSON.stringify(batch)}\n`;
    for (const res of this.streams) res.write(line);
  }

  private batch(seq: number, events: readonly KvEvent[]): KvEventBatch {
    return { seq, atMs: this.nowMs(), blockSize: this.blockSize, events };
  }
}
