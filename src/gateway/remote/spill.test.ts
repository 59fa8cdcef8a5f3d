// The spill-over decision, as a table: local while a local replica can start
// on the request within the bound, remote when none can (or none is ready),
// and local again whenever the remote cannot be chosen.
import { describe, expect, it } from 'vitest';
import type { LoadView } from '../core/pick.js';
import type { SpillPolicy } from '../ports/index.js';
import { decideSpill, predictedWaitMs, SpillStats, type LocalReplicaView } from './spill.js';

const saturated: SpillPolicy = { to: 'remote', when: 'saturated', maxQueueMs: 500 };
const fresh = (running: number, waiting: number, sentSince = 0): LoadView => ({
  inFlight: sentSince,
  sample: { running, waiting, sentSince },
});
const local = (view: LoadView, capacity: number | null = null): LocalReplicaView => ({ id: 'a', view, capacity });

describe('predictedWaitMs', () => {
  it.each([
    ['a free sequence', local(fresh(1, 0), 4), 1000, 0],
    ['full, first in line', local(fresh(4, 0), 4), 1000, 250],
    ['a queue of 3 behind 4 running', local(fresh(4, 3), 4), 1000, 1000],
    ['sends since the sample count', local(fresh(4, 0, 3), 4), 1000, 1000],
    ['no capacity learnt and no queue reported', local(fresh(9, 0)), 1000, 0],
    ['no capacity learnt, a queue reported', local(fresh(2, 1)), 1000, 1000],
    ['a queue with no service time known', local(fresh(4, 3), 4), null, Infinity],
    ['stale sample: in flight against capacity', local({ inFlight: 5 }, 4), 800, 400],
    ['stale sample, no capacity', local({ inFlight: 50 }), 800, 0],
  ])('%s', (_why, replica, serviceMs, want) => {
    expect(predictedWaitMs(replica, serviceMs)).toBe(want);
  });
});

describe('decideSpill', () => {
  it.each([
    ['a local replica with room stays local', saturated, [local(fresh(1, 0), 4)], true, 'local'],
    ['every local queue over the bound spills', saturated, [local(fresh(4, 8), 4)], true, 'remote'],
    ['one local replica with room is enough', saturated, [local(fresh(4, 8), 4), local(fresh(0, 0), 4)], true, 'local'],
    ['over the bound but the remote is out: local', saturated, [local(fresh(4, 8), 4)], false, 'local'],
    ['no local replica ready: remote', saturated, [], true, 'remote'],
    ['cold policy does not spill a busy fleet', { ...saturated, when: 'cold' }, [local(fresh(4, 8), 4)], true, 'local'],
    ['cold policy spills while none is ready', { ...saturated, when: 'cold' }, [], true, 'remote'],
    ['never is never', { ...saturated, when: 'never' }, [], true, 'local'],
  ] as const)('%s', (_why, policy, locals, remoteAvailable, go) => {
    const d = decideSpill({ policy, locals, serviceMs: 1000, remoteAvailable });
    expect(d.go, d.rule).toBe(go);
    expect(d.rule.startsWith(go === 'remote' ? 'spill:' : 'local'), `rule ${d.rule}`).toBe(true);
  });

  // Guards against spilling a saturated fleet's requests into a peer that is queueing too (its load read from its capacity).
  it.each([
    [
      'a peer with a queue: stays local, saying so',
      saturated,
      3,
      'local',
      'local (predicted wait 2250 ms > 500 ms; remote queues 3 too)',
    ],
    [
      'a peer with no queue: spills',
      saturated,
      0,
      'remote',
      'spill:saturated (predicted wait 2250 ms > 500 ms) -> remote',
    ],
  ] as const)('%s', (_why, policy, remoteQueued, go, rule) => {
    const d = decideSpill({
      policy,
      locals: [local(fresh(4, 8), 4)],
      serviceMs: 1000,
      remoteAvailable: true,
      remoteQueued,
    });
    expect([d.go, d.rule]).toEqual([go, rule]);
  });

  it('spills to a queueing peer while no local replica is ready', () => {
    const d = decideSpill({ policy: saturated, locals: [], serviceMs: null, remoteAvailable: true, remoteQueued: 5 });
    expect(d.go).toBe('remote');
  });

  it('says the numbers it compared in the rule', () => {
    const d = decideSpill({
      policy: saturated,
      locals: [local(fresh(4, 8), 4)],
      serviceMs: 1000,
      remoteAvailable: true,
    });
    expect(d.rule).toBe('spill:saturated (predicted wait 2250 ms > 500 ms) -> remote');
  });
});

describe('SpillStats', () => {
  it('learns a capacity only from a sample that shows a queue, and keeps the largest', () => {
    const s = new SpillStats(() => 0);
    expect(s.capacityOf('a', fresh(3, 0))).toBeNull();
    expect(s.capacityOf('a', fresh(2, 1))).toBe(2);
    expect(s.capacityOf('a', fresh(4, 2))).toBe(4);
    expect(s.capacityOf('a', fresh(1, 1))).toBe(4);
    s.forget(new Set());
    expect(s.capacityOf('a', { inFlight: 0 })).toBeNull();
  });
});
