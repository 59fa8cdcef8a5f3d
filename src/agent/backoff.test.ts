import { describe, expect, it } from 'vitest';
import { backoffDelayMs, firstJoinDelayMs, startIndex } from './backoff.js';

describe('retry back-off', () => {
  const options = { baseMs: 500, capMs: 5000 };

  it('grows exponentially up to the cap, drawn uniformly below it', () => {
    expect([1, 2, 3, 4, 5, 10].map((a) => backoffDelayMs(a, options, 0.999_999))).toEqual([
      499, 999, 1999, 3999, 4999, 4999,
    ]);
    expect(backoffDelayMs(3, options, 0.5)).toBe(1000);
    expect(backoffDelayMs(1000, options, 0.999_999), 'a huge attempt count stays at the cap').toBe(4999);
  });

  it('never spins: the least wait is a tenth of the base', () => {
    expect(backoffDelayMs(1, options, 0)).toBe(50);
  });

  it('spreads agents that failed together', () => {
    const draws = Array.from({ length: 1000 }, (_, i) => backoffDelayMs(6, options, (i + 0.5) / 1000));
    const buckets = new Set(draws.map((d) => Math.floor(d / 500)));
    expect(buckets.size, 'retries land all over the window, not at one moment').toBe(10);
  });
});

describe('first join', () => {
  it('waits a random part of the spread, and not at all without one', () => {
    expect(firstJoinDelayMs(30_000, 0.5)).toBe(15_000);
    expect(firstJoinDelayMs(0, 0.9)).toBe(0);
  });
});

describe('start index', () => {
  it('is stable per node and spreads a fleet evenly over the URLs', () => {
    expect(startIndex('gpu-1', 3)).toBe(startIndex('gpu-1', 3));
    expect(startIndex('gpu-1', 1)).toBe(0);
    const counts = [0, 0, 0];
    for (let i = 0; i < 3000; i++) counts[startIndex(`node-${i}`, 3)]!++;
    for (const c of counts)
      expect(c, `each of 3 URLs gets about a third of 3000 nodes: ${counts.join(', ')}`).toBeGreaterThan(850);
  });
});
