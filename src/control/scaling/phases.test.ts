// Each phase of decideScale on its own: a step in, a step out, no clock
// but the `now` passed. scaler.test.ts runs them composed over time.
import { describe, expect, it } from 'vitest';
import {
  coolingDown,
  downWhenIdle,
  fromZero,
  measure,
  startFrom,
  toResult,
  trackSurplus,
  upByDemand,
  withinBounds,
  type ScaleStep,
} from './phases.js';
import type { ModelSignals, ReplicaSignal, ScalingPolicy } from './types.js';

const policy = (over: Partial<ScalingPolicy> = {}): ScalingPolicy => ({
  min: 1,
  max: 10,
  targetInflight: 4,
  idleTimeoutMs: 60_000,
  windowMs: 30_000,
  cooldownMs: 120_000,
  ...over,
});

const replica = (over: Partial<ReplicaSignal> = {}): ReplicaSignal => ({
  id: 'r',
  ready: true,
  inFlight: 0,
  idleSinceMs: 0,
  ...over,
});

const signals = (over: Partial<ModelSignals> = {}): ModelSignals => ({
  policy: policy(),
  replicas: [],
  failed: 0,
  queued: 0,
  coldDemand: false,
  ...over,
});

const step = (over: Partial<ScaleStep> = {}): ScaleStep => ({
  wanted: 1,
  aboveSinceMs: null,
  lastUpAtMs: null,
  belowSinceMs: null,
  neededPeak: 0,
  reason: '',
  ...over,
});

describe('measure', () => {
  it("counts a replica's demand as the larger of the router's and the engine's count, plus held requests", () => {
    const m = measure(
      signals({
        policy: policy({ min: 3, max: 2, targetInflight: 0 }),
        replicas: [replica({ inFlight: 2, engineQueued: 5 }), replica({ inFlight: 3, engineQueued: 1 }), replica()],
        queued: 4,
      }),
    );
    expect(m).toEqual({ min: 3, max: 3, target: 1, capacity: 3, demand: 12, needed: 12 });
  });
});

describe('startFrom', () => {
  it('adopts what exists on the first decision, and carries the previous memory after', () => {
    expect(startFrom(signals({ replicas: [replica(), replica()], failed: 1 }), undefined)).toEqual(step({ wanted: 3 }));
    expect(startFrom(signals(), { wanted: 5, aboveSinceMs: 7, lastUpAtMs: 8 })).toEqual(
      step({ wanted: 5, aboveSinceMs: 7, lastUpAtMs: 8 }),
    );
  });
});

describe('withinBounds', () => {
  const m = measure(signals({ policy: policy({ min: 2, max: 4 }) }));
  it('moves wanted into [min, max] and says which limit', () => {
    expect(withinBounds(step({ wanted: 0 }), m, true)).toMatchObject({ wanted: 2, reason: 'scaling.min is 2' });
    expect(withinBounds(step({ wanted: 1 }), m, false)).toMatchObject({ wanted: 2, reason: 'scaling.min is now 2' });
    expect(withinBounds(step({ wanted: 9 }), m, false)).toMatchObject({ wanted: 4, reason: 'scaling.max is now 4' });
    const inside = step({ wanted: 3 });
    expect(withinBounds(inside, m, false), 'inside: the same step').toBe(inside);
  });
});

describe('fromZero', () => {
  it('starts one replica at once for a request waiting on a model with none, never past max 0', () => {
    const s = signals({ policy: policy({ min: 0 }), coldDemand: true, queued: 3 });
    expect(fromZero(step({ wanted: 0 }), measure(s), s, 50)).toMatchObject({
      wanted: 1,
      lastUpAtMs: 50,
      reason: expect.stringMatching(/3 requests wait/),
    });
    const capped = signals({ policy: policy({ min: 0, max: 0 }), coldDemand: true });
    expect(fromZero(step({ wanted: 0 }), measure(capped), capped, 50).wanted).toBe(0);
    const none = signals({ policy: policy({ min: 0 }) });
    expect(fromZero(step({ wanted: 0 }), measure(none), none, 50).wanted, 'no request, no replica').toBe(0);
  });
});

describe('upByDemand', () => {
  const busy = signals({ replicas: [replica({ inFlight: 20 })] });
  const m = measure(busy);
  it('starts the window when demand goes above target, and scales proportionally only once it has lasted', () => {
    const opened = upByDemand(step(), m, busy.policy, 1_000);
    expect(opened).toMatchObject({ wanted: 1, aboveSinceMs: 1_000, reason: '' });
    expect(upByDemand(opened, m, busy.policy, 30_999).wanted, 'not a whole window yet').toBe(1);
    expect(upByDemand(opened, m, busy.policy, 31_000)).toMatchObject({
      wanted: 5,
      aboveSinceMs: null,
      lastUpAtMs: 31_000,
      reason: expect.stringMatching(/ceil\(20 \/ 4\) = 5/),
    });
  });

  it('closes the window when demand falls to target, and caps at max', () => {
    const calm = signals({ replicas: [replica({ inFlight: 4 })] });
    expect(upByDemand(step({ aboveSinceMs: 1 }), measure(calm), calm.policy, 99_000).aboveSinceMs).toBeNull();
    const capped = signals({ policy: policy({ max: 3 }), replicas: [replica({ inFlight: 100 })] });
    expect(upByDemand(step({ aboveSinceMs: 0 }), measure(capped), capped.policy, 30_000)).toMatchObject({
      wanted: 3,
      reason: expect.stringMatching(/capped at scaling.max 3/),
    });
  });
});

