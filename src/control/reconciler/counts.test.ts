import { describe, expect, it } from 'vitest';
import type { PlacementRequest } from '../placement/index.js';
import { filterByDraining } from './classify.js';
import { keepFailed, pickSurplus, reconcileCounts, stillBlocked, type CountInput } from './counts.js';
import type { ModelRejections, PlanModel } from './plan-types.js';
import type { ReplicaRecord } from './types.js';
import { replicaRecord, shardRecord } from '../../../test/support/reconciler-records.js';

const NOW = 1_000_000;

const replica = (id: string, over: Partial<ReplicaRecord> = {}): ReplicaRecord =>
  replicaRecord(id, { shards: [shardRecord({ id: `${id}-s0` })], ...over });

const model: PlanModel = { name: 'm', source: 'hf://o/m', scaling: { min: 0, max: 4 }, profiles: [] };
const request = (): PlacementRequest => ({ model: 'm', weightsKey: 'w', profiles: [] });

describe('keepFailed', () => {
  it('keeps the failed replicas that fill missing slots, soonest retry first, and forgets the rest', () => {
    const failed = [
      replica('late', { state: 'failed', nextRetryAtMs: 30 }),
      replica('soon', { state: 'failed', nextRetryAtMs: 10 }),
      replica('b', { state: 'failed', nextRetryAtMs: 20 }),
    ];
    const out = keepFailed('m', failed, 3, 1);
    expect(out.kept.map((r) => r.id)).toEqual(['soon', 'b']);
    expect(out.actions).toEqual([
      { kind: 'forget', replicaId: 'late', reason: 'model m has its 3 wanted replica(s) without it' },
    ]);
  });

  it('keeps none when the model has what it wants', () => {
    expect(keepFailed('m', [replica('f', { state: 'failed' })], 1, 2).kept).toEqual([]);
  });
});

describe('stillBlocked', () => {
  const held: ModelRejections = {
    model: 'm',
    purpose: 'scale',
    rejections: [],
    notes: [],
    nodeCount: 1,
    modelKey: 'k',
    atMs: NOW - 1000,
    contended: false,
  };
  const cases: { name: string; held: ModelRejections | undefined; key?: string; same?: boolean; blocked: boolean }[] = [
    { name: 'the same model on the same fleet, recently', held, blocked: true },
    { name: 'no rejection last pass', held: undefined, blocked: false },
    { name: 'a drain rejection', held: { ...held, purpose: 'drain' }, blocked: false },
    { name: 'a contended rejection', held: { ...held, contended: true }, blocked: false },
    { name: 'older than blockedRetryMs', held: { ...held, atMs: NOW - 60_000 }, blocked: false },
    { name: 'a redefined model', held, key: 'other', blocked: false },
    { name: 'a changed fleet', held, same: false, blocked: false },
  ];
  for (const c of cases) {
    it(`${c.blocked ? 'holds' : 'tries again'}: ${c.name}`, () => {
      expect(
        stillBlocked(
          c.held,
          NOW,
          60_000,
          () => c.key ?? 'k',
          () => c.same ?? true,
        ),
      ).toBe(c.blocked);
    });
  }

  it('hashes nothing when a cheaper check already says no', () => {
    const hashed: string[] = [];
    stillBlocked(
      { ...held, contended: true },
      NOW,
      60_000,
      () => (hashed.push('model'), 'k'),
      () => (hashed.push('fleet'), true),
    );
    expect(hashed).toEqual([]);
  });
});

