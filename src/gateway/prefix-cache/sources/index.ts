// KV event sources: one per way an engine tells what its prefix cache holds
// (vLLM's and SGLang's ZeroMQ publisher, llama.cpp's /slots polled, the
// builtin and sim engines' HTTP stream), each turning what its engine says
// into KvEventBatch. Separate from the index because this part is all I/O
// and wire formats (msgpack, ZeroMQ, reconnects), while the index is a pure
// structure fed by batches; the index opens a source per ready replica with
// openKvSource() and never sees which engine is behind it.
//
// The contract every source keeps, so the index never checks sequence
// numbers itself: batches reach onBatch in the order the engine made them,
// and each one follows the previous one delivered with nothing lost in
// between, OR it opens with a {kind: 'cleared'} event. So on a gap that
// cannot be repaired (no replay, replay too short, an engine restart that
// starts its numbers again, a reconnect, a poll that failed) the source
// delivers a batch starting with 'cleared', and the index drops everything
// it holds for the replica and rebuilds from what follows. onStatus reports
// the same moments for logs and metrics; the index needs none of it.
import type { KvEventBatch, KvEventsEndpoint } from '../../../protocol/kv-events.js';
import { openHttpKvSource } from './http.js';
import { openSlotsKvSource } from './slots.js';
import { openZmqKvSource } from './zmq.js';

/** The replica a source reads: RouterReplica has these fields. */
export interface KvSourceTarget {
  readonly id: string;
  /** The engine's base URL (http or slots sources append their path). */
  readonly endpoint: string;
  /** Sent as Authorization: Bearer to the engine's HTTP endpoints; absent = none. */
  readonly engineSecret?: string;
  readonly kvEvents: KvEventsEndpoint;
}

/** What a source says about itself, for logs and metrics. */
export type KvSourceStatus =
  /** Connected and reading. */
  | { readonly kind: 'live' }
  /** Not reading now (refused, dropped, a failed poll); it retries after `retryInMs`. */
  | { readonly kind: 'down'; readonly detail: string; readonly retryInMs: number }
  /**
   * Batches `from`..`to` (inclusive) were missed. `recovered`: replayed by
   * the engine, so nothing was lost; otherwise the next batch opens with
   * 'cleared'.
   */
  | { readonly kind: 'gap'; readonly from: number; readonly to: number; readonly recovered: boolean }
  /** The engine started its numbering again (a restart); the next batch opens with 'cleared'. */
  | { readonly kind: 'restarted' };

export interface KvSourceOptions {
  /** Every batch, in order (see the module comment for what a gap looks like). */
  readonly onBatch: (batch: KvEventBatch) => void;
  /** Absent = status is not reported. */
  readonly onStatus?: (status: KvSourceStatus) => void;
  /** First wait before reconnecting or polling again after a failure; doubles up to maxRetryMs. Absent = 250. */
  readonly retryMs?: number;
  /** Absent = 10000. */
  readonly maxRetryMs?: number;
  /** llama.cpp /slots: how often to poll; absent = 1000. */
  readonly pollMs?: number;
  /** ZeroMQ: how long to wait for a replay before giving up and clearing; absent = 2000. */
  readonly replayTimeoutMs?: number;
  /** Tokens per block when the engine's events do not say (vLLM's default is 16); absent = 16. */
  readonly blockSize?: number;
  /** HTTP client for the http and slots sources; absent = globalThis.fetch. */
  readonly fetch?: typeof globalThis.fetch;
}

/** A running source; it reconnects by itself until closed. */
export interface KvSource {
  readonly replicaId: string;
  /** Stops reading and releases sockets and timers; no callback runs after it resolves. */
  close(): Promise<void>;
}

/** The compiled form the sources read. */
export interface CompiledKvSourceOptions {
  readonly onBatch: (batch: KvEventBatch) => void;
  readonly onStatus: (status: KvSourceStatus) => void;
  readonly retryMs: number;
  readonly maxRetryMs: number;
  readonly pollMs: number;
  readonly replayTimeoutMs: number;
  readonly blockSize: number;
  readonly fetch: typeof globalThis.fetch;
}

export function compileKvSourceOptions(options: KvSourceOptions): CompiledKvSourceOptions {
  return {
    onBatch: options.onBatch,
    onStatus: options.onStatus ?? (() => {}),
    retryMs: options.retryMs ?? 250,
    maxRetryMs: options.maxRetryMs ?? 10_000,
    pollMs: options.pollMs ?? 1000,
    replayTimeoutMs: options.replayTimeoutMs ?? 2000,
    blockSize: options.blockSize ?? 16,
    fetch: options.fetch ?? globalThis.fetch,
  };
}

/** Opens the source the replica's kvEvents names. Never throws for an unreachable engine: it retries. */
export function openKvSource(target: KvSourceTarget, options: KvSourceOptions): KvSource {
  const o = compileKvSourceOptions(options);
  switch (target.kvEvents.kind) {
    case 'zmq':
      return openZmqKvSource(target.id, target.kvEvents, o);
    case 'http':
      return openHttpKvSource(target, target.kvEvents, o);
    case 'slots':
      return openSlotsKvSource(target, target.kvEvents, o);
  }
}

export type { KvBlock, KvEvent, KvEventBatch, KvEventsEndpoint } from '../../../protocol/kv-events.js';
