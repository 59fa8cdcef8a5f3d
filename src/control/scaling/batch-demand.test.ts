// Batch lines as demand: counted only up to scaling.batch_max_replicas, so a
// batch of 2,000 lines never makes a model grow past what its operator
// allowed (by default: what already runs). Regression guard: without the
// cap, a queued batch reads as 2,000 requests waiting and the scaler starts
// scaling.max replicas for work that was meant for idle GPUs.
import { describe, expect, it } from 'vitest';
import { batchCounted, measure } from './phases.js';
import { decideScale } from './scaler.js';
import type { BatchDemand, ModelSignals, ReplicaSignal, ScalingPolicy } from './types.js';

const policy = (over: Partial<ScalingPolicy> = {}): ScalingPolicy => ({
  min: 0,
  max: 8,
  targetInflight: 4,
  idleTimeoutMs: 60_000,
  windowMs: 0,
  cooldownMs: 0,
  ...over,
});

function ready(n: number, inFlightEach: number): ReplicaSignal[] {
  return Array.from({ length: n }, (_, i) => ({ id: `r${i}`, ready: true, inFlight: inFlightEach, idleSinceMs: 0 }));
}

const signals = (p: ScalingPolicy, replicas: ReplicaSignal[], batch?: BatchDemand, queued = 0): ModelSignals => ({
  policy: p,
  replicas,
  failed: 0,
  queued,
  coldDemand: false,
  ...(batch ? { batch } : {}),
});

describe('batch demand in the scaler', () => {
  const table: {
    name: string;
    s: ModelSignals;
    /** Demand measure() reads. */
    demand: number;
    /** Wanted after one decision that starts from what exists. */
    want: number;
  }[] = [
    {
      name: 'absent batch_max_replicas: 2,000 waiting lines keep two replicas busy and start none',
      s: signals(policy(), ready(2, 3), { inFlight: 6, waiting: 2000 }),
      demand: 8,
      want: 2,
    },
    {
      name: 'absent batch_max_replicas: a model at zero is not started for a batch',
      s: signals(policy(), [], { inFlight: 0, waiting: 2000 }),
      demand: 0,
      want: 0,
    },
    {
      name: 'batch_max_replicas 4: the batch may grow the model to 4, not to max 8',
      s: signals(policy({ batchMaxReplicas: 4 }), ready(2, 4), { inFlight: 8, waiting: 2000 }),
      demand: 16,
      want: 4,
    },
    {
      name: 'batch_max_replicas 1: a model at zero starts one for a batch',
      s: signals(policy({ batchMaxReplicas: 1 }), [], { inFlight: 0, waiting: 50 }),
      demand: 4,
      want: 1,
    },
    {
      name: 'interactive demand comes first: batch lines fill only what is left under the cap',
      s: signals(policy({ batchMaxReplicas: 2 }), ready(2, 4), { inFlight: 2, waiting: 100 }, 3),
      // 8 in flight less 2 batch lines + 3 held = 9 interactive; the cap (2 × 4) leaves no room for batch lines.
      demand: 9,
      want: 3,
    },
    {
      name: 'interactive demand still scales the model past batch_max_replicas',
      s: signals(policy({ batchMaxReplicas: 1 }), ready(1, 4), undefined, 20),
      demand: 24,
      want: 6,
    },
    {
      name: 'no batch: demand as before',
      s: signals(policy(), ready(2, 5)),
      demand: 10,
      want: 3,
    },
  ];
  for (const c of table) {
    it(c.name, () => {
      expect(measure(c.s).demand, 'demand').toBe(c.demand);
      const r = decideScale(c.s, { wanted: c.s.replicas.length, aboveSinceMs: 0, lastUpAtMs: null }, 1_000);
      expect(r.wanted, r.decision?.reason ?? 'no decision').toBe(c.want);
    });
  }

  it('says in the decision that a batch started a model at zero', () => {
    const s = signals(policy({ batchMaxReplicas: 2 }), [], { inFlight: 0, waiting: 3 });
    const r = decideScale(s, { wanted: 0, aboveSinceMs: null, lastUpAtMs: null }, 5);
    expect(r.decision?.reason).toBe(
      '3 batch line(s) wait for a model with no replica; one is started (scaling.batch_max_replicas 2)',
    );
  });

  it('keeps what runs while a batch uses it: idle_timeout does not drain replicas a batch still needs', () => {
    // Two replicas, idle for interactive traffic for long; batch lines in flight on one, many waiting.
    const replicas: ReplicaSignal[] = [
      { id: 'a', ready: true, inFlight: 3, idleSinceMs: 0 },
      { id: 'b', ready: true, inFlight: 0, idleSinceMs: 0 },
    ];
    const s = signals(policy({ min: 0 }), replicas, { inFlight: 3, waiting: 500 });
    const r = decideScale(s, { wanted: 2, aboveSinceMs: null, lastUpAtMs: null }, 10 * 60_000);
    expect(r.wanted).toBe(2);
  });

  it('never counts more batch lines in flight than the replicas report in flight', () => {
    // The runner's count may run ahead of the router's for a moment (a line dispatched, not yet arrived).
    expect(batchCounted(signals(policy(), ready(1, 1), { inFlight: 5, waiting: 0 }), 1, 4)).toEqual({
      interactive: 0,
      counted: 1,
    });
  });
});

describe('batch demand through the scaling bridge', () => {
  it("passes each model's batch lines to its decision: only batch_max_replicas' worth starts replicas", async () => {
    const { ScalingBridge } = await import('../reconciler/scaling-bridge.js');
    const pino = (await import('pino')).default;
    const bridge = new ScalingBridge({ now: () => 0, logger: pino({ level: 'silent' }) });
    const capped = { name: 'capped', scaling: policy({ min: 0, max: 8, targetInflight: 2, batchMaxReplicas: 3 }) };
    const plain = { name: 'plain', scaling: policy({ min: 0, max: 8, targetInflight: 2 }) };
    const batch = new Map([
      ['capped', { inFlight: 0, waiting: 500 }],
      ['plain', { inFlight: 0, waiting: 500 }],
    ]);
    // With no window, 500 waiting lines take the capped model to batch_max_replicas (not max 8); the plain one stays at 0.
    const first = bridge.decide(0, [], [capped, plain], new Map(), undefined, batch);
    expect(Object.fromEntries(first)).toEqual({ capped: 3, plain: 0 });
  });
});
