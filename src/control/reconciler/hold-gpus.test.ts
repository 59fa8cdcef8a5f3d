import { describe, expect, it } from 'vitest';
import type { PlacementNode } from '../placement/index.js';
import { holdGpus } from './hold-gpus.js';
import type { ReplicaRecord } from './types.js';

function node(id: string, gpusInUse: number[] = []): PlacementNode {
  return {
    id,
    labels: {},
    adminState: 'ready',
    liveness: 'up',
    gpus: [],
    gpusInUse,
    weightsHeld: [],
    fabrics: [],
    engines: [],
  };
}

function holder(shards: { nodeId: string; gpuIndices: number[] }[]): ReplicaRecord {
  return {
    id: 'r',
    model: 'm',
    profile: 'p',
    pool: null,
    fabric: null,
    state: 'stopping',
    endpoint: null,
    error: null,
    createdAtMs: 0,
    lastUsedAtMs: null,
    failures: 0,
    nextRetryAtMs: null,
    stateSinceMs: 0,
    updatedAtMs: 0,
    replaces: null,
    shards: shards.map((s, rank) => ({ id: `s${rank}`, rank, state: 'stopping', error: null, endpoint: null, ...s })),
  };
}

describe('holdGpus', () => {
  it('adds the GPUs replicas hold to what the nodes report, sorted and without repeats', () => {
    const nodes = holdGpus(
      [node('a', [3]), node('b')],
      [
        holder([
          { nodeId: 'a', gpuIndices: [2, 3] },
          { nodeId: 'b', gpuIndices: [1] },
        ]),
        holder([{ nodeId: 'a', gpuIndices: [0] }]),
      ],
    );
    expect(nodes.map((n) => [n.id, n.gpusInUse])).toEqual([
      ['a', [0, 2, 3]],
      ['b', [1]],
    ]);
  });

  it('returns a node no replica uses as it was', () => {
    const free = node('free', [1]);
    const [out] = holdGpus([free], [holder([{ nodeId: 'elsewhere', gpuIndices: [0] }])]);
    expect(out, 'the same object: nothing to copy').toBe(free);
  });
});