describe('pickSurplus', () => {
  const three = [
    replica('a', { createdAtMs: 1, stateSinceMs: 1, lastUsedAtMs: NOW - 5000 }),
    replica('b', { createdAtMs: 2, stateSinceMs: 2, lastUsedAtMs: NOW - 90_000 }),
    replica('c', { createdAtMs: 3, stateSinceMs: 3, lastUsedAtMs: NOW - 1000 }),
  ];
  const base = {
    model: 'm',
    live: three,
    split: filterByDraining(three, new Set()),
    drainingNodes: new Set<string>(),
    wanted: 2,
    inFlight: undefined,
    now: NOW,
  };

  it('without the scaler stops the newest at once', () => {
    expect(pickSurplus({ ...base, scaled: false }).actions).toEqual([
      { kind: 'stop', replicaId: 'c', reason: 'model m wants 2 replica(s) and has 3; this one is surplus' },
    ]);
  });

  it('with the scaler drains the idlest ready one', () => {
    const out = pickSurplus({ ...base, scaled: true });
    expect(out.actions.map((a) => [a.kind, 'replicaId' in a && a.replicaId])).toEqual([['drain', 'b']]);
    expect(out.actions[0]!.reason).toMatch(/\(idle 90s\): it finishes what it serves, then stops$/);
    expect([...out.stopped]).toEqual(['b']);
  });

  it('with the scaler prefers the least busy over the idlest', () => {
    const out = pickSurplus({
      ...base,
      scaled: true,
      inFlight: new Map([
        ['b', 2],
        ['a', 1],
      ]),
    });
    expect(out.actions.map((a) => 'replicaId' in a && a.replicaId)).toEqual(['c']);
  });

  it('takes a replica on a draining node first', () => {
    const onDrain = replica('a', {
      createdAtMs: 1,
      shards: [{ id: 'a-s0', nodeId: 'd', rank: 0, gpuIndices: [0], state: 'ready', error: null, endpoint: null }],
    });
    const live = [onDrain, three[1]!, three[2]!];
    const out = pickSurplus({
      ...base,
      live,
      split: filterByDraining(live, new Set(['d'])),
      drainingNodes: new Set(['d']),
      scaled: false,
    });
    expect([...out.stopped]).toEqual(['a']);
  });

  it('stops a replica still starting even when scaled, since it serves nothing to finish', () => {
    // Idle since it was made, long ago: the idlest, yet not ready.
    const live = [replica('a', { lastUsedAtMs: NOW - 1000 }), replica('s', { state: 'starting', createdAtMs: 0 })];
    const out = pickSurplus({ ...base, live, split: filterByDraining(live, new Set()), wanted: 1, scaled: true });
    expect(out.actions.map((a) => [a.kind, 'replicaId' in a && a.replicaId])).toEqual([['stop', 's']]);
  });

  it('does nothing at or under wanted', () => {
    expect(pickSurplus({ ...base, wanted: 3, scaled: true })).toEqual({ actions: [], stopped: new Set() });
  });
});

describe('reconcileCounts', () => {
  function input(over: Partial<CountInput>): CountInput {
    const group = over.group ?? { live: [], draining: [], failed: [] };
    return {
      model,
      wanted: 2,
      group,
      split: filterByDraining(group.live, new Set()),
      drainingNodes: new Set(),
      scaled: false,
      inFlight: undefined,
      now: NOW,
      held: undefined,
      blockedRetryMs: 60_000,
      modelKey: () => 'k',
      sameFleet: () => true,
      request,
      ...over,
    };
  }

  it('asks for retries whose backoff is over first, then new replicas', () => {
    const due = replica('due', { state: 'failed', nextRetryAtMs: NOW });
    const waiting = replica('waiting', { state: 'failed', nextRetryAtMs: NOW + 1 });
    const out = reconcileCounts(input({ wanted: 4, group: { live: [], draining: [], failed: [waiting, due] } }));
    expect(out.requests.map((r) => r.retryOf?.id ?? 'new')).toEqual(['due', 'new', 'new']);
    expect(out.requests.every((r) => r.purpose === 'scale')).toBe(true);
  });

  it("keeps last pass's rejection instead of asking again while nothing changed", () => {
    const held: ModelRejections = {
      model: 'm',
      purpose: 'scale',
      rejections: [],
      notes: [],
      nodeCount: 0,
      modelKey: 'k',
      atMs: NOW - 1,
      contended: false,
    };
    const out = reconcileCounts(input({ held }));
    expect(out.requests).toEqual([]);
    expect(out.held).toBe(held);
  });

  it('does not hold a rejection when nothing is wanted', () => {
    const held: ModelRejections = {
      model: 'm',
      purpose: 'scale',
      rejections: [],
      notes: [],
      nodeCount: 0,
      modelKey: 'k',
      atMs: NOW - 1,
      contended: false,
    };
    expect(reconcileCounts(input({ wanted: 0, held })).held).toBeUndefined();
  });

  it('forgets surplus failed replicas before it stops surplus live ones', () => {
    const group = {
      live: [replica('a'), replica('b', { createdAtMs: 5 })],
      draining: [],
      failed: [replica('f', { state: 'failed' })],
    };
    const out = reconcileCounts(input({ wanted: 1, group }));
    expect(out.actions.map((a) => [a.kind, 'replicaId' in a && a.replicaId])).toEqual([
      ['forget', 'f'],
      ['stop', 'b'],
    ]);
    expect([...out.stopped]).toEqual(['b']);
  });
});
