// Where a replica goes among nodes that all fit: the scoring, its order of
// preference, and that the answer depends on the snapshot and nothing else.
import { describe, expect, it } from 'vitest';
import { place, placeMany } from './place.js';
import {
  createPrng,
  shuffled,
  syntheticFleet,
  syntheticGpus,
  syntheticNode,
  syntheticRequests,
  syntheticWeightsKey,
} from './synthetic.js';
import type { PlacementNode, PlacementProfile, PlacementRequest, PlacementResult } from './types.js';

const gpu1: PlacementProfile = { name: 'gpu1', engine: 'vllm', gpus: 1, diskGiB: 10 };
const tp2: PlacementProfile = { name: 'tp2', engine: 'vllm', gpus: 2, gpuClasses: ['h100-80gb'], diskGiB: 10 };
const cpu: PlacementProfile = { name: 'cpu', engine: 'builtin', gpus: 0, memoryGiB: 16, diskGiB: 10 };

function request(profiles: PlacementProfile[], extra: Partial<PlacementRequest> = {}): PlacementRequest {
  return { model: 'llama', weightsKey: 'hf://meta/llama', profiles, ...extra };
}

function nodesOf(result: PlacementResult): string[] {
  if (!result.ok)
    throw new Error(`expected a placement, got: ${result.rejections.map((r) => `${r.node}: ${r.reason}`).join(' | ')}`);
  return result.placement.shards.map((s) => s.nodeId);
}

/** A node with `free` of its 8 GPUs free (the rest in use). */
function withFree(id: string, free: number, extra: Partial<PlacementNode> = {}): PlacementNode {
  return syntheticNode(id, { gpusInUse: Array.from({ length: 8 - free }, (_, i) => i), ...extra });
}

describe('scoring', () => {
  it('prefers a node that already holds the weights, even over a tighter fit', () => {
    const nodes = [withFree('a', 1), withFree('b', 8, { weightsHeld: ['hf://meta/llama'] })];
    expect(nodesOf(place({ nodes }, request([gpu1])))).toEqual(['b']);
  });

  it('packs GPUs tightly: the node left with the fewest free GPUs wins, so big holes stay open', () => {
    const nodes = [withFree('a', 8), withFree('b', 3), withFree('c', 1), withFree('d', 2)];
    expect(nodesOf(place({ nodes }, request([tp2]))), 'TP2 leaves 0 free on d').toEqual(['d']);
    expect(nodesOf(place({ nodes }, request([gpu1]))), 'one GPU fills c').toEqual(['c']);
  });

  it('keeps CPU replicas off idle GPU machines', () => {
    const nodes = [syntheticNode('a-gpu'), syntheticNode('b-cpu', { gpus: [] }), withFree('c-gpu-busy', 2)];
    expect(nodesOf(place({ nodes }, request([cpu])))).toEqual(['b-cpu']);
  });

  it('spreads replicas of one model over nodes: 3 replicas go to 3 nodes when they fit', () => {
    const nodes = ['a', 'b', 'c', 'd'].map((id) => syntheticNode(id));
    const results = placeMany({ nodes }, [request([gpu1]), request([gpu1]), request([gpu1])]);
    const placed = results.map((r) => nodesOf(r)[0]);
    expect(new Set(placed).size, `placed on ${placed.join(', ')}`).toBe(3);
  });

  it('spreading outranks holding the weights: a second replica leaves the node already running one', () => {
    const nodes = [syntheticNode('a', { weightsHeld: ['hf://meta/llama'] }), syntheticNode('b')];
    const second = place({ nodes }, request([gpu1], { existingReplicas: [{ nodeIds: ['a'] }] }));
    expect(nodesOf(second)).toEqual(['b']);
  });

  it('still stacks replicas on one node when no other node fits', () => {
    const nodes = [syntheticNode('a'), syntheticNode('b', { adminState: 'cordoned' })];
    const second = place({ nodes }, request([gpu1], { existingReplicas: [{ nodeIds: ['a'] }] }));
    expect(nodesOf(second)).toEqual(['a']);
  });

  it('spreads over fabrics when nodes are otherwise equal', () => {
    const ib = (name: string) => ({ fabrics: [{ name }] });
    const nodes = [syntheticNode('a', ib('ib0')), syntheticNode('b', ib('ib0')), syntheticNode('c', ib('ib1'))];
    const second = place({ nodes }, request([gpu1], { existingReplicas: [{ nodeIds: ['a'] }] }));
    expect(nodesOf(second), 'b shares ib0 with the first replica; c does not').toEqual(['c']);
  });

  it('breaks ties by node id', () => {
    const nodes = ['n3', 'n1', 'n2'].map((id) => syntheticNode(id));
    expect(nodesOf(place({ nodes }, request([gpu1])))).toEqual(['n1']);
  });

  it('gives the lowest free GPU indices', () => {
    const nodes = [syntheticNode('a', { gpusInUse: [0, 2, 5, 6, 7] })];
    const result = place({ nodes }, request([tp2]));
    expect(result.ok && result.placement.shards[0]!.gpuIndices).toEqual([1, 3]);
  });

  it('never gives an unhealthy GPU', () => {
    const gpus = syntheticGpus(2).map((g) => (g.index === 0 ? { ...g, healthy: false, problem: 'Xid 79' } : g));
    const result = place({ nodes: [syntheticNode('a', { gpus })] }, request([gpu1]));
    expect(result.ok && result.placement.shards[0]!.gpuIndices).toEqual([1]);
  });
});

