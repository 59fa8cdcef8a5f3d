// The idle pass: replicas already placed, checked against a new snapshot.
import { describe, expect, it } from 'vitest';
import { placeMany } from './place.js';
import { checkReplicas, type ExistingReplica } from './replicas.js';
import { occupy, syntheticFleet, syntheticNode, syntheticRequests } from './synthetic.js';
import type { PlacementNode } from './types.js';

const replica = (
  id: string,
  shards: { nodeId: string; gpuIndices: number[] }[],
  extra: Partial<ExistingReplica> = {},
): ExistingReplica => ({
  id,
  model: 'llama',
  shards: shards.map((s, rank) => ({ ...s, rank })),
  ...extra,
});

function codes(nodes: PlacementNode[], replicas: ExistingReplica[]): string[] {
  return checkReplicas({ nodes }, replicas).map((p) => `${p.replica}:${p.node ?? '-'}:${p.code}`);
}

describe('checking existing replicas (the idle pass)', () => {
  it('finds nothing to do when nothing changed since they were placed', () => {
    const fleet = syntheticFleet({ seed: 3, nodeCount: 50, fabricCount: 2 });
    const requests = syntheticRequests({ seed: 3, modelCount: 30 });
    const replicas: ExistingReplica[] = [];
    placeMany(fleet, requests).forEach((r, i) => {
      if (r.ok)
        replicas.push({
          id: `r${i}`,
          model: requests[i]!.model,
          fabric: r.placement.fabric,
          shards: r.placement.shards,
        });
    });
    expect(replicas.length, 'the fleet should hold some replicas').toBeGreaterThan(20);
    const after = occupy(
      fleet,
      replicas.map((r) => ({ profile: '', shards: r.shards })),
    );
    expect(checkReplicas(after, replicas)).toEqual([]);
  });

  it('leaves replicas on cordoned and stale nodes alone: cordon only stops new placement, and stale may come back', () => {
    const nodes = [syntheticNode('a', { adminState: 'cordoned', liveness: 'stale' })];
    expect(codes(nodes, [replica('r1', [{ nodeId: 'a', gpuIndices: [0] }])])).toEqual([]);
  });

  it('reports shards on lost, draining and vanished nodes', () => {
    const nodes = [syntheticNode('a', { liveness: 'lost' }), syntheticNode('b', { adminState: 'draining' })];
    const problems = checkReplicas({ nodes }, [
      replica('r1', [{ nodeId: 'a', gpuIndices: [0] }]),
      replica('r2', [{ nodeId: 'b', gpuIndices: [0] }]),
      replica('r3', [{ nodeId: 'gone', gpuIndices: [0] }]),
    ]);
    expect(problems.map((p) => [p.replica, p.code, p.reason])).toEqual([
      ['r1', 'lost', 'shard 0 is on a lost node; the replica must be replaced'],
      ['r2', 'draining', 'shard 0 is on a draining node; a replacement should be placed before it stops'],
      ['r3', 'node_missing', 'shard 0 is on node gone, which is no longer in the inventory'],
    ]);
  });

  it('reports a GPU that went unhealthy or away, but not one on a node whose GPUs are unknown', () => {
    const gpus = [
      { index: 0, class: 'h100-80gb', healthy: false, problem: '3 uncorrectable ECC errors' },
      { index: 1, class: 'h100-80gb', healthy: true },
    ];
    const nodes = [syntheticNode('a', { gpus }), syntheticNode('b', { gpus: undefined })];
    const problems = checkReplicas({ nodes }, [
      replica('r1', [{ nodeId: 'a', gpuIndices: [0, 1, 5] }]),
      replica('r2', [{ nodeId: 'b', gpuIndices: [0] }]),
    ]);
    expect(problems.map((p) => [p.code, p.reason])).toEqual([
      ['gpu_unhealthy', 'GPU 0 is unhealthy: 3 uncorrectable ECC errors'],
      ['gpu_missing', 'GPU 5 is no longer reported on this node'],
    ]);
  });

  it('reports a GPU given to two replicas', () => {
    const problems = checkReplicas({ nodes: [syntheticNode('a')] }, [
      replica('r1', [{ nodeId: 'a', gpuIndices: [0, 1] }]),
      replica('r2', [{ nodeId: 'a', gpuIndices: [1] }]),
    ]);
    expect(problems.map((p) => [p.replica, p.code, p.reason])).toEqual([
      ['r2', 'gpu_shared', 'GPU 1 is also given to r1; one of them must move'],
    ]);
  });

  it('reports a multi-node replica whose nodes no longer share its fabric, and an engine gone', () => {
    const nodes = [
      syntheticNode('a', { fabrics: [{ name: 'ib0' }] }),
      syntheticNode('b', { fabrics: [{ name: 'ib1' }], engines: ['sim'] }),
    ];
    expect(
      codes(nodes, [
        replica(
          'r1',
          [
            { nodeId: 'a', gpuIndices: [0] },
            { nodeId: 'b', gpuIndices: [0] },
          ],
          { fabric: 'ib0', engine: 'vllm' },
        ),
      ]),
    ).toEqual(['r1:b:engine_missing', 'r1:-:fabric']);
    const shared = [
      syntheticNode('a', { fabrics: [{ name: 'ib0' }] }),
      syntheticNode('b', { fabrics: [{ name: 'ib0' }] }),
    ];
    expect(
      codes(shared, [
        replica(
          'r1',
          [
            { nodeId: 'a', gpuIndices: [0] },
            { nodeId: 'b', gpuIndices: [0] },
          ],
          { fabric: 'ib0' },
        ),
      ]),
    ).toEqual([]);
  });
});
