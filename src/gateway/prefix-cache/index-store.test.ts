import { describe, expect, it } from 'vitest';
import type { KvEvent, KvEventBatch } from '../../protocol/kv-events.js';
import { chainHash, promptChain, ROOT_CHAIN } from './chain-hash.js';
import { KvIndex } from './index-store.js';

const BS = 4;
/** Token ids 1..n, so a prompt is easy to cut by hand. */
const seq = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);

/** The blocks of `tokens` as an engine would store them, its ids `${tag}${i}`. */
function blocksOf(tokens: number[], tag: string, size = BS) {
  const out = [];
  for (let i = 0; i * size < tokens.length; i++)
    out.push({ hash: `${tag}${i}`, tokens: tokens.slice(i * size, (i + 1) * size) });
  return out;
}

function batch(seqNo: number, events: KvEvent[], blockSize = BS): KvEventBatch {
  return { seq: seqNo, blockSize, events };
}

describe('the chain hash', () => {
  it('depends on the parent, the tokens and their order', () => {
    const a = chainHash(ROOT_CHAIN, [1, 2, 3, 4]);
    expect(chainHash(ROOT_CHAIN, [1, 2, 3, 4])).toBe(a);
    expect(chainHash(ROOT_CHAIN, [2, 1, 3, 4]), 'order matters').not.toBe(a);
    expect(chainHash(a, [1, 2, 3, 4]), 'the parent matters').not.toBe(a);
    expect(chainHash(ROOT_CHAIN, [1, 2, 3]), 'a short block is not a prefix of a full one').not.toBe(a);
    expect(Number.isSafeInteger(a)).toBe(true);
  });

  it('tells apart token ids that differ only above 32 bits (the sim packs characters past 2^32)', () => {
    expect(chainHash(ROOT_CHAIN, [5])).not.toBe(chainHash(ROOT_CHAIN, [5 + 2 ** 32]));
    expect(chainHash(ROOT_CHAIN, [2 ** 52 + 7])).not.toBe(chainHash(ROOT_CHAIN, [2 ** 52 + 8]));
  });

  it('spreads three hundred thousand blocks without a collision', () => {
    const seen = new Set<number>();
    let parent = ROOT_CHAIN;
    for (let i = 0; i < 300_000; i++) {
      parent = chainHash(i % 1000 === 0 ? ROOT_CHAIN : parent, [i, i + 1, i + 2, i + 3]);
      seen.add(parent);
    }
    expect(seen.size).toBe(300_000);
  });

  it('cuts a prompt into full blocks and a short tail', () => {
    const { hashes, lengths } = promptChain(seq(1, 10), BS);
    expect(lengths).toEqual([4, 4, 2]);
    expect(hashes[1]).toBe(chainHash(chainHash(ROOT_CHAIN, [1, 2, 3, 4]), [5, 6, 7, 8]));
  });
});