describe('profiles and candidates', () => {
  it('tries profiles in catalog order and takes the first that fits', () => {
    const nodes = [syntheticNode('a', { gpus: [] })];
    const result = place({ nodes }, request([tp2, cpu]));
    expect(result.ok && result.placement).toEqual({
      profile: 'cpu',
      shards: [{ nodeId: 'a', rank: 0, gpuIndices: [] }],
    });
  });

  it('reports the pool on the placement and only uses nodes in it', () => {
    const nodes = [syntheticNode('a', { labels: { pool: 't4' } }), syntheticNode('b', { labels: { pool: 'h100' } })];
    const result = place({ nodes }, request([{ ...gpu1, pool: 'pool in (h100, a100)' }]));
    expect(result.ok && result.placement.pool).toBe('pool in (h100, a100)');
    expect(nodesOf(result)).toEqual(['b']);
  });

  it('does not place on an excluded node', () => {
    const nodes = [syntheticNode('a'), withFree('b', 8)];
    expect(nodesOf(place({ nodes }, request([gpu1], { excludeNodes: ['a'] })))).toEqual(['b']);
  });

  it('counts the candidates that had enough free GPUs for the chosen profile', () => {
    const nodes = [
      withFree('a', 8),
      withFree('b', 1),
      withFree('c', 0),
      syntheticNode('d', { adminState: 'cordoned' }),
    ];
    const result = place({ nodes }, request([tp2]));
    expect(result.ok && result.candidatesConsidered).toBe(1);
  });
});

describe('determinism', () => {
  const keys = Array.from({ length: 40 }, (_, i) => syntheticWeightsKey(i));
  const fleet = syntheticFleet({
    seed: 7,
    nodeCount: 60,
    gpusPerNode: [0, 4, 8],
    mixedClassesPerNode: true,
    cordonedFraction: 0.1,
    staleFraction: 0.05,
    unhealthyGpuFraction: 0.05,
    gpusInUseFraction: 0.2,
    unknownFraction: 0.05,
    weightsKeys: keys,
    holdFraction: 0.3,
  });
  const requests = syntheticRequests({ seed: 7, modelCount: 40 });

  it('gives the same answer for the same snapshot', () => {
    expect(placeMany(fleet, requests)).toEqual(placeMany(fleet, requests));
  });

  it('gives the same answer whatever order the nodes are listed in', () => {
    const expected = placeMany(fleet, requests);
    const prng = createPrng(99);
    for (let round = 0; round < 5; round++) {
      const reordered = { nodes: shuffled(prng, fleet.nodes) };
      expect(placeMany(reordered, requests), `shuffle ${round}`).toEqual(expected);
    }
  });

  it('gives the same rejections, in the same order, whatever order the nodes are listed in', () => {
    const nowhere = request([
      { name: 'huge', engine: 'vllm', gpus: 16, diskGiB: 100 },
      { ...cpu, engine: 'tensorrt', memoryGiB: 900 },
    ]);
    const expected = place(fleet, nowhere);
    expect(expected.ok).toBe(false);
    expect(place({ nodes: shuffled(createPrng(3), fleet.nodes) }, nowhere)).toEqual(expected);
  });

  it('does not change the snapshot', () => {
    const before = JSON.stringify(fleet);
    placeMany(fleet, requests);
    expect(JSON.stringify(fleet)).toBe(before);
  });
});
