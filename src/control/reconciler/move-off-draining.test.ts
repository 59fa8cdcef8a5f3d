import { describe, expect, it } from 'vitest';
import type { PlacementRequest } from '../placement/index.js';
import { filterByDraining, type ModelGroup } from './classify.js';
import { finishDrains, moveOffDraining, type MoveInput } from './move-off-draining.js';
import type { PlanModel } from './plan-types.js';
import type { ReplicaRecord } from './types.js';
import { replicaRecord, shardRecord } from '../../../test/support/reconciler-records.js';

const NOW = 1_000_000;
const model: PlanModel = { name: 'm', source: 'hf://o/m', scaling: { min: 1, max: 1 }, profiles: [] };

const replica = (id: string, nodeId: string, over: Partial<ReplicaRecord> = {}): ReplicaRecord =>
  replicaRecord(id, { shards: [shardRecord({ id: `${id}-s0`, nodeId })], ...over });

describe('moveOffDraining', () => {
  function input(group: ModelGroup, over: Partial<MoveInput> = {}): MoveInput {
    const drainingNodes = new Set(['d']);
    return {
      model,
      group,
      split: filterByDraining(group.live, drainingNodes),
      drainingNodes,
      stopped: new Set(),
      maxParallel: 1,
      modelKey: () => 'k',
      request: (excludeNodes): PlacementRequest => ({
        model: 'm',
        weightsKey: 'w',
        profiles: [],
        ...(excludeNodes ? { excludeNodes } : {}),
      }),
      ...over,
    };
  }

  it("asks for a replacement away from the replica's nodes", () => {
    const out = moveOffDraining(input({ live: [replica('a', 'd')], draining: [], failed: [] }));
    expect(out.actions).toEqual([]);
    expect(out.requests.map((r) => [r.purpose, r.replaces?.id, r.request.excludeNodes])).toEqual([
      ['drain', 'a', ['d']],
    ]);
  });

  it('marks the old replica draining once its replacement is ready, and not before', () => {
    const old = replica('a', 'd');
    const starting = moveOffDraining(
      input({ live: [old, replica('b', 'n', { replaces: 'a', state: 'starting' })], draining: [], failed: [] }),
    );
    expect(starting).toEqual({ actions: [], requests: [] });
    const ready = moveOffDraining(
      input({ live: [old, replica('b', 'n', { replaces: 'a' })], draining: [], failed: [] }),
    );
    expect(ready.actions).toEqual([
      { kind: 'drain', replicaId: 'a', reason: 'node d is draining and replacement b is ready' },
    ]);
  });

  it('moves at most maxParallel at a time, counting those already moving or draining', () => {
    const live = [replica('a', 'd'), replica('b', 'd'), replica('c', 'd')];
    expect(
      moveOffDraining(input({ live, draining: [], failed: [] }, { maxParallel: 2 })).requests.map(
        (r) => r.replaces?.id,
      ),
    ).toEqual(['a', 'b']);
    expect(
      moveOffDraining(
        input({ live, draining: [replica('x', 'd', { state: 'draining' })], failed: [] }, { maxParallel: 2 }),
      ).requests.map((r) => r.replaces?.id),
    ).toEqual(['a']);
  });

  it('leaves alone a replica the count rules already stop', () => {
    expect(
      moveOffDraining(input({ live: [replica('a', 'd')], draining: [], failed: [] }, { stopped: new Set(['a']) }))
        .requests,
    ).toEqual([]);
  });
});

describe('finishDrains', () => {
  const opts = { drainDeadlineMs: 300_000 };
  const cases: { name: string; sinceMs: number; inFlight?: number; replaced?: boolean; reason: string | null }[] = [
    { name: 'marked this instant: the router may not have seen the mark', sinceMs: NOW, reason: null },
    { name: 'requests still in flight', sinceMs: NOW - 1000, inFlight: 2, reason: null },
    { name: 'nothing in flight', sinceMs: NOW - 1000, reason: 'drained: no requests in flight' },
    {
      name: 'nothing in flight, replaced',
      sinceMs: NOW - 1000,
      replaced: true,
      reason: 'drained: no requests in flight, and its replacement is serving',
    },
    {
      name: 'deadline passed with requests in flight',
      sinceMs: NOW - 300_000,
      inFlight: 2,
      reason: 'drain deadline of 5m passed with 2 request(s) still in flight',
    },
    { name: 'deadline passed with none', sinceMs: NOW - 300_000, reason: 'drain deadline of 5m passed' },
  ];
  for (const c of cases) {
    it(`${c.reason === null ? 'keeps' : 'stops'} a draining replica: ${c.name}`, () => {
      const group: ModelGroup = {
        live: c.replaced ? [replica('b', 'n', { replaces: 'a' })] : [],
        draining: [replica('a', 'd', { state: 'draining', stateSinceMs: c.sinceMs })],
        failed: [],
      };
      const actions = finishDrains(
        group,
        c.inFlight === undefined ? undefined : new Map([['a', c.inFlight]]),
        NOW,
        opts,
      );
      expect(actions).toEqual(c.reason === null ? [] : [{ kind: 'stop', replicaId: 'a', reason: c.reason }]);
    });
  }
});
