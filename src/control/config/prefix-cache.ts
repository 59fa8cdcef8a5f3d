// The keys of prefix-cache routing (docs/prefix-cache.md) and how they
// compile to the router's settings: how much an uncached prompt token
// weighs against load, and the bounds on the index, the prompt cache and
// the wait for an engine's tokenizer. Apart from index.ts so the feature's
// keys read together; index.ts spreads them into the one schema, and their
// defaults are the router's own (ROUTER_DEFAULTS), so the two cannot drift.
import { z } from 'zod';
import { durationSchema } from '../../validation/durations.js';
import { ROUTER_DEFAULTS } from '../../gateway/core/options.js';
import { formatDurationMs, parseDurationMs } from '../../units/index.js';

/** Defaults of the prefix-cache keys, as an operator would write them. */
export const PREFIX_CACHE_DEFAULTS = Object.freeze({
  prefix_cache_tokens_per_request: ROUTER_DEFAULTS.cacheTokensPerRequest,
  prefix_cache_max_blocks: ROUTER_DEFAULTS.cacheMaxBlocks,
  prefix_cache_prompts: ROUTER_DEFAULTS.tokenCacheEntries,
  prefix_cache_tokenize_timeout: formatDurationMs(ROUTER_DEFAULTS.tokenizeTimeoutMs),
});

/** A whole number from `min`, as a number (file) or text (env, flag). */
function whole(min: 0 | 1) {
  return z.union([
    z.number().int().min(min).max(1e12),
    z.string().regex(min === 0 ? /^\d{1,12}$/ : /^[1-9]\d{0,11}$/, `want a whole number, ${min} or more`),
  ]);
}

export const PREFIX_CACHE_OPTIONS = {
  /**
   * Uncached prompt tokens weighed as one request of load when choosing a
   * replica: lower follows the cache harder, higher follows load. 0 = the
   * cache is not weighed (the choice is least-load's).
   */
  prefix_cache_tokens_per_request: whole(0).default(PREFIX_CACHE_DEFAULTS.prefix_cache_tokens_per_request),
  /** Most (replica, block) entries the gateway's index keeps, each 100 to 130 bytes of heap. At least 1. */
  prefix_cache_max_blocks: whole(1).default(PREFIX_CACHE_DEFAULTS.prefix_cache_max_blocks),
  /** Most prompts kept tokenised (as chain hashes), for the next turn of a conversation. At least 1. */
  prefix_cache_prompts: whole(1).default(PREFIX_CACHE_DEFAULTS.prefix_cache_prompts),
  /** Longest wait for an engine's /tokenize (in the background; a choice never waits for it). More than 0. */
  prefix_cache_tokenize_timeout: durationSchema({ like: '500ms or 2s', aboveZero: true }).default(
    PREFIX_CACHE_DEFAULTS.prefix_cache_tokenize_timeout,
  ),
};

/** The router's prefix-cache settings (RouterSettings' names), as the client listener passes them on. */
export interface PrefixCacheSettings {
  readonly cacheTokensPerRequest: number;
  readonly cacheMaxBlocks: number;
  readonly tokenCacheEntries: number;
  readonly tokenizeTimeoutMs: number;
}

interface PrefixCacheInput {
  prefix_cache_tokens_per_request: number | string;
  prefix_cache_max_blocks: number | string;
  prefix_cache_prompts: number | string;
  prefix_cache_tokenize_timeout: string;
}

/** The keys, already checked by the schema, as router settings. */
export function compilePrefixCache(o: PrefixCacheInput): PrefixCacheSettings {
  return Object.freeze({
    cacheTokensPerRequest: Number(o.prefix_cache_tokens_per_request),
    cacheMaxBlocks: Number(o.prefix_cache_max_blocks),
    tokenCacheEntries: Number(o.prefix_cache_prompts),
    tokenizeTimeoutMs: parseDurationMs(o.prefix_cache_tokenize_timeout) as number,
  });
}
