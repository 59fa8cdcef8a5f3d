import { describe, expect, it } from 'vitest';
import { heapGrowingFlag } from './heap.js';

describe('the heap growing setting', () => {
  it('sets the percent asked, none for 0, and leaves a value node was started with alone', () => {
    expect(heapGrowingFlag(50, [])).toBe('--heap-growing-percent=50');
    expect(heapGrowingFlag(0, []), "0 = V8's own heuristic").toBeNull();
    expect(
      heapGrowingFlag(50, ['--max-semi-space-size=64', '--heap-growing-percent=20']),
      "the operator's own flag wins",
    ).toBeNull();
    expect(heapGrowingFlag(50, ['--heap_growing_percent=20'])).toBeNull();
    expect(heapGrowingFlag(50, ['--heap-growing-percentile'])).toBe('--heap-growing-percent=50');
  });
});
