// Guards against a weighted split drifting from its weights by chance: with
// an independent random draw per request, a 90/10 split's canary served
// anywhere from about 160 to 240 of 2,000 requests from one run to the next.
// The sequence must keep every target within a few requests of its share
// over every run of requests, whatever the first point, and stay sticky
// splits' own business.
import { describe, expect, it } from 'vitest';
import type { RoutedModel, SplitTarget } from '../ports/index.js';
import { SplitDraws } from './draws.js';
import { routeRequest } from './route.js';

/** A seeded uniform source (mulberry32), so a failure names the seed that shows it. */
function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function model(name: string, over: Partial<RoutedModel> = {}): RoutedModel {
  return {
    name,
    aliases: [],
    fallbacks: [],
    routing: 'least-load',
    fallbackWhileCold: false,
    endpoints: ['chat'],
    limits: { contextTokens: null, maxTokens: null, maxN: null },
    ...over,
  };
}

const split = (...t: [string, number][]): SplitTarget[] => t.map(([m, weight]) => ({ model: m, weight }));

describe('SplitDraws', () => {
  it('hands out points in [0, 1), one sequence per model', () => {
    const draws = new SplitDraws(() => 0.5);
    const a = Array.from({ length: 5 }, () => draws.next('a'));
    for (const p of a) expect(p >= 0 && p < 1, `point ${p}`).toBe(true);
    // Another model's requests in between do not move a's sequence.
    const again = new SplitDraws(() => 0.5);
    const b: number[] = [];
    for (let i = 0; i < 5; i++) {
      again.next('other');
      b.push(again.next('a'));
    }
    expect(b).toEqual(a);
  });

  // [weights, the target watched, its share]
  const table: [number[], number, number][] = [
    [[90, 10], 1, 0.1],
    [[90, 10], 0, 0.9],
    [[50, 50], 0, 0.5],
    [[1, 1, 1], 2, 1 / 3],
    [[99, 1], 1, 0.01],
    [[70, 20, 10], 1, 0.2],
  ];
  it.each(table)('keeps weights %j within 3 requests of the share at every count up to 2,000', (weights, i, share) => {
    const targets = weights.map((_, j) => `t${j}`);
    const catalog = new Map(targets.map((t) => [t, model(t)]));
    const named = model('named', { split: split(...targets.map((t, j): [string, number] => [t, weights[j]!])) });
    for (let seed = 1; seed <= 20; seed++) {
      const random = seeded(seed);
      const draws = new SplitDraws(random);
      let count = 0;
      let worst = 0;
      for (let n = 1; n <= 2000; n++) {
        const { model: served } = routeRequest(
          named,
          'chat',
          undefined,
          undefined,
          { resolve: (x) => catalog.get(x) },
          random,
          draws,
        );
        if (served.name === `t${i}`) count++;
        worst = Math.max(worst, Math.abs(count - n * share));
      }
      expect(worst, `seed ${seed}: the largest gap from the share`).toBeLessThanOrEqual(3);
    }
  });

  it('leaves a sticky split to the key: every request of one key on one side', () => {
    const catalog = new Map([
      ['a', model('a')],
      ['b', model('b')],
    ]);
    const named = model('named', { split: split(['a', 50], ['b', 50]), splitBy: 'key' });
    const draws = new SplitDraws(seeded(3));
    const served = new Set(
      Array.from(
        { length: 50 },
        () =>
          routeRequest(named, 'chat', 'key-1', undefined, { resolve: (x) => catalog.get(x) }, seeded(4), draws).model
            .name,
      ),
    );
    expect(served.size).toBe(1);
  });
});