describe('trackSurplus', () => {
  it('remembers since when fewer replicas would do and the most needed meanwhile, while all are ready', () => {
    const low = signals({ replicas: [replica({ inFlight: 5 }), replica(), replica(), replica()] });
    const first = trackSurplus(step({ wanted: 4, neededPeak: 9 }), measure(low), low, 10);
    expect(first, 'a fresh window starts its peak afresh').toMatchObject({ belowSinceMs: 10, neededPeak: 2 });
    const lower = signals({ replicas: [replica({ inFlight: 1 }), replica(), replica(), replica()] });
    expect(trackSurplus(first, measure(lower), lower, 20), 'the peak holds').toMatchObject({
      belowSinceMs: 10,
      neededPeak: 2,
    });
  });

  it('forgets the window while requests are held or a replica is still starting', () => {
    const held = signals({ replicas: [replica(), replica()], queued: 1 });
    expect(trackSurplus(step({ wanted: 2, belowSinceMs: 5, neededPeak: 1 }), measure(held), held, 9)).toMatchObject({
      belowSinceMs: null,
      neededPeak: 0,
    });
    const starting = signals({ replicas: [replica(), replica({ ready: false })] });
    expect(trackSurplus(step({ wanted: 2 }), measure(starting), starting, 9).belowSinceMs).toBeNull();
  });
});

describe('coolingDown', () => {
  it('holds for cooldownMs after the last scale-up, and never without one', () => {
    expect(coolingDown({ lastUpAtMs: 1_000 }, policy(), 120_999)).toBe(true);
    expect(coolingDown({ lastUpAtMs: 1_000 }, policy(), 121_000)).toBe(false);
    expect(coolingDown({ lastUpAtMs: null }, policy(), 0)).toBe(false);
  });
});

describe('downWhenIdle', () => {
  const idle = signals({ replicas: [replica(), replica(), replica()] });
  const m = measure(idle);
  it('gives up replicas idle for idle_timeout, down to min', () => {
    expect(downWhenIdle(step({ wanted: 3 }), m, idle, idle.policy, 60_000)).toMatchObject({
      wanted: 1,
      reason: expect.stringMatching(/3 replica\(s\) idle for 1m.*kept at scaling.min 1/),
    });
    expect(downWhenIdle(step({ wanted: 3 }), m, idle, idle.policy, 59_999).wanted, 'not idle long enough').toBe(3);
  });

  it('gives up capacity demand has not needed for idle_timeout, to the most it needed', () => {
    const trickle = signals({
      replicas: [1, 1, 1, 1].map((n, i) => replica({ id: `r${i}`, inFlight: n, idleSinceMs: 59_000 })),
    });
    const s = step({ wanted: 4, belowSinceMs: 0, neededPeak: 2 });
    expect(downWhenIdle(s, measure(trickle), trickle, trickle.policy, 60_000)).toMatchObject({
      wanted: 2,
      belowSinceMs: null,
      neededPeak: 0,
      reason: expect.stringMatching(/demand needed at most 2 replica\(s\)/),
    });
  });

  it('does nothing within the cool-down, while requests are held, without idle_timeout, or after another phase acted', () => {
    const s = step({ wanted: 3 });
    expect(downWhenIdle({ ...s, lastUpAtMs: 0 }, m, idle, idle.policy, 60_000).wanted).toBe(3);
    expect(downWhenIdle(s, m, { ...idle, queued: 1 }, idle.policy, 60_000).wanted).toBe(3);
    expect(downWhenIdle(s, m, idle, policy({ idleTimeoutMs: null }), 60_000).wanted).toBe(3);
    expect(downWhenIdle({ ...s, reason: 'scaling.max is now 3' }, m, idle, idle.policy, 60_000).wanted).toBe(3);
  });
});

describe('toResult', () => {
  it('decides only when wanted changed, with the direction and the reason of the phase that changed it', () => {
    expect(toResult(2, step({ wanted: 2 })).decision).toBeNull();
    expect(toResult(2, step({ wanted: 5, reason: 'busy' }))).toEqual({
      wanted: 5,
      state: { wanted: 5, aboveSinceMs: null, lastUpAtMs: null, belowSinceMs: null, neededPeak: 0 },
      decision: { from: 2, to: 5, direction: 'up', reason: 'busy' },
    });
    expect(toResult(5, step({ wanted: 1, reason: 'idle' })).decision?.direction).toBe('down');
  });
});
