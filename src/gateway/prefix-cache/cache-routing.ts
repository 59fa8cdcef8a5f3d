// Prefix-cache routing's state in one gateway: the index, the engine event
// sources feeding it (one per ready replica that publishes, opened when the
// chooser first sees the replica and closed when it is gone), and the
// prompt tokenizer. The chooser asks it one thing, synchronously: view(),
// each candidate's cached prefix tokens, from the longest leading part of
// the prompt already tokenised; tokenising this prompt on an engine goes on
// in the background, so a choice never waits for it (tokenizer.ts).
// Reconnects and resyncs are the sources' job (sources/index.ts); a gap
// reaches the index as a batch that opens with 'cleared'.
import type { Logger } from 'pino';
import type { KvEventsEndpoint } from '../../protocol/kv-events.js';
import type { RouterReplica } from '../ports/index.js';
import { KvIndex } from './index-store.js';
import { openKvSource, type KvSource, type KvSourceOptions, type KvSourceTarget } from './sources/index.js';
import { canTokenize, promptOf, PromptTokenizer, type Prompt } from './tokenizer.js';

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
  /** Background tokenisations at once, at most; more are skipped (the next request asks again). */
  readonly maxTokenizing: number;
  readonly now: () => number;
  /** Uniform in [0, 1): which publishing replica tokenises. */
  readonly random: () => number;
  readonly logger?: Logger;
  /** Opens a replica's event source; absent = openKvSource. Tests pass their own. */
  readonly openSource?: (target: KvSourceTarget, options: KvSourceOptions) => KvSource;
  readonly fetch?: typeof globalThis.fetch;
}

/** What a choice reads: the prompt's size and each candidate's cached prefix, in tokens. */
export interface CacheView {
  /**
   * Tokens in the prompt: the tokenised part's count, the rest estimated
   * from its characters; 0 when nothing was looked up (every hit is 0).
   */
  readonly promptTokens: number;
  /** Cached leading tokens per candidate id; a candidate absent holds nothing the index knows of. */
  readonly cached: ReadonlyMap<string, number>;
}

const NOTHING: ReadonlyMap<string, number> = new Map();

/** The block size assumed before any engine has said its own: vLLM's default, and the sim's. */
const USUAL_BLOCK_SIZES: readonly number[] = [16];

/** Characters per token for the part of a prompt not yet tokenised: English's average. */
const CHARS_PER_TOKEN = 4;

/** An estimate of the tokens in the messages after the first `upTo` + 1 (their text's characters / 4). */
function restTokens(prompt: Prompt, upTo: number): number {
  if (!('messages' in prompt)) return 0;
  let chars = 0;
  for (let i = upTo + 1; i < prompt.messages.length; i++) {
    const content = (prompt.messages[i] as { content?: unknown } | null)?.content;
    if (typeof content === 'string') chars += content.length;
    else if (Array.isArray(content))
      for (const part of content) {
        const text = (part as { text?: unknown } | null)?.text;
        if (typeof text === 'string') chars += text.length;
      }
  }
  return Math.ceil(chars / CHARS_PER_TOKEN);
}

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
  /** Cache keys being tokenised now. */
  private readonly tokenizing = new Set<string>();
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
   * The cache as this choice sees it. Undefined = no candidate publishes
   * (the caller routes as it would without the index), or nothing of this
   * prompt has been tokenised yet (the caller routes by the text-prefix
   * hash; the prompt is being tokenised for the next time). No prompt (an
   * embedding), or no block size known yet (no event has come), is a view
   * with no hit anywhere: least-load.
   */
  view(model: string, candidates: readonly PublishingReplica[], body: Record<string, unknown>): CacheView | undefined {
    const publishing = this.publishing(candidates);
    if (publishing.length === 0) return undefined;
    this.follow(publishing);
    const prompt = promptOf(body);
    if (prompt === null) return { promptTokens: 0, cached: NOTHING };
    const ids = publishing.map((c) => c.id);
    const sizes = this.index.blockSizes(ids);
    const keys = this.tokenizer.keysOf(model, prompt);
    const found = sizes.length === 0 ? undefined : this.tokenizer.longest(keys, sizes);
    // Before any engine has said its block size (the first requests), learn with the usual one meanwhile.
    this.learn(model, prompt, keys, found?.at ?? -1, publishing, sizes.length > 0 ? sizes : USUAL_BLOCK_SIZES);
    if (sizes.length === 0) return { promptTokens: 0, cached: NOTHING };
    if (!found) return undefined;
    const tokens = found.tokens;
    return {
      promptTokens: tokens.count + restTokens(prompt, found.at),
      cached: this.index.lookupBlocks((size) => tokens.blocks.get(size), ids),
    };
  }

  /**
   * Tokenises in the background what the next choice will want: this whole
   * prompt (the next turn of the conversation starts with it) and, when
   * unknown, its first message alone (a system prompt other conversations
   * share). Skipped while the model's tokenizer is backing off, and when
   * enough calls are out already.
   */
  private learn(
    model: string,
    prompt: Prompt,
    keys: readonly string[],
    known: number,
    publishing: readonly PublishingReplica[],
    sizes: readonly number[],
  ): void {
    const last = keys.length - 1;
    const wanted: number[] = [];
    if (known < last) wanted.push(last);
    if (last > 0 && known < 0) wanted.push(0);
    if (wanted.length === 0) return;
    const now = this.options.now();
    if ((this.tokenizerDownUntil.get(model) ?? 0) > now) return;
    const able = publishing.filter((c) => canTokenize(c.engine));
    if (able.length === 0) return;
    for (const k of wanted) {
      const key = keys[k]!;
      if (this.tokenizing.has(key) || this.tokenizing.size >= this.options.maxTokenizing) continue;
      const target = able[Math.floor(this.options.random() * able.length) % able.length]!;
      const part: Prompt = 'messages' in prompt ? { messages: prompt.messages.slice(0, k + 1) } : prompt;
      this.tokenizing.add(key);
      this.tokenizer
        .tokenize(
          key,
          part,
          {
            endpoint: target.endpoint,
            engine: target.engine!,
            servedName: target.servedNames?.[0] ?? model,
            ...(target.engineSecret ? { engineSecret: target.engineSecret } : {}),
          },
          sizes,
        )
        .catch((err: unknown) => {
          this.tokenizerDownUntil.set(model, this.options.now() + this.options.tokenizerBackoffMs);
          this.options.logger?.info(
            { model, replica: target.id, err: (err as Error).message },
            'the engine did not tokenise a prompt for prefix-cache routing; routing by the prompt text meanwhile',
          );
        })
        .finally(() => this.tokenizing.delete(key));
    }
  }

  /** Tokenisations under way (the background calls learn() made), for tests and shutdown. */
  async settled(): Promise<void> {
    while (this.tokenizing.size > 0) await new Promise((resolve) => setTimeout(resolve, 1));
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
