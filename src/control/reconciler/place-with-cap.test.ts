import { describe, expect, it } from 'vitest';
import type { PlacementNode } from '../placement/index.js';
import { type PendingRequest, placeWithCap, requestBuilder } from './place-with-cap.js';
import type { ModelRejections, PlanModel } from './plan-types.js';
import type { ReplicaRecord } from './types.js';
import { healthyGpus, placementNode, replicaRecord, shardRecord } from '../../../test/support/reconciler-records.js';

const NOW = 1_000_000;

const node = (id: string, gpus: number): PlacementNode => placementNode(id, { gpus: healthyGpus(gpus) });

function model(name: string, gpus: number): PlanModel {
  return {
    name,
    source: `hf://o/${name}`,
    scaling: { min: 1, max: 1 },
    profiles: [
      {
        name: 'p',
        engine: 'vllm',
        gpus,
        shards: 1,
        gpuClasses: [],
        gpuMemoryGiB: null,
        memoryGiB: null,
        diskGiB: null,
        pool: null,
      },
    ],
  };
}

function scale(m: PlanModel, n: number): PendingRequest[] {
  const request = requestBuilder(m, []);
  return Array.from({ length: n }, () => ({
    request: request(),
    purpose: 'scale' as const,
    model: m,
    modelKey: m.name,
  }));
}

const leaving: ReplicaRecord = replicaRecord('old', {
  model: 'small',
  shards: [shardRecord({ id: 's', nodeId: 'a' })],
});

describe('placeWithCap', () => {
  it('with nothing to place (an idle pass) plans nothing and keeps the held rejections', () => {
    const held: ModelRejections = {
      model: 'huge',
      purpose: 'scale',
      rejections: [],
      notes: [],
      nodeCount: 1,
      modelKey: 'k',
      atMs: NOW - 1,
      contended: false,
    };
    const out = placeWithCap([node('a', 4)], [], 10, NOW, new Map([['huge', held]]));
    expect(out).toEqual({ actions: [], rejections: new Map([['huge', held]]), blockedDrains: [], throttled: 0 });
  });

  it('stops after the cap-th placement and counts the rest as throttled', () => {
    const out = placeWithCap([node('a', 4)], scale(model('small', 1), 3), 2, NOW);
    expect(out.actions.map((a) => a.kind)).toEqual(['create', 'create']);
    expect(out.throttled).toBe(1);
    expect(out.rejections.size).toBe(0);
  });

  it('counts placements, not attempts: a model that fits nowhere does not use up the pass', () => {
    const out = placeWithCap([node('a', 2)], [...scale(model('huge', 8), 3), ...scale(model('small', 1), 1)], 1, NOW);
    expect(out.actions.map((a) => a.kind === 'create' && a.model)).toEqual(['small']);
    expect(out.throttled).toBe(0);
    expect(out.rejections.get('huge')).toMatchObject({ purpose: 'scale', atMs: NOW, nodeCount: 1, contended: false });
  });

  it('marks a failure after an earlier placement took capacity as contended', () => {
    const out = placeWithCap(
      [node('a', 1)],
      [...scale(model('first', 1), 1), ...scale(model('second', 1), 1)],
      10,
      NOW,
    );
    expect(out.rejections.get('second')?.contended, 'the snapshot alone does not explain it').toBe(true);
  });

  it('reports a replacement that fits nowhere as a blocked drain, without replacing a held scale rejection', () => {
    const small = model('small', 1);
    const held: ModelRejections = {
      model: 'small',
      purpose: 'scale',
      rejections: [],
      notes: [],
      nodeCount: 1,
      modelKey: 'k',
      atMs: NOW - 5,
      contended: false,
    };
    const drain: PendingRequest = {
      request: requestBuilder(small, [leaving])(['a']),
      purpose: 'drain',
      model: small,
      modelKey: 'small',
      replaces: leaving,
    };
    const out = placeWithCap([node('a', 4)], [drain], 10, NOW, new Map([['small', held]]));
    expect(out.rejections.get('small'), 'the held rejection stands').toBe(held);
    expect(out.blockedDrains).toEqual([
      {
        replicaId: 'old',
        model: 'small',
        nodeIds: ['a'],
        reason:
          'replica old stays on draining node a: no other node can take a replacement (see explain-placement for small)',
      },
    ]);
  });

  it('places a retry as the failed replica it retries', () => {
    const m = model('small', 1);
    const failed = { ...leaving, state: 'failed' as const, failures: 2, error: 'oom' };
    const out = placeWithCap([node('b', 1)], [{ ...scale(m, 1)[0]!, retryOf: failed }], 10, NOW);
    expect(out.actions).toMatchObject([
      { kind: 'retry', replicaId: 'old', model: 'small', reason: 'retry 2 after: oom; placed on b' },
    ]);
  });
});

describe('requestBuilder', () => {
  it('builds the request once and adds excluded nodes only when there are some', () => {
    const request = requestBuilder(model('m', 1), [leaving]);
    expect(request(), 'shared between requests').toBe(request([]));
    expect(request(['a'])).toMatchObject({ model: 'm', excludeNodes: ['a'], existingReplicas: [{ nodeIds: ['a'] }] });
  });
});
