// The generator behind the property tests and the benchmark: a seed must
// always give the same fleet, or a failing seed could not be replayed.
import { describe, expect, it } from 'vitest';
import { createPrng, randomInt, shuffled, syntheticFleet, syntheticRequests } from './synthetic.js';

describe('synthetic fleets', () => {
  it('the generator gives the same sequence for the same seed, and another for another', () => {
    const a = createPrng(42);
    const b = createPrng(42);
    const c = createPrng(43);
    const first = Array.from({ length: 5 }, () => a());
    expect(Array.from({ length: 5 }, () => b())).toEqual(first);
    expect(Array.from({ length: 5 }, () => c())).not.toEqual(first);
    for (const x of first) expect(x >= 0 && x < 1, `${x} in [0, 1)`).toBe(true);
  });

  it('draws integers within bounds and shuffles without losing anything', () => {
    const prng = createPrng(1);
    const draws = Array.from({ length: 500 }, () => randomInt(prng, 3, 5));
    expect(new Set(draws)).toEqual(new Set([3, 4, 5]));
    expect(shuffled(prng, [1, 2, 3, 4, 5]).sort()).toEqual([1, 2, 3, 4, 5]);
  });

  it('builds the same fleet and catalog from the same seed', () => {
    const options = { seed: 5, nodeCount: 30, cordonedFraction: 0.2, unknownFraction: 0.2, gpusInUseFraction: 0.3 };
    expect(syntheticFleet(options)).toEqual(syntheticFleet(options));
    expect(syntheticRequests({ seed: 5, modelCount: 20 })).toEqual(syntheticRequests({ seed: 5, modelCount: 20 }));
  });

  it('honours the shares it is given', () => {
    const fleet = syntheticFleet({ seed: 9, nodeCount: 2000, cordonedFraction: 0.05 });
    const cordoned = fleet.nodes.filter((n) => n.adminState === 'cordoned').length;
    expect(cordoned, 'about 5% of 2000').toBeGreaterThan(60);
    expect(cordoned).toBeLessThan(140);
    expect(
      fleet.nodes.every((n) => n.liveness === 'up'),
      'no stale nodes unless asked',
    ).toBe(true);
  });
});
