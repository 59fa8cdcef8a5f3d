// The scaler's rules as tables of snapshots over a fake clock: each step is
// what the router and the replica records would show at one pass, and the
// expectation is the wanted number after it. No timers, no I/O.
import { describe, expect, it } from 'vitest';
import { decideScale, type ModelSignals, type ReplicaSignal, type ScalingPolicy, type ScaleState } from './scaler.js';

const policy = (over: Partial<ScalingPolicy> = {}): ScalingPolicy => ({
  min: 1,
  max: 10,
  targetInflight: 4,
  idleTimeoutMs: 60_000,
  windowMs: 30_000,
  cooldownMs: 120_000,
  ...over,
});

/** `n` ready replicas sharing `inFlight` requests as evenly as the router would, last used at `usedAt`. */
function ready(n: number, inFlight: number, usedAt = 0): ReplicaSignal[] {
  return Array.from({ length: n }, (_, i) => ({
    id: `r${i}`,
    ready: true,
    inFlight: Math.floor(inFlight / n) + (i < inFlight % n ? 1 : 0),
    idleSinceMs: usedAt,
  }));
}

function starting(n: number, from = 100): ReplicaSignal[] {
  return Array.from({ length: n }, (_, i) => ({ id: `s${from + i}`, ready: false, inFlight: 0, idleSinceMs: 0 }));
}

interface Step {
  /** Seconds on the fake clock. */
  at: number;
  replicas: ReplicaSignal[];
  queued?: number;
  cold?: boolean;
  failed?: number;
  /** Wanted after this step. */
  want: number;
}

/** Runs the steps through decideScale, carrying its state, and checks wanted at each; returns the decisions. */
function run(p: ScalingPolicy, steps: Step[], start?: ScaleState) {
  let state = start;
  const decisions = [];
  for (const [i, s] of steps.entries()) {
    const signals: ModelSignals = {
      policy: p,
      replicas: s.replicas,
      failed: s.failed ?? 0,
      queued: s.queued ?? 0,
      coldDemand: s.cold ?? false,
    };
    const result = decideScale(signals, state, s.at * 1000);
    expect(result.wanted, `step ${i} at ${s.at}s: wanted`).toBe(s.want);
    if (result.decision) {
      expect(result.decision.reason.length, `step ${i}: every decision says why`).toBeGreaterThan(0);
      decisions.push(result.decision);
    }
    state = result.state;
  }
  return decisions;
}

