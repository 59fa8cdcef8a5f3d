// Cutting a run of cached tokens into KV blocks, and the events between two
// states of one run: for the engines that publish no events of their own and
// whose cache llmgw therefore describes itself (llama.cpp's slots, polled by
// the gateway; the builtin engine's sequences, published by the engine).
// Pure and shared by both, so the two describe a cache the same way; in
// src/protocol because the engine may not import the gateway.
//
// A run is whatever one cache holder keeps (a llama.cpp slot, a builtin
// sequence): its tokens from the start. Block ids carry the holder's id, the
// block's position and a chain hash over the tokens, so the same prefix held
// by two holders is two blocks (each keeps its own copy) and a removal names
// exactly one.
import type { KvBlock, KvEvent } from './kv-events.js';

/** 32-bit FNV-1a over the parent's hash and a block's tokens. */
function chainHash(parent: number, tokens: readonly number[]): number {
  let h = 0x811c9dc5 ^ parent;
  for (const t of tokens) {
    for (let s = 0; s < 32; s += 8) {
      h ^= (t >>> s) & 0xff;
      h = Math.imul(h, 0x01000193);
    }
  }
  return h >>> 0;
}

/**
 * A holder's tokens as whole blocks of `blockSize` (a partial last block is
 * left out: it cannot be matched block for block), each with an id unique
 * among the engine's holders. No tokens, or fewer than one block: no blocks.
 */
export function runBlocks(holderId: number, tokens: readonly number[], blockSize: number): KvBlock[] {
  const blocks: KvBlock[] = [];
  let parent = 0;
  for (let i = 0; i + blockSize <= tokens.length; i += blockSize) {
    const chunk = tokens.slice(i, i + blockSize);
    parent = chainHash(parent, chunk);
    blocks.push({ hash: `${holderId}:${i / blockSize}:${parent.toString(16)}`, tokens: chunk });
  }
  return blocks;
}

/**
 * The events that turn `before` into `after` for one holder: the leading
 * blocks both share stay, the rest of `before` is removed and the rest of
 * `after` stored, chained to the last block kept. Equal runs: no events.
 */
export function runDiff(before: readonly KvBlock[], after: readonly KvBlock[]): KvEvent[] {
  let same = 0;
  while (same < before.length && same < after.length && before[same]!.hash === after[same]!.hash) same++;
  const events: KvEvent[] = [];
  if (same < before.length) events.push({ kind: 'removed', hashes: before.slice(same).map((b) => b.hash) });
  if (same < after.length) {
    const blocks = after.slice(same);
    events.push(same > 0 ? { kind: 'stored', parent: after[same - 1]!.hash, blocks } : { kind: 'stored', blocks });
  }
  return events;
}
