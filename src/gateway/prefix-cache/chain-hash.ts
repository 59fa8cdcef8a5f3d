// The index's own key for a cached block: a hash chained over token ids,
// the parent block's chain hash first, then the block's tokens. Engines hash
// their blocks each their own way (vLLM's sha256 or builtin hash, SGLang's,
// none at all for llama.cpp), so the index cannot compare their ids; the
// same tokens after the same prefix give the same chain hash whichever
// engine cached them, and a lookup computes it from the prompt alone.
// Separate from the index so lookups and tests can hash without one.

/** The chain hash of the empty prefix: the parent of a prompt's first block. */
export const ROOT_CHAIN = 0;

const TWO_32 = 2 ** 32;
const SEED_A = 0xdeadbeef;
const SEED_B = 0x41c6ce57;

/**
 * The chain hash of one block after `parent` (ROOT_CHAIN for the first):
 * 53 bits, a safe integer, so it is a Map key without a string. Token ids
 * up to 2^53 are hashed whole (the sim packs characters into ids above
 * 2^32). Collisions are possible but rare (about n²/2^54 for n blocks: one
 * in fifty thousand at a million blocks); one only misjudges a hit, never
 * sends a request wrong.
 */
export function chainHash(parent: number, tokens: readonly number[], from = 0, to = tokens.length): number {
  let h1 = SEED_A ^ (parent >>> 0);
  let h2 = SEED_B ^ (Math.floor(parent / TWO_32) >>> 0);
  for (let i = from; i < to; i++) {
    const t = tokens[i]!;
    const lo = t >>> 0;
    h1 = Math.imul(h1 ^ lo, 2654435761);
    h2 = Math.imul(h2 ^ lo, 1597334677);
    if (t >= TWO_32 || t < 0) {
      const hi = Math.floor(t / TWO_32) >>> 0;
      h1 = Math.imul(h1 ^ hi, 2654435761);
      h2 = Math.imul(h2 ^ hi, 1597334677);
    }
  }
  // The block's length goes in too: a short last block is not a prefix of a full one.
  h1 = Math.imul(h1 ^ (to - from), 2654435761);
  h2 = Math.imul(h2 ^ (to - from), 1597334677);
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507);
  h1 ^= Math.imul(h2 ^ (h2 >>> 13), 3266489909);
  h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507);
  h2 ^= Math.imul(h1 ^ (h1 >>> 13), 3266489909);
  return 2097152 * (h2 & 2097151) + (h1 >>> 0);
}

/**
 * The chain hashes of a prompt cut into blocks of `blockSize` tokens, in
 * order, with each block's length: every full block, then the short tail
 * when there is one (an engine caches a short last block only where it
 * caches partial blocks at all; the lookup asks, it costs one probe).
 */
export function promptChain(tokens: readonly number[], blockSize: number): { hashes: number[]; lengths: number[] } {
  const hashes: number[] = [];
  const lengths: number[] = [];
  let parent = ROOT_CHAIN;
  for (let from = 0; from < tokens.length; from += blockSize) {
    const to = Math.min(tokens.length, from + blockSize);
    parent = chainHash(parent, tokens, from, to);
    hashes.push(parent);
    lengths.push(to - from);
  }
  return { hashes, lengths };
}
