// The sim's simulated KV cache: a prefix cache of fixed-size token blocks
// with LRU eviction, as vLLM's automatic prefix caching keeps one, so that a
// fleet of sims rewards routing by what each one holds (a hit skips prefill
// time) and publishes the events the gateway's index reads. Separate from
// the server because it is a pure structure: tokens in, a cached count and
// events out; the server decides what the count costs in time and where the
// events go (ZeroMQ, HTTP).
//
// Rules, as vLLM's: only whole blocks are cached; a block is keyed by a hash
// chained over its parent's hash and its tokens, so a block matches only
// after the same prefix; a lookup matches leading blocks until the first
// miss; a prompt that is wholly cached still computes its last token (so
// cached ≤ prompt − 1). Eviction takes the least recently used block; a
// prompt's blocks are touched tail first, so a prefix outlives its tails.
import type { KvBlock, KvEvent } from '../../protocol/kv-events.js';

/** One cached block; `hash` is the 63-bit chain hash, as the decimal string the common shape carries. */
interface CachedBlock {
  readonly hash: bigint;
  readonly parent: bigint | null;
  readonly tokens: readonly number[];
}

/** What one prompt found and changed. */
export interface KvLookup {
  /** Prompt tokens served from the cache (a multiple of the block size, at most prompt − 1). */
  readonly cachedTokens: number;
  /** The events this lookup caused, in order (evictions, then the blocks it stored); empty = none. */
  readonly events: readonly KvEvent[];
}

const MASK_63 = (1n << 63n) - 1n;

/** FNV-1a, 64-bit, over the parent's hash and the tokens; cut to 63 bits so an int64 reader takes it too. */
export function blockChainHash(parent: bigint | null, tokens: readonly number[]): bigint {
  // Two 32-bit lanes rather than BigInt arithmetic per byte: this runs per block of every prompt.
  let lo = 0x811c9dc5;
  let hi = 0x050c5d1f;
  const fold = (v: number) => {
    for (let s = 0; s < 32; s += 8) {
      const b = (v >>> s) & 0xff;
      lo = Math.imul(lo ^ b, 0x01000193);
      hi = Math.imul(hi ^ b ^ (lo >>> 24), 0x01000193);
    }
  };
  if (parent !== null) {
    fold(Number(parent & 0xffffffffn));
    fold(Number(parent >> 32n));
  }
  for (const t of tokens) fold(t);
  return ((BigInt(hi >>> 0) << 32n) | BigInt(lo >>> 0)) & MASK_63;
}

export class SimKvCache {
  /** Insertion order is recency: the first entry is the least recently used. */
  private readonly blocks = new Map<bigint, CachedBlock>();

  constructor(
    readonly capacityBlocks: number,
    readonly blockSize: number,
  ) {}

  get size(): number {
    return this.blocks.size;
  }

  /** Looks the prompt up, stores its whole blocks, evicts what no longer fits. */
  admit(tokens: readonly number[]): KvLookup {
    const size = this.blockSize;
    const whole = Math.min(Math.floor(tokens.length / size), this.capacityBlocks);
    const chain: CachedBlock[] = [];
    let parent: bigint | null = null;
    let matched = 0;
    let matching = true;
    for (let i = 0; i < whole; i++) {
      const blockTokens = tokens.slice(i * size, (i + 1) * size);
      const hash = blockChainHash(parent, blockTokens);
      const found = this.blocks.get(hash);
      if (matching && found !== undefined) matched++;
      else matching = false;
      chain.push(found ?? { hash, parent, tokens: blockTokens });
      parent = hash;
    }
    const stored: CachedBlock[] = [];
    // Tail first, so the prompt's first block ends as the most recent.
    for (let i = chain.length - 1; i >= 0; i--) {
      const b = chain[i]!;
      if (!this.blocks.delete(b.hash)) stored.push(b);
      this.blocks.set(b.hash, b);
    }
    stored.reverse();
    const events: KvEvent[] = [];
    const evicted: string[] = [];
    for (const hash of this.blocks.keys()) {
      if (this.blocks.size - evicted.length <= this.capacityBlocks) break;
      evicted.push(hash.toString());
    }
    for (const h of evicted) this.blocks.delete(BigInt(h));
    if (evicted.length > 0) events.push({ kind: 'removed', hashes: evicted });
    events.push(...storedEvents(stored));
    return { cachedTokens: Math.min(matched * size, Math.max(0, tokens.length - 1)), events };
  }

  /** What the cache holds now, as events a new reader starts from: 'cleared', then every block after its parent. */
  snapshot(): KvEvent[] {
    const held = [...this.blocks.values()];
    const byHash = new Set(held.map((b) => b.hash));
    // Blocks whose parent is gone (evicted first) start their own run.
    const children = new Map<bigint, CachedBlock[]>();
    const roots: CachedBlock[] = [];
    for (const b of held) {
      if (b.parent !== null && byHash.has(b.parent)) {
        const list = children.get(b.parent) ?? [];
        list.push(b);
        children.set(b.parent, list);
      } else roots.push(b);
    }
    const ordered: CachedBlock[] = [];
    const stack = [...roots].reverse();
    while (stack.length > 0) {
      const b = stack.pop()!;
      ordered.push(b);
      for (const c of [...(children.get(b.hash) ?? [])].reverse()) stack.push(c);
    }
    return [{ kind: 'cleared' }, ...storedEvents(ordered)];
  }

  /** Drops everything (a reset); the caller publishes 'cleared'. */
  clear(): void {
    this.blocks.clear();
  }
}

/** Blocks in order as 'stored' events: one per run in which each block's parent is the one before it. */
function storedEvents(blocks: readonly CachedBlock[]): KvEvent[] {
  const events: KvEvent[] = [];
  let run: KvBlock[] = [];
  let runParent: bigint | null = null;
  let last: bigint | null = null;
  const flush = () => {
    if (run.length === 0) return;
    events.push(
      runParent === null
        ? { kind: 'stored', blocks: run }
        : { kind: 'stored', parent: runParent.toString(), blocks: run },
    );
    run = [];
  };
  for (const b of blocks) {
    if (run.length === 0 || b.parent !== last) {
      flush();
      runParent = b.parent;
    }
    run.push({ hash: b.hash.toString(), tokens: b.tokens });
    last = b.hash;
  }
  flush();
  return events;
}
