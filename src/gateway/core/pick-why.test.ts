// The rule each pick reports for the request log's "why this replica": the
// one that actually decided, so `ctl request ID` never explains a choice by
// a rule that did not make it.
import { describe, expect, it } from 'vitest';
import { HashRing, fnv1a, pickByPrefix, pickLeastLoad, pickLeastLoaded, type PickWhy } from './pick.js';

const replicas = (n: number) => Array.from({ length: n }, (_, i) => ({ id: `r${i}` }));
const score = (loads: Record<string, number>) => (id: string) => loads[id] ?? 0;
const why = (): PickWhy => ({ by: 'only-candidate' });

describe('least load says why', () => {
  it.each<[string, number, Record<string, number>, PickWhy['by']]>([
    ['one candidate', 1, { r0: 7 }, 'only-candidate'],
    ['a strict lowest', 3, { r0: 2, r1: 0.5, r2: 1 }, 'least-load'],
    ['equal lowest, drawn at random', 3, { r0: 1, r1: 1, r2: 3 }, 'least-load-tie'],
  ])('%s', (_name, n, loads, by) => {
    const w = why();
    w.by = 'prefix-owner'; // whatever was there before is overwritten
    pickLeastLoad(replicas(n), score(loads), () => 0, w);
    expect(w.by).toBe(by);
  });

  it('picks the same replica whether or not it is asked why', () => {
    const loads = score({ r0: 3, r1: 1, r2: 1, r3: 2 });
    for (const r of [0, 0.3, 0.6, 0.99]) {
      expect(pickLeastLoad(replicas(4), loads, () => r, why())?.id).toBe(
        pickLeastLoad(replicas(4), loads, () => r)?.id,
      );
    }
  });
});

describe('least in flight says why', () => {
  it('names two choices, or the only candidate', () => {
    const w = why();
    pickLeastLoaded(
      replicas(3),
      () => 0,
      () => 0.4,
      w,
    );
    expect(w.by).toBe('two-choices');
    const one = why();
    one.by = 'least-load';
    pickLeastLoaded(
      replicas(1),
      () => 0,
      () => 0.4,
      one,
    );
    expect(one.by).toBe('only-candidate');
  });
});

describe('prefix routing says why', () => {
  const cands = replicas(3);
  const ring = new HashRing(cands.map((c) => c.id));
  const hash = fnv1a('the same system prompt');
  const order = [...ring.walk(hash)];
  const owner = order[0]!;

  it('the owner within the bound: prefix-owner, with the owner and the bound', () => {
    const w = why();
    const c = pickByPrefix(cands, ring, hash, () => 0, 1.25, w);
    expect(c?.id).toBe(owner);
    expect(w).toEqual({ by: 'prefix-owner', ringOwner: owner, bound: 1 });
  });

  it('the owner over the bound: prefix-next names the owner it passed over', () => {
    const w = why();
    const c = pickByPrefix(cands, ring, hash, (id) => (id === owner ? 5 : 0), 1.25, w);
    expect(c?.id).toBe(order[1]);
    expect(w.by).toBe('prefix-next');
    expect(w.ringOwner).toBe(owner);
    expect(w.bound).toBe(3);
  });

  it('an owner already tried is not a candidate: the first candidate on the walk is the owner then', () => {
    // Regression guard: the ring covers every replica, so the ring's first id may be one this attempt cannot use.
    const left = cands.filter((c) => c.id !== owner);
    const w = why();
    const c = pickByPrefix(left, ring, hash, () => 0, 1.25, w);
    expect(c?.id).toBe(order[1]);
    expect([w.by, w.ringOwner]).toEqual(['prefix-owner', order[1]]);
  });

  it('every one over the bound (a factor of 1 or less): prefix-all-over, the least loaded', () => {
    const w = why();
    const c = pickByPrefix(cands, ring, hash, score({ r0: 4, r1: 2, r2: 4 }), 0.5, w);
    expect(c?.id).toBe('r1');
    expect(w.by).toBe('prefix-all-over');
  });

  it('one candidate: only-candidate, no ring asked', () => {
    const w = why();
    w.by = 'least-load';
    pickByPrefix([{ id: 'solo' }], ring, hash, () => 0, 1.25, w);
    expect(w).toEqual({ by: 'only-candidate' });
  });
});
