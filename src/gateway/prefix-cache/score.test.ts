import { describe, expect, it } from 'vitest';
import { cacheScore, pickByCache, type CacheCandidate } from './score.js';

const c = (id: string, load: number, cachedTokens: number): CacheCandidate => ({ id, load, cachedTokens });

describe('the prefix-cache score', () => {
  it.each([
    // [what, load, cached, prompt, tokensPerRequest, score]
    ['an idle replica with nothing cached pays the whole prefill', 0, 0, 1024, 512, 2],
    ['a full hit costs only its load', 3, 1024, 1024, 512, 3],
    ['a partial hit pays for the rest', 1, 512, 1024, 512, 2],
    ['a cached count above the prompt counts as the prompt', 1, 5000, 1024, 512, 1],
    ['tokensPerRequest 0 weighs the cache not at all', 2, 0, 1024, 0, 2],
    ['an empty prompt is load alone', 4, 0, 0, 512, 4],
  ])('%s', (_what, load, cached, prompt, perRequest, want) => {
    expect(cacheScore(c('r', load, cached), prompt, perRequest)).toBe(want);
  });
});

describe('choosing by cache and load', () => {
  const zero = () => 0;
  it.each([
    {
      what: 'a conversation stays where it is cached while that replica is not much busier',
      cands: [c('holder', 2, 3000), c('idle', 0, 0)],
      prompt: 3100,
      want: 'holder',
    },
    {
      what: 'it spills once the holder is busier than the prefill it saves',
      cands: [c('holder', 9, 3000), c('idle', 0, 0)],
      prompt: 3100,
      want: 'idle',
    },
    {
      what: 'with a shared system prompt everywhere, the replica with the conversation wins',
      cands: [c('a', 1, 2048), c('b', 1, 2048 + 1024), c('c', 0, 2048)],
      prompt: 3200,
      want: 'b',
    },
    {
      what: 'with no hit anywhere it is least-load',
      cands: [c('a', 3, 0), c('b', 1, 0), c('c', 2, 0)],
      prompt: 800,
      want: 'b',
    },
    {
      what: 'a longer hit beats a shorter one at equal load',
      cands: [c('short', 1, 16), c('long', 1, 64)],
      prompt: 100,
      want: 'long',
    },
  ])('$what', ({ cands, prompt, want }) => {
    expect(pickByCache(cands, prompt, 512, zero)?.chosen.id).toBe(want);
  });

  it('draws among equal scores at random, and says so', () => {
    const cands = [c('a', 1, 0), c('b', 1, 0), c('c', 5, 0)];
    expect(pickByCache(cands, 10, 512, () => 0)?.chosen.id).toBe('a');
    const late = pickByCache(cands, 10, 512, () => 0.99)!;
    expect(late.chosen.id).toBe('b');
    expect(late.tie).toBe(true);
    expect(late.scores).toEqual([1 + 10 / 512, 1 + 10 / 512, 5 + 10 / 512]);
  });

  it('answers undefined for no candidates', () => {
    expect(pickByCache([], 10, 512, () => 0)).toBeUndefined();
  });
});
