import { describe, expect, it } from 'vitest';
import { HashRing, fnv1a, pickByPrefix, pickLeastLoaded } from './pick.js';

/** A seeded generator (mulberry32), so the spread checks are repeatable. */
function seeded(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}

const replicas = (n: number) => Array.from({ length: n }, (_, i) => ({ id: `r${i}` }));

describe('power of two choices', () => {
  it('takes the less busy of the two it draws', () => {
    const load = new Map([['r0', 5], ['r1', 1]]);
    expect(pickLeastLoaded(replicas(2), (id) => load.get(id) ?? 0, () => 0)?.id).toBe('r1');
  });

  it('keeps loads level when every pick adds one request', () => {
    const cands = replicas(8);
    const load = new Map<string, number>();
    const random = seeded(7);
    for (let i = 0; i < 8000; i++) {
      const c = pickLeastLoaded(cands, (id) => load.get(id) ?? 0, random)!;
      load.set(c.id, (load.get(c.id) ?? 0) + 1);
    }
    const counts = [...load.values()];
    expect(Math.max(...counts) - Math.min(...counts), 'the spread stays within a few requests').toBeLessThanOrEqual(3);
  });

  it('never draws the same replica twice', () => {
    const random = seeded(1);
    for (let i = 0; i < 1000; i++) {
      const seen: string[] = [];
      pickLeastLoaded(replicas(3), (id) => (seen.push(id), 0), random);
      expect(new Set(seen).size).toBe(2);
    }
  });
});

describe('consistent hashing with bounded loads', () => {
  it('sends one prefix to the same replica while it is not overloaded', () => {
    const cands = replicas(4);
    const ring = new HashRing(cands.map((c) => c.id));
    const h = fnv1a('You are a helpful assistant.');
    const first = pickByPrefix(cands, ring, h, () => 0, 1.25)!.id;
    for (let i = 0; i < 10; i++) expect(pickByPrefix(cands, ring, h, () => 0, 1.25)!.id).toBe(first);
  });

  it('moves a hot prefix on once its replica is over the bound, so no replica takes more than its share', () => {
    const cands = replicas(4);
    const ring = new HashRing(cands.map((c) => c.id));
    const load = new Map<string, number>();
    const h = fnv1a('one hot system prompt');
    for (let i = 0; i < 100; i++) {
      const c = pickByPrefix(cands, ring, h, (id) => load.get(id) ?? 0, 1.25)!;
      load.set(c.id, (load.get(c.id) ?? 0) + 1);
    }
    // Bound: ceil(1.25 × (total + 1) / 4) at each step, so at most ceil(1.25 × 100 / 4) = 32 at the end.
    expect(Math.max(...load.values()), 'a hot prefix spreads beyond one replica').toBeLessThanOrEqual(32);
    expect(load.size).toBe(4);
  });

  it('moves only the prefixes of a replica that leaves', () => {
    const ids = ['a', 'b', 'c', 'd', 'e'];
    const before = new HashRing(ids);
    const after = new HashRing(ids.filter((id) => id !== 'c'));
    let moved = 0;
    for (let i = 0; i < 1000; i++) {
      const h = fnv1a(`prompt ${i}`);
      const x = before.walk(h).next().value;
      const y = after.walk(h).next().value;
      if (x !== 'c' && x !== y) moved++;
    }
    expect(moved, 'prefixes on the other replicas stay put').toBe(0);
  });
});
