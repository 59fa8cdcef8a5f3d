import { describe, expect, it } from 'vitest';
import { FinishedSends } from './finished-sends.js';
import { HashRing, expectedLoad, fnv1a, loadViewOf, pickByPrefix, pickLeastLoad, pickLeastLoaded } from './pick.js';

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
    const load = new Map([
      ['r0', 5],
      ['r1', 1],
    ]);
    expect(
      pickLeastLoaded(
        replicas(2),
        (id) => load.get(id) ?? 0,
        () => 0,
      )?.id,
    ).toBe('r1');
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

describe('expected load', () => {
  it.each([
    ['no sample: the in-flight count', { inFlight: 3 }, 3],
    ['an idle engine', { inFlight: 0, sample: { running: 0, waiting: 0, sentSince: 0 } }, 0],
    ['running, and sends since the sample', { inFlight: 9, sample: { running: 4, waiting: 0, sentSince: 2 } }, 6],
    ['a waiting request weighs double', { inFlight: 0, sample: { running: 4, waiting: 3, sentSince: 0 } }, 10],
    [
      'requests of this router the sample counted that finished since come off',
      { inFlight: 1, sample: { running: 4, waiting: 0, sentSince: 1, finishedSince: 3 } },
      2,
    ],
    [
      'never below nothing at the engine',
      { inFlight: 0, sample: { running: 1, waiting: 0, sentSince: 0, finishedSince: 3 } },
      0,
    ],
    [
      'KV at the threshold: no penalty',
      { inFlight: 0, sample: { running: 1, waiting: 0, kvUsage: 0.9, sentSince: 0 } },
      1,
    ],
    [
      'KV half way to full: half the penalty',
      { inFlight: 0, sample: { running: 1, waiting: 0, kvUsage: 0.95, sentSince: 0 } },
      3,
    ],
    ['KV full: the whole penalty', { inFlight: 0, sample: { running: 1, waiting: 0, kvUsage: 1, sentSince: 0 } }, 5],
  ])('%s', (_name, view, want) => {
    expect(expectedLoad(view)).toBeCloseTo(want, 9);
  });
});

describe('loadViewOf', () => {
  const sample = { running: 2, waiting: 1, kvUsage: 0.4, sampledAtMs: 10_000 };
  it.each([
    [
      'fresh: sends after the sample count, those before are in it',
      sample,
      [9_000, 9_500, 10_200, 10_900],
      11_000,
      { inFlight: 4, sample: { running: 2, waiting: 1, kvUsage: 0.4, sentSince: 2 } },
    ],
    [
      'exactly at the staleness limit: still fresh',
      sample,
      [],
      14_000,
      { inFlight: 0, sample: { running: 2, waiting: 1, kvUsage: 0.4, sentSince: 0 } },
    ],
    ['past it: in-flight counting', sample, [9_000, 13_000], 14_001, { inFlight: 2 }],
    ['never reported: in-flight counting', undefined, [1], 14_000, { inFlight: 1 }],
    [
      'dated a little ahead of this clock: fresh',
      { ...sample, sampledAtMs: 11_050 },
      [11_000],
      11_000,
      { inFlight: 1, sample: { running: 2, waiting: 1, kvUsage: 0.4, sentSince: 0 } },
    ],
  ] as const)('%s', (_name, s, sends, now, want) => {
    expect(loadViewOf(s, sends, now, 4_000)).toEqual(want);
  });

  it("asks the finished attempts at the sample's moment, and a stale sample not at all", () => {
    // Which attempts count is FinishedSends' own (finished-sends.test.ts); here, that the view asks it at the sample's moment.
    const finished = new FinishedSends(4_000);
    finished.add(9_000, 10_500); // in the sample, gone since
    finished.add(10_200, 10_400); // sent after the sample and gone: never in it
    expect(loadViewOf(sample, [], 11_000, 4_000, finished).sample?.finishedSince).toBe(1);
    expect(loadViewOf(sample, [], 14_001, 4_000, finished).sample, 'a stale sample reads none of it').toBeUndefined();
  });
});