describe('the prefix-cache index', () => {
  it('counts the prompt tokens each replica holds from the start, up to its first missing block', () => {
    const index = new KvIndex();
    const sys = seq(1, 12);
    index.apply('a', batch(0, [{ kind: 'stored', blocks: blocksOf(sys, 'a') }]));
    index.apply('b', batch(0, [{ kind: 'stored', blocks: blocksOf(sys.slice(0, 8), 'b') }]));
    const prompt = [...sys, 100, 101, 102];
    const hits = index.lookup(prompt, ['a', 'b', 'c']);
    expect(hits.get('a'), 'a holds all three system blocks').toBe(12);
    expect(hits.get('b'), 'b holds the first two').toBe(8);
    expect(hits.has('c'), 'a replica the index never heard of is absent').toBe(false);
    expect(index.size).toBe(5);
  });

  it('chains blocks stored later under their parent, as a second turn of a conversation is', () => {
    const index = new KvIndex();
    const turn1 = seq(1, 8);
    const turn2 = [...turn1, ...seq(50, 8)];
    index.apply('a', batch(0, [{ kind: 'stored', blocks: blocksOf(turn1, 'x') }]));
    // The engine stores only the new blocks, naming the last block it already had as their parent.
    index.apply('a', batch(1, [{ kind: 'stored', parent: 'x1', blocks: blocksOf(seq(50, 8), 'y') }]));
    expect(index.lookup(turn2, ['a']).get('a')).toBe(16);
    expect(index.lookup([...seq(1, 4), 999, 998, 997, 996], ['a']).get('a'), 'a different second block').toBe(4);
  });

  it('matches the same tokens cached by two engines with different block ids', () => {
    const index = new KvIndex();
    const p = seq(7, 8);
    index.apply('vllm', batch(0, [{ kind: 'stored', blocks: blocksOf(p, '1234567890123456789-') }]));
    index.apply('sim', batch(0, [{ kind: 'stored', blocks: blocksOf(p, 'sim') }]));
    const hits = index.lookup(p, ['vllm', 'sim']);
    expect([hits.get('vllm'), hits.get('sim')]).toEqual([8, 8]);
  });

  it('skips blocks whose parent it does not know, since no prompt could reach them', () => {
    const index = new KvIndex();
    const out = index.apply(
      'a',
      batch(0, [{ kind: 'stored', parent: 'never-seen', blocks: blocksOf(seq(1, 8), 'z') }]),
    );
    expect(out.orphans).toBe(2);
    expect(index.size).toBe(0);
  });

  it('drops what a removal names, by the engine id, and only on that replica', () => {
    const index = new KvIndex();
    const p = seq(1, 12);
    index.apply('a', batch(0, [{ kind: 'stored', blocks: blocksOf(p, 'a') }]));
    index.apply('b', batch(0, [{ kind: 'stored', blocks: blocksOf(p, 'b') }]));
    index.apply('a', batch(1, [{ kind: 'removed', hashes: ['a1', 'unknown'] }]));
    const hits = index.lookup(p, ['a', 'b']);
    expect(hits.get('a'), 'a lost its second block, so only the first counts').toBe(4);
    expect(hits.get('b')).toBe(12);
    expect(index.size).toBe(5);
  });

  it('forgets everything of a replica that cleared its cache', () => {
    const index = new KvIndex();
    index.apply('a', batch(0, [{ kind: 'stored', blocks: blocksOf(seq(1, 8), 'a') }]));
    index.apply('a', batch(1, [{ kind: 'cleared' }]));
    expect(index.lookup(seq(1, 8), ['a']).get('a')).toBe(0);
    expect(index.size).toBe(0);
  });

  it('drops a replica’s entries on a gap in its batches, then takes the batch that showed it', () => {
    // Guards against routing by blocks an engine evicted in events the gateway never saw.
    const index = new KvIndex();
    index.apply('a', batch(0, [{ kind: 'stored', blocks: blocksOf(seq(1, 8), 'a') }]));
    const out = index.apply('a', batch(5, [{ kind: 'stored', blocks: blocksOf(seq(100, 4), 'n') }]));
    expect(out.gap).toBe(true);
    expect(index.lookup(seq(1, 8), ['a']).get('a'), 'the old entries went').toBe(0);
    expect(index.lookup(seq(100, 4), ['a']).get('a'), 'the new batch was applied').toBe(4);
    expect(index.apply('a', batch(6, [])).gap).toBe(false);
  });

  it('starts a replica over when its block size changes (an engine restarted with other settings)', () => {
    const index = new KvIndex();
    index.apply('a', batch(0, [{ kind: 'stored', blocks: blocksOf(seq(1, 8), 'a') }]));
    index.apply('a', batch(1, [{ kind: 'stored', blocks: blocksOf(seq(1, 8), 'b', 8) }], 8));
    expect(index.size).toBe(1);
    expect(index.lookup(seq(1, 8), ['a']).get('a')).toBe(8);
  });

  it('forgets a replica that goes, and reuses nothing of it for a new one', () => {
    const index = new KvIndex();
    index.apply('a', batch(0, [{ kind: 'stored', blocks: blocksOf(seq(1, 8), 'a') }]));
    index.drop('a');
    index.apply('b', batch(0, []));
    expect(index.size).toBe(0);
    expect(index.replicaIds()).toEqual(['b']);
    expect(index.lookup(seq(1, 8), ['a', 'b'])).toEqual(new Map([['b', 0]]));
  });

  it('takes the next batch whatever its seq after a reset', () => {
    const index = new KvIndex();
    index.apply('a', batch(3, [{ kind: 'stored', blocks: blocksOf(seq(1, 4), 'a') }]));
    index.reset('a');
    expect(index.size).toBe(0);
    expect(index.apply('a', batch(0, [])).gap).toBe(false);
  });

  it('counts a block stored twice once, as the most recent', () => {
    const index = new KvIndex(3);
    index.apply('a', batch(0, [{ kind: 'stored', blocks: blocksOf(seq(1, 12), 'a') }]));
    // a0 stored again: a1 is now the oldest, and goes when a fourth block comes.
    index.apply('a', batch(1, [{ kind: 'stored', blocks: blocksOf(seq(1, 4), 'a') }]));
    expect(index.size).toBe(3);
    index.apply('a', batch(2, [{ kind: 'stored', blocks: blocksOf(seq(500, 4), 'q') }]));
    expect(index.size).toBe(3);
    expect(index.lookup(seq(1, 12), ['a']).get('a'), 'a1 was evicted, so only a0 counts').toBe(4);
  });

  it('stays within its cap, evicting from the replica that holds the most', () => {
    const index = new KvIndex(10);
    index.apply('small', batch(0, [{ kind: 'stored', blocks: blocksOf(seq(1, 8), 's') }]));
    for (let i = 0; i < 20; i++)
      index.apply('big', batch(i, [{ kind: 'stored', blocks: blocksOf(seq(1000 + i * 4, 4), `b${i}-`) }]));
    expect(index.size).toBe(10);
    expect(index.sizeOf('small'), 'the small replica kept its blocks').toBe(2);
    expect(index.sizeOf('big')).toBe(8);
    expect(index.lookup(seq(1, 8), ['small']).get('small')).toBe(8);
    const last = seq(1000 + 19 * 4, 4);
    expect(index.lookup(last, ['big']).get('big'), 'the newest block of the big one stays').toBe(4);
    expect(index.lookup(seq(1000, 4), ['big']).get('big'), 'its oldest went').toBe(0);
  });

  it('keeps a block held by two replicas when one removes it', () => {
    const index = new KvIndex();
    const p = seq(1, 4);
    for (const id of ['a', 'b', 'c']) index.apply(id, batch(0, [{ kind: 'stored', blocks: blocksOf(p, id) }]));
    index.apply('b', batch(1, [{ kind: 'removed', hashes: ['b0'] }]));
    const hits = index.lookup(p, ['a', 'b', 'c']);
    expect([hits.get('a'), hits.get('b'), hits.get('c')]).toEqual([4, 0, 4]);
    index.drop('a');
    expect(index.lookup(p, ['c']).get('c')).toBe(4);
  });

  it('keeps a block one replica holds under two ids (two llama.cpp slots) until both go', () => {
    const index = new KvIndex();
    const p = seq(1, 8);
    index.apply('a', batch(0, [{ kind: 'stored', blocks: blocksOf(p, 'slot0-') }]));
    index.apply('a', batch(1, [{ kind: 'stored', blocks: blocksOf(p, 'slot1-') }]));
    expect(index.size).toBe(4);
    index.apply('a', batch(2, [{ kind: 'removed', hashes: ['slot0-0', 'slot0-1'] }]));
    expect(index.lookup(p, ['a']).get('a'), 'slot 1 still holds both blocks').toBe(8);
    index.apply('a', batch(3, [{ kind: 'removed', hashes: ['slot1-1'] }]));
    expect(index.lookup(p, ['a']).get('a')).toBe(4);
    index.apply('a', batch(4, [{ kind: 'removed', hashes: ['slot1-0'] }]));
    expect(index.lookup(p, ['a']).get('a')).toBe(0);
    expect(index.size).toBe(0);
  });
});
