import { describe, expect, it } from 'vitest';
import type { PlacementNode } from '../placement/index.js';
import { classifyReplicas, filterByDraining, groupByModel } from './classify.js';
import { compilePlanOptions, type PlanModel } from './plan-types.js';
import type { ReplicaRecord } from './types.js';
import {
  healthyGpus,
  placementNode,
  planModel,
  replicaRecord,
  shardRecord as shard,
} from '../../../test/support/reconciler-records.js';

const NOW = 1_000_000;
const opts = compilePlanOptions({ stopGraceMs: 60_000, retryBaseMs: 10_000 });

const node = (id: string, over: Partial<PlacementNode> = {}): PlacementNode =>
  placementNode(id, { gpus: healthyGpus(2), ...over });
const replica = (id: string, over: Partial<ReplicaRecord> = {}): ReplicaRecord =>
  replicaRecord(id, { shards: [shard({ id: `${id}-s0` })], ...over });

describe('classifyReplicas', () => {
  const cases: {
    name: string;
    nodes: PlacementNode[];
    replica: ReplicaRecord;
    action: string | null;
    reason?: RegExp;
    survives: boolean;
    failed: boolean;
    holds: boolean;
  }[] = [
    {
      name: 'a ready replica on a healthy node survives',
      nodes: [node('n1')],
      replica: replica('r'),
      action: null,
      survives: true,
      failed: false,
      holds: true,
    },
    {
      name: 'a stale node moves nothing',
      nodes: [node('n1', { liveness: 'stale' })],
      replica: replica('r'),
      action: null,
      survives: true,
      failed: false,
      holds: true,
    },
    {
      name: 'a lost node marks the replica lost',
      nodes: [node('n1', { liveness: 'lost' })],
      replica: replica('r'),
      action: 'markLost',
      reason: /^node n1 lost: the replica is replaced elsewhere$/,
      survives: false,
      failed: false,
      holds: true,
    },
    {
      name: 'a node gone from the inventory marks it lost',
      nodes: [],
      replica: replica('r'),
      action: 'markLost',
      survives: false,
      failed: false,
      holds: true,
    },
    {
      name: 'a failed shard marks it failed with backoff',
      nodes: [node('n1')],
      replica: replica('r', { shards: [shard({ state: 'failed', error: 'oom' })] }),
      action: 'markFailed',
      reason: /^shard 0 on node n1 failed: oom; failure 1 in a row, placed again in 10s$/,
      survives: false,
      failed: true,
      holds: false,
    },
    {
      name: 'a failed shard of a draining replica is not retried',
      nodes: [node('n1')],
      replica: replica('r', { state: 'draining', shards: [shard({ state: 'failed' })] }),
      action: null,
      survives: true,
      failed: false,
      holds: true,
    },
    {
      name: 'an unhealthy GPU stops it',
      nodes: [node('n1', { gpus: [{ index: 0, healthy: false }] })],
      replica: replica('r'),
      action: 'stop',
      reason: /^cannot keep running where it is: node n1: /,
      survives: false,
      failed: false,
      holds: true,
    },
    {
      name: 'a stopping replica whose shards stopped is forgotten',
      nodes: [node('n1')],
      replica: replica('r', { state: 'stopping', shards: [shard({ state: 'stopped' })] }),
      action: 'forget',
      reason: /^every shard has stopped$/,
      survives: false,
      failed: false,
      holds: false,
    },
    {
      name: 'a stopping replica on a lost node is forgotten',
      nodes: [node('n1', { liveness: 'lost' })],
      replica: replica('r', { state: 'stopping' }),
      action: 'forget',
      survives: false,
      failed: false,
      holds: false,
    },
    {
      name: 'a stopping replica within the grace keeps its GPUs',
      nodes: [node('n1')],
      replica: replica('r', { state: 'stopping', stateSinceMs: NOW - 59_999 }),
      action: null,
      survives: false,
      failed: false,
      holds: true,
    },
    {
      name: 'a stopping replica past the grace is forgotten',
      nodes: [node('n1')],
      replica: replica('r', { state: 'stopping', stateSinceMs: NOW - 60_000 }),
      action: 'forget',
      reason: /did not confirm the stop within 1m$/,
      survives: false,
      failed: false,
      holds: false,
    },
    {
      name: 'a failed replica waits with the failed ones',
      nodes: [node('n1')],
      replica: replica('r', { state: 'failed' }),
      action: null,
      survives: false,
      failed: true,
      holds: false,
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const out = classifyReplicas([c.replica], c.nodes, NOW, opts);
      expect(
        out.actions.map((a) => a.kind),
        'the action taken',
      ).toEqual(c.action ? [c.action] : []);
      if (c.reason) expect(out.actions[0]!.reason).toMatch(c.reason);
      expect(out.survivors.length === 1, 'survives to be counted').toBe(c.survives);
      expect(out.failed.length === 1, 'waits among the failed').toBe(c.failed);
      expect(out.holdsGpus.length === 1, 'its GPUs stay taken').toBe(c.holds);
    });
  }

  it('gives a replica marked failed its new failure count and retry time, as the plan will apply them', () => {
    const out = classifyReplicas(
      [replica('r', { failures: 2, shards: [shard({ state: 'failed' })] })],
      [node('n1')],
      NOW,
      opts,
    );
    expect(out.failed[0]).toMatchObject({
      state: 'failed',
      failures: 3,
      nextRetryAtMs: NOW + 40_000,
      error: 'shard 0 on node n1 failed',
    });
  });
});

describe('groupByModel', () => {
  const models: PlanModel[] = [planModel(1, 1, { source: 'hf://o/m' })];

  it('groups live, draining and failed replicas of catalog models', () => {
    const out = groupByModel(
      [replica('a'), replica('b', { state: 'draining' })],
      [replica('c', { state: 'failed' })],
      models,
    );
    expect(out.actions).toEqual([]);
    expect(
      [...out.groups].map(([m, g]) => [
        m,
        g.live.map((r) => r.id),
        g.draining.map((r) => r.id),
        g.failed.map((r) => r.id),
      ]),
    ).toEqual([['m', ['a'], ['b'], ['c']]]);
  });

  it('stops replicas of a removed model or profile, and forgets failed ones of a removed model', () => {
    const out = groupByModel(
      [replica('a', { model: 'gone' }), replica('b', { profile: 'old' })],
      [replica('c', { model: 'gone', state: 'failed' })],
      models,
    );
    expect(out.actions).toEqual([
      { kind: 'stop', replicaId: 'a', reason: 'model gone is no longer in the catalog' },
      { kind: 'stop', replicaId: 'b', reason: 'model m no longer has profile old' },
      { kind: 'forget', replicaId: 'c', reason: 'model gone is no longer in the catalog' },
    ]);
    expect(out.groups.size, 'nothing left to count').toBe(0);
  });
});

describe('filterByDraining', () => {
  it('counts a replica being moved and its replacement as one slot', () => {
    const old = replica('old', { shards: [shard({ nodeId: 'd' })] });
    const waiting = replica('waiting', { shards: [shard({ nodeId: 'd' })] });
    const replacement = replica('new', { replaces: 'old' });
    const split = filterByDraining([old, waiting, replacement, replica('other')], new Set(['d']));
    expect(split.outgoing.map((r) => r.id)).toEqual(['old', 'waiting']);
    expect([...split.movingOut], 'only the one with a replacement is moving').toEqual(['old']);
    expect(split.replacementOf.get('old')?.id).toBe('new');
    expect(split.effective).toBe(3);
  });
});
