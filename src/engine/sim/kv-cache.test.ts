import { describe, expect, it } from 'vitest';
import type { KvEvent } from '../../protocol/kv-events.js';
import { blockChainHash, SimKvCache } from './kv-cache.js';

const seq = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);

function storedHashes(events: readonly KvEvent[]): string[] {
  return events.flatMap((e) => (e.kind === 'stored' ? e.blocks.map((b) => b.hash) : []));
}

describe('the simulated KV cache', () => {
  it('misses a new prompt, then finds its whole blocks, computing at least the last token', () => {
    const cache = new SimKvCache(100, 4);
    const prompt = seq(1, 10); // two whole blocks and two tokens
    const first = cache.admit(prompt);
    expect(first.cachedTokens).toBe(0);
    expect(first.events).toHaveLength(1);
    expect(first.events[0]).toMatchObject({
      kind: 'stored',
      blocks: [{ tokens: [1, 2, 3, 4] }, { tokens: [5, 6, 7, 8] }],
    });
    expect(first.events[0]).not.toHaveProperty('parent');
    expect(cache.admit(prompt).cachedTokens).toBe(8);
    expect(cache.admit(prompt).events, 'a full hit stores nothing new').toEqual([]);
    // Exactly whole blocks: the last token is still computed.
    const whole = seq(1, 8);
    expect(cache.admit(whole).cachedTokens).toBe(7);
  });

  it('matches only the same prefix: one different token in block 1 ends the match there', () => {
    const cache = new SimKvCache(100, 4);
    cache.admit(seq(1, 12));
    const other = [...seq(1, 4), 99, ...seq(6, 7)];
    const found = cache.admit(other);
    expect(found.cachedTokens).toBe(4);
    const stored = found.events.find((e) => e.kind === 'stored');
    expect(stored, 'the new tail hangs off the shared first block').toMatchObject({
      parent: blockChainHash(null, [1, 2, 3, 4]).toString(),
    });
  });

  it('chains hashes over the parent, so the same tokens after another prefix are another block', () => {
    const a = blockChainHash(null, [1, 2, 3, 4]);
    expect(blockChainHash(a, [5, 6, 7, 8])).not.toBe(blockChainHash(null, [5, 6, 7, 8]));
    expect(blockChainHash(a, [5, 6, 7, 8])).toBe(blockChainHash(a, [5, 6, 7, 8]));
    expect(a < 1n << 63n, 'fits an int64 reader').toBe(true);
  });

  it('evicts the least recently used blocks, tails before their prefix, and says so', () => {
    const cache = new SimKvCache(4, 2);
    const a = cache.admit([1, 2, 3, 4, 5, 6]); // 3 blocks
    const b = cache.admit([7, 8, 9, 10]); // 2 blocks: one of a's must go
    expect(cache.size).toBe(4);
    const removed = b.events.find((e) => e.kind === 'removed');
    expect(removed, 'the evicted block is a tail of prompt a, not its first block').toEqual({
      kind: 'removed',
      hashes: [storedHashes(a.events)[2]],
    });
    expect(cache.admit([1, 2, 3, 4, 5, 6]).cachedTokens, "a's first two blocks are still there").toBe(4);
  });

  it('caps a prompt longer than the cache at the cache', () => {
    const cache = new SimKvCache(2, 2);
    const found = cache.admit(seq(1, 10));
    expect(storedHashes(found.events)).toHaveLength(2);
    expect(cache.size).toBe(2);
  });

  it('snapshots what it holds as cleared then stored runs, each parent before its children', () => {
    const cache = new SimKvCache(100, 2);
    cache.admit([1, 2, 3, 4]);
    cache.admit([1, 2, 5, 6]);
    const snap = cache.snapshot();
    expect(snap[0]).toEqual({ kind: 'cleared' });
    const seen = new Set<string>();
    for (const e of snap.slice(1)) {
      expect(e.kind).toBe('stored');
      if (e.kind !== 'stored') continue;
      if (e.parent !== undefined) expect(seen.has(e.parent), 'a parent comes before its child').toBe(true);
      for (const b of e.blocks) seen.add(b.hash);
    }
    expect(seen.size).toBe(3);
  });
});