describe('decideScale', () => {
  it('steady load at or under target changes nothing', () => {
    const decisions = run(policy(), [
      { at: 0, replicas: ready(2, 8), want: 2 },
      { at: 30, replicas: ready(2, 8), want: 2 },
      { at: 60, replicas: ready(2, 7), want: 2 },
      { at: 600, replicas: ready(2, 8, 599_000), want: 2 },
    ]);
    expect(decisions, 'load exactly at target is not above it').toEqual([]);
  });

  it('sustained load above target scales up proportionally after the window, not one replica per pass', () => {
    const decisions = run(policy(), [
      { at: 0, replicas: ready(1, 20), want: 1 },
      { at: 10, replicas: ready(1, 20), want: 1 },
      { at: 29, replicas: ready(1, 20), want: 1 },
      { at: 30, replicas: ready(1, 20), want: 5 },
    ]);
    expect(decisions).toEqual([
      {
        from: 1,
        to: 5,
        direction: 'up',
        reason: expect.stringMatching(/20 request\(s\).*target_inflight 4.*for 30s; ceil\(20 \/ 4\) = 5/),
      },
    ]);
  });

  it("counts what engines queue beyond the router's own requests as demand, and never twice", () => {
    // Two replicas, 2 requests in flight from this router each; their engines say 10 each (8 came from elsewhere).
    const busy = ready(2, 4).map((r) => ({ ...r, engineQueued: 10 }));
    run(policy(), [
      { at: 0, replicas: busy, want: 2 },
      { at: 30, replicas: busy, want: 5 },
    ]);
    // The engines' counts include the router's requests: 6 in flight with engines at 6 is 6, not 12.
    const counted = ready(2, 6).map((r) => ({ ...r, engineQueued: 3 }));
    run(policy(), [
      { at: 0, replicas: counted, want: 2 },
      { at: 30, replicas: counted, want: 2 },
    ]);
  });

  it('does not count a replica whose engine is busy with requests from elsewhere as idle', () => {
    // No router traffic for a minute: without the engines' word all three are idle and go down to min.
    run(policy({ min: 1 }), [
      { at: 0, replicas: ready(3, 0), want: 3 },
      { at: 61, replicas: ready(3, 0), want: 1 },
    ]);
    // The engines hold 2 each from elsewhere: 6 requests need 2 replicas at target 4, so one goes, not two.
    const busy = ready(3, 0).map((r) => ({ ...r, engineQueued: 2 }));
    run(policy({ min: 1 }), [
      { at: 0, replicas: busy, want: 3 },
      { at: 61, replicas: busy, want: 2 },
    ]);
  });

  it('a burst shorter than the window adds nothing', () => {
    run(policy(), [
      { at: 0, replicas: ready(1, 0), want: 1 },
      { at: 5, replicas: ready(1, 40), want: 1 },
      { at: 20, replicas: ready(1, 40), want: 1 },
      { at: 25, replicas: ready(1, 2), want: 1 },
      { at: 40, replicas: ready(1, 40), want: 1 },
      { at: 69, replicas: ready(1, 40), want: 1 },
      { at: 70, replicas: ready(1, 40), want: 10 },
    ]);
  });

  it('caps a scale-up at max', () => {
    const [d] = run(policy({ max: 3 }), [
      { at: 0, replicas: ready(1, 100), want: 1 },
      { at: 30, replicas: ready(1, 100), want: 3 },
    ]);
    expect(d!.reason).toMatch(/capped at scaling.max 3/);
  });

  it('counts replicas still starting as capacity, so a slow start does not start a stampede', () => {
    run(policy(), [
      { at: 0, replicas: ready(1, 12), want: 1 },
      { at: 30, replicas: ready(1, 12), want: 3 },
      // Two are still starting for minutes; demand is the same: 12 over 3 is at target, nothing more is added.
      { at: 60, replicas: [...ready(1, 12), ...starting(2)], want: 3 },
      { at: 300, replicas: [...ready(1, 12), ...starting(2)], want: 3 },
      // Not even when the placed ones have not shown up yet: wanted itself is capacity on its way.
      { at: 330, replicas: ready(1, 12), want: 3 },
      // Demand grows past what three can take: proportional again.
      { at: 400, replicas: [...ready(1, 24), ...starting(2)], want: 3 },
      { at: 430, replicas: [...ready(1, 24), ...starting(2)], want: 6 },
    ]);
  });

  it('drains idle replicas down to min after idle_timeout, never below what demand needs', () => {
    const decisions = run(policy({ min: 1 }), [
      { at: 0, replicas: ready(4, 0, 0), want: 4 },
      { at: 59, replicas: ready(4, 0, 0), want: 4 },
      { at: 60, replicas: ready(4, 0, 0), want: 1 },
    ]);
    expect(decisions).toEqual([
      {
        from: 4,
        to: 1,
        direction: 'down',
        reason: expect.stringMatching(/4 replica\(s\) idle for 1m.*kept at scaling.min 1/),
      },
    ]);

    // Two of four idle, the other two busy at target: two go.
    const busy: ReplicaSignal[] = [
      ...ready(2, 8, 100_000),
      ...ready(2, 0, 0).map((r, i) => ({ ...r, id: `idle${i}` })),
    ];
    run(policy(), [{ at: 100, replicas: busy, want: 2 }], { wanted: 4, aboveSinceMs: null, lastUpAtMs: null });
  });

  it('gives up capacity a trickle does not need, though the trickle leaves no replica idle', () => {
    // Four replicas, each touched every second or so by one or two requests: none idle, but one would do.
    const trickle = (t: number, inFlight: number) => ready(4, inFlight, t * 1000);
    const decisions = run(
      policy({ idleTimeoutMs: 60_000 }),
      [
        { at: 0, replicas: trickle(0, 1), want: 4 },
        { at: 30, replicas: trickle(30, 5), want: 4 },
        { at: 40, replicas: trickle(40, 2), want: 4 },
        { at: 59, replicas: trickle(59, 1), want: 4 },
        { at: 60, replicas: trickle(60, 1), want: 2 },
        // The next step down needs another full idle_timeout of low demand.
        { at: 100, replicas: ready(2, 1, 100_000), want: 2 },
        { at: 159, replicas: ready(2, 1, 159_000), want: 2 },
        { at: 160, replicas: ready(2, 1, 160_000), want: 1 },
      ],
      { wanted: 4, aboveSinceMs: null, lastUpAtMs: null },
    );
    expect(decisions[0]).toMatchObject({
      from: 4,
      to: 2,
      reason: expect.stringMatching(/demand needed at most 2 replica\(s\).*for 1m/),
    });
  });

  it('does not scale down within the cool-down after a scale-up', () => {
    run(policy({ idleTimeoutMs: 10_000, cooldownMs: 120_000 }), [
      { at: 0, replicas: ready(1, 20), want: 1 },
      { at: 30, replicas: ready(1, 20), want: 5 },
      // The load stops at once; the new replicas are idle, but the cool-down holds them.
      { at: 60, replicas: ready(5, 0, 31_000), want: 5 },
      { at: 149, replicas: ready(5, 0, 31_000), want: 5 },
      { at: 150, replicas: ready(5, 0, 31_000), want: 1 },
    ]);
  });

  it('flapping load at the threshold neither scales up nor down', () => {
    const steps: Step[] = [];
    for (let t = 0; t <= 300; t += 5)
      steps.push({ at: t, replicas: ready(2, t % 10 === 0 ? 9 : 8, t * 1000), want: 2 });
    expect(run(policy({ idleTimeoutMs: 10_000 }), steps)).toEqual([]);
  });

  it('starts one replica for a model at zero as soon as a request waits, however many wait', () => {
    const p = policy({ min: 0, max: 4, targetInflight: 4 });
    const decisions = run(p, [
      { at: 0, replicas: [], want: 0 },
      { at: 1, replicas: [], cold: true, queued: 20, want: 1 },
      { at: 2, replicas: starting(1), queued: 20, want: 1 },
      { at: 10, replicas: starting(1), queued: 20, want: 1 },
      { at: 12, replicas: ready(1, 20), want: 1 },
    ]);
    expect(decisions).toEqual([
      { from: 0, to: 1, direction: 'up', reason: expect.stringMatching(/no replica.*20 requests wait/) },
    ]);
  });

  it('does not start a replica for a model whose max is 0', () => {
    run(policy({ min: 0, max: 0 }), [{ at: 0, replicas: [], cold: true, queued: 3, want: 0 }]);
  });

  it("goes back to zero after idle_timeout when min is 0, and keeps failed replicas' slots", () => {
    run(policy({ min: 0, max: 2, idleTimeoutMs: 3_000, cooldownMs: 0 }), [
      { at: 0, replicas: [], cold: true, want: 1 },
      { at: 5, replicas: ready(1, 0, 5_000), want: 1 },
      { at: 8, replicas: ready(1, 0, 5_000), want: 0 },
    ]);
    // A failed replica waiting for its retry is not a reason to scale down.
    run(policy({ min: 1 }), [{ at: 0, replicas: ready(1, 3, 0), failed: 1, want: 2 }], {
      wanted: 2,
      aboveSinceMs: null,
      lastUpAtMs: null,
    });
  });

  it('adopts what exists on its first decision, and follows limits the catalog moves', () => {
    const none = run(policy({ min: 1, max: 5 }), [{ at: 0, replicas: ready(3, 0, 0), want: 3 }]);
    expect(none, 'a restarted control plane neither stops nor starts anything on its own').toEqual([]);
    const [fresh] = run(policy({ min: 2 }), [{ at: 0, replicas: [], want: 2 }]);
    expect(fresh).toEqual({ from: 0, to: 2, direction: 'up', reason: 'scaling.min is 2' });
    const [lowered] = run(policy({ min: 1, max: 2 }), [{ at: 0, replicas: ready(4, 0, 0), want: 2 }], {
      wanted: 4,
      aboveSinceMs: null,
      lastUpAtMs: null,
    });
    expect(lowered).toEqual({ from: 4, to: 2, direction: 'down', reason: 'scaling.max is now 2' });
  });

  it('never scales down for idleness when idle_timeout is absent', () => {
    run(policy({ idleTimeoutMs: null }), [{ at: 10_000, replicas: ready(3, 0, 0), want: 3 }], {
      wanted: 3,
      aboveSinceMs: null,
      lastUpAtMs: null,
    });
  });
});
