// The block cutting and diffing that llama.cpp's /slots source and the
// builtin engine share. Guards against a holder's blocks drifting from its
// tokens (a partial block published, ids shared between holders) and against
// a diff that loses or repeats blocks, which would leave the gateway's index
// routing to prefixes an engine no longer holds.
import { describe, expect, it } from 'vitest';
import type { KvBlock, KvEvent } from './kv-events.js';
import { runBlocks, runDiff } from './kv-blocks.js';

const range = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);

/** Applies events to a holder's list of blocks as the index would, to check a diff lands on its target. */
function apply(held: readonly KvBlock[], events: readonly KvEvent[]): KvBlock[] {
  let out = [...held];
  for (const e of events) {
    if (e.kind === 'cleared') out = [];
    else if (e.kind === 'removed') out = out.filter((b) => !e.hashes.includes(b.hash));
    else {
      const at = e.parent === undefined ? 0 : out.findIndex((b) => b.hash === e.parent) + 1;
      expect(at, 'a stored run follows the last block kept').toBe(out.length);
      out.push(...e.blocks);
    }
  }
  return out;
}

describe('runBlocks', () => {
  it.each([
    { tokens: [], blockSize: 4, blocks: [] },
    { tokens: range(0, 3), blockSize: 4, blocks: [] },
    { tokens: range(0, 4), blockSize: 4, blocks: [range(0, 4)] },
    { tokens: range(0, 11), blockSize: 4, blocks: [range(0, 4), range(4, 4)] },
    { tokens: range(0, 3), blockSize: 1, blocks: [[0], [1], [2]] },
  ])('cuts $tokens.length tokens into whole blocks of $blockSize', ({ tokens, blockSize, blocks }) => {
    expect(runBlocks(0, tokens, blockSize).map((b) => b.tokens)).toEqual(blocks);
  });

  it('names a block by its holder, position and everything before it', () => {
    const a = runBlocks(0, range(0, 8), 4);
    expect(runBlocks(0, range(0, 8), 4), 'the same tokens in the same holder: the same ids').toEqual(a);
    expect(runBlocks(1, range(0, 4), 4)[0]!.hash, 'another holder: another block').not.toBe(a[0]!.hash);
    const b = runBlocks(0, [9, ...range(1, 7)], 4);
    expect(b[1]!.tokens, 'same tokens…').toEqual(a[1]!.tokens);
    expect(b[1]!.hash, '…after a different prefix: a different block').not.toBe(a[1]!.hash);
    expect(a[0]!.hash).toMatch(/^0:0:[0-9a-f]+$/);
    expect(a[1]!.hash).toMatch(/^0:1:[0-9a-f]+$/);
  });
});

describe('runDiff', () => {
  const base = runBlocks(3, range(0, 12), 4);
  const cases: { name: string; before: KvBlock[]; after: KvBlock[]; kinds: string[] }[] = [
    { name: 'nothing to nothing', before: [], after: [], kinds: [] },
    { name: 'equal runs', before: base, after: runBlocks(3, range(0, 14), 4), kinds: [] },
    { name: 'a first run', before: [], after: base, kinds: ['stored'] },
    { name: 'all dropped', before: base, after: [], kinds: ['removed'] },
    { name: 'shortened', before: base, after: base.slice(0, 1), kinds: ['removed'] },
    { name: 'extended', before: base.slice(0, 1), after: base, kinds: ['stored'] },
    {
      name: 'a new tail',
      before: base,
      after: runBlocks(3, [...range(0, 4), ...range(50, 8)], 4),
      kinds: ['removed', 'stored'],
    },
    { name: 'a new first block', before: base, after: runBlocks(3, range(100, 8), 4), kinds: ['removed', 'stored'] },
  ];
  it.each(cases)('$name', ({ before, after, kinds }) => {
    const events = runDiff(before, after);
    expect(events.map((e) => e.kind)).toEqual(kinds);
    expect(apply(before, events)).toEqual(after);
  });

  it('removes only what changed and chains what it stores to the last block kept', () => {
    const after = runBlocks(3, [...range(0, 8), 70, 71, 72, 73], 4);
    expect(runDiff(base, after)).toEqual([
      { kind: 'removed', hashes: [base[2]!.hash] },
      { kind: 'stored', parent: base[1]!.hash, blocks: [after[2]] },
    ]);
    expect(runDiff([], base)).toEqual([{ kind: 'stored', blocks: base }]);
  });
});
