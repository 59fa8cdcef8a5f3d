// Prefix-cache routing's state in one gateway: the index, the engine event
// sources feeding it (one per ready replica that publishes, opened when the
// chooser first sees the replica and closed when it is gone), and the
// prompt tokenizer. The chooser asks it two things: prepare() before a
// choice (the one await: tokenising the prompt on an engine, cached) and
// view() during it (synchronous: each candidate's cached prefix tokens).
// Reconnects and resyncs are the sources' job (sources/index.ts); a gap
// reaches the index as a batch that opens with 'cleared'.
import type { Logger } from 'pino';
import type { KvEventsEndpoint } from '../../protocol/kv-events.js';
import type { RouterReplica } from '../ports/index.js';
import { KvIndex } from './index-store.js';
import { openKvSource, type KvSource, type KvSourceOptions, type KvSourceTarget } from './sources/index.js';
import { canTokenize, promptOf, PromptTokenizer, type PromptTokens } from './tokenizer.js';

/** A replica as this part reads it: with the endpoint its engine tells what it holds on, when it does. */
export type PublishingReplica = RouterReplica & { readonly kvEvents?: KvEventsEndpoint };

export interface CacheRoutingOptions {
  /** (replica, block) entries the index keeps at most. */
  readonly maxBlocks: number;
  /** Longest wait for an engine to tokenise a prompt, ms; past it the request is routed by the text-prefix hash. */
  readonly tokenizeTimeoutMs: number;
  /** Prompts kept tokenised. */
  readonly tokenCacheEntries: number;
  /** After a tokenizer fails, how long the model's requests skip it, ms. */
  readonly tokenizerBackoffMs: number;
  readonly now: () => number;
  readonly logger?: Logger;
  /** Opens a replica's event source; absent = openKvSource. Tests pass their own. */
  readonly openSource?: (target: KvSourceTarget, options: KvSourceOptions) => KvSource;
  readonly fetch?: typeof globalThis.fetch;
}

/** What a choice reads: the prompt's size and each candidate's cached prefix, in tokens. */
export interface CacheView {
  /** Tokens in the prompt; 0 when no replica holds anything (nothing was tokenised: every hit is 0). */
  readonly promptTokens: number;
  /** Cached leading tokens per candidate id; a candidate absent holds nothing the index knows of. */
  readonly cached: ReadonlyMap<string, number>;
}

const NOTHING: ReadonlyMap<string, number> = new Map();

/** Whether two event endpoints are the same (checked on every choice, so without JSON). */
function sameEndpoint(a: KvEventsEndpoint, b: KvEventsEndpoint): boolean {
  if (a === b) return true;
  if (a.kind === 'zmq' && b.kind === 'zmq')
    return a.endpoint === b.endpoint && a.replayEndpoint === b.replayEndpoint && a.topic === b.topic;
  if (a.kind === 'http' && b.kind === 'http') return a.path === b.path;
  if (a.kind === 'slots' && b.kind === 'slots') return a.blockSize === b.blockSize;
  return false;
}

export class CacheRouting {
  readonly index: KvIndex;
  private readonly tokenizer: PromptTokenizer;
  /** Open sources by replica id, with what they read (a change reopens). */
  private readonly sources = new Map<string, { source: KvSource; endpoint: string; kvEvents: KvEventsEndpoint }>();
  /** What prepare() found per request body: tokens, or null = no tokenizer answered (route by text). */
  private readonly prepared = new WeakMap<object, PromptTokens | null>();
  /** Until when (epoch ms) a model's tokenizer is skipped after a failure; absent = asked. */
  private readonly tokenizerDownUntil = new Map<string, number>();
  private readonly openSource: (target: KvSourceTarget, options: KvSourceOptions) => KvSource;

  constructor(private readonly options: CacheRoutingOptions) {
    this.index = new KvIndex(options.maxBlocks);
    this.tokenizer = new PromptTokenizer({
      timeoutMs: options.tokenizeTimeoutMs,
      entries: options.tokenCacheEntries,
      ...(options.fetch ? { fetch: options.fetch } : {}),
    });
    this.openSource = options.openSource ?? openKvSource;
  }

  /** The candidates whose engines publish what they hold. */
  publishing(candidates: readonly PublishingReplica[]): PublishingReplica[] {
    return candidates.filter((c) => c.kvEvents !== undefined);
  }