describe('least load', () => {
  const score = (loads: Record<string, number>) => (id: string) => loads[id] ?? 0;

  it.each([
    [
      'the engine with a queue loses to one with free sequences',
      {
        r0: expectedLoad({ inFlight: 1, sample: { running: 4, waiting: 3, sentSince: 0 } }),
        r1: expectedLoad({ inFlight: 3, sample: { running: 3, waiting: 0, sentSince: 0 } }),
      },
      'r1',
    ],
    [
      'a burst since the sample counts against a replica',
      {
        r0: expectedLoad({ inFlight: 5, sample: { running: 0, waiting: 0, sentSince: 5 } }),
        r1: expectedLoad({ inFlight: 0, sample: { running: 2, waiting: 0, sentSince: 0 } }),
      },
      'r1',
    ],
    [
      'a nearly full KV cache tips an otherwise equal choice',
      {
        r0: expectedLoad({ inFlight: 0, sample: { running: 2, waiting: 0, kvUsage: 0.97, sentSince: 0 } }),
        r1: expectedLoad({ inFlight: 0, sample: { running: 2, waiting: 0, kvUsage: 0.5, sentSince: 0 } }),
      },
      'r1',
    ],
    // Mixed fresh and stale: both are requests at the engine. The stale replica's two in flight beat the fresh one's queue.
    [
      'a stale replica competes by its in-flight count',
      {
        r0: expectedLoad({ inFlight: 2 }),
        r1: expectedLoad({ inFlight: 0, sample: { running: 1, waiting: 1, sentSince: 0 } }),
      },
      'r0',
    ],
    [
      'a long prompt queued by another client shows only in the sample',
      {
        r0: expectedLoad({ inFlight: 0, sample: { running: 4, waiting: 2, sentSince: 0 } }),
        r1: expectedLoad({ inFlight: 1, sample: { running: 1, waiting: 0, sentSince: 0 } }),
        r2: expectedLoad({ inFlight: 2 }),
      },
      'r1',
    ],
  ])('%s', (_name, loads, want) => {
    expect(pickLeastLoad(replicas(Object.keys(loads).length), score(loads), () => 0.5)?.id).toBe(want);
  });

  it('breaks ties at random, evenly', () => {
    const random = seeded(3);
    const counts = new Map<string, number>();
    for (let i = 0; i < 3000; i++) {
      const c = pickLeastLoad(replicas(4), score({ r0: 1, r1: 1, r2: 1, r3: 2 }), random)!;
      counts.set(c.id, (counts.get(c.id) ?? 0) + 1);
    }
    expect(counts.get('r3'), 'the busier one is never taken').toBeUndefined();
    for (const id of ['r0', 'r1', 'r2']) expect(counts.get(id), `${id} gets about a third`).toBeGreaterThan(850);
  });

  it('returns the only candidate, or none', () => {
    expect(
      pickLeastLoad(
        [{ id: 'a' }],
        () => 99,
        () => 0,
      )?.id,
    ).toBe('a');
    expect(
      pickLeastLoad(
        [],
        () => 0,
        () => 0,
      ),
    ).toBeUndefined();
  });
});

describe('prefix affinity over engine load', () => {
  it('leaves the prefix owner when its engine queue, not just its in-flight count, passes the bound', () => {
    const cands = replicas(3);
    const ring = new HashRing(cands.map((c) => c.id));
    const hash = fnv1a('the same system prompt');
    const owner = ring.walk(hash).next().value!;
    const idle = () => 0;
    expect(pickByPrefix(cands, ring, hash, idle, 1.25)?.id, 'an idle fleet: the owner').toBe(owner);
    // The owner has nothing in flight from this router, but its engine reports a queue.
    const queued = (id: string) =>
      id === owner ? expectedLoad({ inFlight: 0, sample: { running: 4, waiting: 2, sentSince: 0 } }) : 1;
    expect(pickByPrefix(cands, ring, hash, queued, 1.25)?.id, 'over the bound: the next on the ring').not.toBe(owner);
  });
});
