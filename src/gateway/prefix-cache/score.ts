// The prefix-cache choice: expected cached prefix tokens weighed against
// expected load, one pure function over a snapshot, so the policy is read
// and table-tested without an index or a socket. The chooser feeds it each
// candidate's load (pick.ts's expectedLoad, the score least-load compares)
// and the prompt tokens the index says the candidate holds.
//
// A replica's score is its expected load plus the prompt tokens it would
// have to prefill, converted to requests at `tokensPerRequest` uncached
// tokens per request of load; the lowest wins, ties at random. So a replica
// holding a conversation keeps it while the prefill it saves outweighs the
// queue it has over the others, and a hot prefix spills to the next replica
// once its holder is that much busier. With no hit anywhere (a new prompt,
// or no index) every candidate pays the same prefill and the choice is
// least-load's.

/** What the score knows of one candidate. */
export interface CacheCandidate {
  readonly id: string;
  /** Expected load in requests (expectedLoad), lower is better. */
  readonly load: number;
  /** Leading prompt tokens the replica holds cached; 0 = none (or unknown). */
  readonly cachedTokens: number;
}

/** Uncached prompt tokens weighed as one request of load, by default: see docs/prefix-cache.md. */
export const DEFAULT_CACHE_TOKENS_PER_REQUEST = 512;

/**
 * A candidate's score in requests, lower is better: load + (prompt −
 * cached) / tokensPerRequest. A cached count above the prompt (a stale
 * index) counts as the whole prompt; `tokensPerRequest` 0 or less weighs
 * the cache not at all (least-load).
 */
export function cacheScore(c: CacheCandidate, promptTokens: number, tokensPerRequest: number): number {
  if (tokensPerRequest <= 0) return c.load;
  const uncached = Math.max(0, promptTokens - Math.min(c.cachedTokens, promptTokens));
  return c.load + uncached / tokensPerRequest;
}

export interface CacheChoice<T> {
  readonly chosen: T;
  /** Every candidate's score, in the order given. */
  readonly scores: readonly number[];
  /** More than one candidate had the lowest score and one was drawn at random. */
  readonly tie: boolean;
}

/**
 * The candidate with the lowest cacheScore; among equals one at random
 * (`random` in [0, 1), injected so tests are deterministic). Undefined for
 * no candidates.
 */
export function pickByCache<T extends CacheCandidate>(
  candidates: readonly T[],
  promptTokens: number,
  tokensPerRequest: number,
  random: () => number,
): CacheChoice<T> | undefined {
  if (candidates.length === 0) return undefined;
  const scores = candidates.map((c) => cacheScore(c, promptTokens, tokensPerRequest));
  let best = Infinity;
  for (const s of scores) best = Math.min(best, s);
  const lowest = candidates.filter((_, i) => scores[i] === best);
  const chosen = lowest[Math.floor(random() * lowest.length) % lowest.length]!;
  return { chosen, scores, tie: lowest.length > 1 };
}