  /** Starts reading the events of every replica here that publishes and is not read yet (or now publishes elsewhere). */
  follow(replicas: readonly PublishingReplica[]): void {
    for (const r of replicas) {
      if (!r.kvEvents) continue;
      const open = this.sources.get(r.id);
      if (open && open.endpoint === r.endpoint && sameEndpoint(open.kvEvents, r.kvEvents)) continue;
      if (open) this.stop(r.id, open.source);
      const id = r.id;
      const source = this.openSource(
        {
          id,
          endpoint: r.endpoint,
          kvEvents: r.kvEvents,
          ...(r.engineSecret ? { engineSecret: r.engineSecret } : {}),
        },
        {
          onBatch: (batch) => {
            if (this.sources.get(id)?.source === source) this.index.apply(id, batch);
          },
          onStatus: (status) => this.options.logger?.debug({ replica: id, status }, 'KV event source'),
        },
      );
      this.sources.set(id, { source, endpoint: r.endpoint, kvEvents: r.kvEvents });
    }
  }

  /** Stops reading replicas not in `liveIds` and forgets what they held. */
  forget(liveIds: ReadonlySet<string>): void {
    for (const [id, open] of this.sources) if (!liveIds.has(id)) this.stop(id, open.source);
    for (const id of this.index.replicaIds()) if (!this.sources.has(id)) this.index.drop(id);
  }

  /** Replicas whose events are being read now. */
  followed(): string[] {
    return [...this.sources.keys()];
  }

  /**
   * Tokenises the request's prompt when a lookup will need it: some
   * candidate publishes and holds blocks, and the prompt is not cached.
   * Never throws: a tokenizer that fails or is slow leaves the request to
   * the text-prefix hash (view() answers undefined).
   */
  async prepare(model: string, candidates: readonly PublishingReplica[], body: Record<string, unknown>): Promise<void> {
    if (this.prepared.has(body)) return;
    const publishing = this.publishing(candidates);
    if (publishing.length === 0) return;
    this.follow(publishing);
    const prompt = promptOf(body);
    if (prompt === null) return;
    const sizes = this.index.blockSizes(publishing.map((c) => c.id));
    if (sizes.length === 0) return;
    const key = this.tokenizer.keyOf(model, prompt);
    const hit = this.tokenizer.cached(key, sizes);
    if (hit) return void this.prepared.set(body, hit);
    const target = publishing.find((c) => canTokenize(c.engine));
    const now = this.options.now();
    if (!target || (this.tokenizerDownUntil.get(model) ?? 0) > now) return void this.prepared.set(body, null);
    try {
      const tokens = await this.tokenizer.tokenize(
        key,
        prompt,
        {
          endpoint: target.endpoint,
          engine: target.engine!,
          servedName: target.servedNames?.[0] ?? model,
          ...(target.engineSecret ? { engineSecret: target.engineSecret } : {}),
        },
        sizes,
      );
      this.prepared.set(body, tokens);
    } catch (err) {
      this.tokenizerDownUntil.set(model, now + this.options.tokenizerBackoffMs);
      this.options.logger?.info(
        { model, replica: target.id, err: (err as Error).message },
        'the engine did not tokenise the prompt for prefix-cache routing; routing by the prompt text meanwhile',
      );
      this.prepared.set(body, null);
    }
  }

  /**
   * The cache as this choice sees it; undefined = no candidate publishes,
   * or the prompt could not be tokenised (the caller routes without it).
   */
  view(candidates: readonly PublishingReplica[], body: Record<string, unknown>): CacheView | undefined {
    const publishing = this.publishing(candidates);
    if (publishing.length === 0) return undefined;
    this.follow(publishing);
    const tokens = this.prepared.get(body);
    if (tokens === null) return undefined;
    const ids = publishing.map((c) => c.id);
    if (tokens === undefined) {
      // Not prepared: nothing to look up with, which is right only when nothing is held (a cold fleet, no prompt).
      return this.index.blockSizes(ids).length === 0 || promptOf(body) === null
        ? { promptTokens: 0, cached: NOTHING }
        : undefined;
    }
    return {
      promptTokens: tokens.count,
      cached: this.index.lookupBlocks((size) => tokens.blocks.get(size), ids),
    };
  }

  async close(): Promise<void> {
    const open = [...this.sources.values()];
    this.sources.clear();
    await Promise.allSettled(open.map((o) => o.source.close()));
  }

  private stop(id: string, source: KvSource): void {
    this.sources.delete(id);
    this.index.drop(id);
    source.close().catch((err: unknown) => {
      this.options.logger?.warn({ replica: id, err: (err as Error).message }, 'closing a KV event source failed');
    });
  }
}
