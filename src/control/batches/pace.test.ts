import { describe, expect, it } from 'vitest';
import { BATCH_PACE_DEFAULTS, decidePace, type PaceReplica, type PaceSnapshot } from './pace.js';

const replica = (id: string, capacity: number, inFlight: number, engine?: PaceReplica['engine']): PaceReplica => ({
  id,
  capacity,
  inFlight,
  ...(engine ? { engine } : {}),
});

/** The tables below were written for a quarter kept free; the default is tested apart. */
const QUARTER = { ...BATCH_PACE_DEFAULTS, headroomFraction: 0.25 };

const snap = (replicas: PaceReplica[], interactiveWaiting = 0, batchInFlight = 0): PaceSnapshot => ({
  replicas,
  interactiveWaiting,
  batchInFlight,
});

describe('decidePace', () => {
  const cases: { name: string; s: PaceSnapshot; slots: number; reason: string }[] = [
    { name: 'no ready replica: nothing starts', s: snap([]), slots: 0, reason: 'no-replica' },
    {
      name: 'replicas that take nothing (capacity 0) are no replica',
      s: snap([replica('a', 0, 0)]),
      slots: 0,
      reason: 'no-replica',
    },
    {
      name: 'an idle replica of 8: all but the headroom (ceil(8 × 0.25) = 2)',
      s: snap([replica('a', 8, 0)]),
      slots: 6,
      reason: 'spare',
    },
    {
      name: 'two idle replicas of 8: 16 less 4',
      s: snap([replica('a', 8, 0), replica('b', 8, 0)]),
      slots: 12,
      reason: 'spare',
    },
    {
      name: 'busy places are not spare: batch lines in flight count like any request',
      s: snap([replica('a', 8, 5)], 0, 5),
      slots: 1,
      reason: 'spare',
    },
    {
      name: 'exactly the headroom free: full',
      s: snap([replica('a', 8, 6)], 0, 3),
      slots: 0,
      reason: 'full',
    },
    {
      name: 'over capacity never goes negative',
      s: snap([replica('a', 8, 12)]),
      slots: 0,
      reason: 'full',
    },
    {
      name: 'batch lines started but not yet counted by the gateway still bound the total: 8 − 2 − 5',
      s: snap([replica('a', 8, 0)], 0, 5),
      slots: 1,
      reason: 'spare',
    },
    {
      name: 'an interactive request waiting pauses batches however much is free',
      s: snap([replica('a', 8, 0), replica('b', 8, 0)], 1, 0),
      slots: 0,
      reason: 'paused',
    },
    {
      name: "the engine's own count wins when larger (traffic from elsewhere)",
      s: snap([replica('a', 8, 1, { running: 5, waiting: 0 })]),
      slots: 1,
      reason: 'spare',
    },
    {
      name: 'an engine that queues has no spare place',
      s: snap([replica('a', 8, 1, { running: 2, waiting: 1 }), replica('b', 8, 0)]),
      slots: 6 - 4 + 2,
      reason: 'spare',
    },
    {
      name: 'a full KV cache has no spare place',
      s: snap([replica('a', 8, 0, { running: 0, waiting: 0, kvUsage: 0.95 })]),
      slots: 0,
      reason: 'full',
    },
    {
      name: 'a replica of 1 keeps its one place for interactive requests (headroom at least 1)',
      s: snap([replica('a', 1, 0)]),
      slots: 0,
      reason: 'full',
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const d = decidePace(c.s, QUARTER);
      expect(d.slots, d.message).toBe(c.slots);
      expect(d.reason, d.message).toBe(c.reason);
    });
  }

  it('never allows more than the free places less the headroom, whatever the snapshot', () => {
    // A small exhaustive sweep instead of a property-test dependency.
    for (const cap of [1, 2, 4, 8, 32])
      for (const inFlight of [0, 1, 3, 8, 40])
        for (const waiting of [0, 2])
          for (const queued of [0, 1]) {
            const s = snap([replica('a', cap, inFlight, { running: inFlight, waiting })], queued, 0);
            const d = decidePace(s, QUARTER);
            expect(d.slots).toBeGreaterThanOrEqual(0);
            const bound = waiting > 0 ? 0 : Math.max(0, cap - inFlight - d.headroom);
            expect(d.slots, JSON.stringify({ cap, inFlight, waiting, d })).toBeLessThanOrEqual(bound);
            if (queued > 0) expect(d.slots).toBe(0);
          }
  });

  it('says the waiting requests and finishing lines when paused', () => {
    const d = decidePace(snap([replica('a', 8, 4)], 3, 4), QUARTER);
    expect(d.message).toBe('paused: 3 interactive requests waiting; 4 batch lines finishing');
  });

  it('keeps half the places free by default', () => {
    const d = decidePace(snap([replica('a', 8, 0), replica('b', 8, 0)]));
    expect([d.slots, d.headroom]).toEqual([8, 8]);
  });

  it('takes its headroom from the options: 0 headroom fills every free place', () => {
    const d = decidePace(snap([replica('a', 8, 2)]), { ...BATCH_PACE_DEFAULTS, headroomFraction: 0, headroomMin: 0 });
    expect(d.slots).toBe(6);
    expect(d.headroom).toBe(0);
  });
});
