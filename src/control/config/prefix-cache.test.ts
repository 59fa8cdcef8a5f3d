import { describe, expect, it } from 'vitest';
import { ROUTER_DEFAULTS } from '../../gateway/core/options.js';
import { compileControlOptions, loadControlConfig } from './index.js';

describe('prefix-cache keys', () => {
  it("default to the router's own defaults", () => {
    // Guards against the config's defaults drifting from ROUTER_DEFAULTS, which the router uses when given none.
    expect(loadControlConfig({ env: {} }).prefixCache).toEqual({
      cacheTokensPerRequest: ROUTER_DEFAULTS.cacheTokensPerRequest,
      cacheMaxBlocks: ROUTER_DEFAULTS.cacheMaxBlocks,
      tokenCacheEntries: ROUTER_DEFAULTS.tokenCacheEntries,
      tokenizeTimeoutMs: ROUTER_DEFAULTS.tokenizeTimeoutMs,
    });
  });

  it('are read from the file, the environment or a flag', () => {
    expect(
      compileControlOptions({
        prefix_cache_tokens_per_request: 0,
        prefix_cache_max_blocks: 50_000,
        prefix_cache_prompts: 100,
        prefix_cache_tokenize_timeout: '500ms',
      }).prefixCache,
    ).toEqual({ cacheTokensPerRequest: 0, cacheMaxBlocks: 50_000, tokenCacheEntries: 100, tokenizeTimeoutMs: 500 });
    const env = loadControlConfig({
      env: { LLMGW_PREFIX_CACHE_MAX_BLOCKS: '2000', LLMGW_PREFIX_CACHE_TOKENIZE_TIMEOUT: '3s' },
    });
    expect(env.prefixCache).toMatchObject({ cacheMaxBlocks: 2000, tokenizeTimeoutMs: 3000 });
    const flag = loadControlConfig({ env: {}, flags: { prefix_cache_tokens_per_request: '128' } });
    expect(flag.prefixCache.cacheTokensPerRequest).toBe(128);
  });

  it.each([
    ['prefix_cache_tokens_per_request', -1],
    ['prefix_cache_tokens_per_request', '1.5'],
    ['prefix_cache_max_blocks', 0],
    ['prefix_cache_prompts', '0'],
    ['prefix_cache_tokenize_timeout', '0s'],
    ['prefix_cache_tokenize_timeout', '2'],
  ])('refuses %s: %j, naming the key', (key, value) => {
    expect(() => compileControlOptions({ [key]: value })).toThrow(new RegExp(key));
  });
});
