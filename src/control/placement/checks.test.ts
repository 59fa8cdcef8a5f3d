// One test per check: its code, its dimension and the sentence an operator
// reads. Each places a request on a one- or few-node fleet where exactly the
// check under test fails, and reads the failure back.
import { describe, expect, it } from 'vitest';
import { place } from './place.js';
import { syntheticGpus, syntheticNode } from './synthetic.js';
import type { PlacementFailure, PlacementNode, PlacementProfile, PlacementRequest, Rejection } from './types.js';

const GiB = 2 ** 30;

const tp2: PlacementProfile = {
  name: 'h100-tp2',
  engine: 'vllm',
  gpus: 2,
  gpuClasses: ['h100-80gb'],
  gpuMemoryGiB: 70,
  diskGiB: 140,
};
const cpu: PlacementProfile = { name: 'cpu', engine: 'builtin', gpus: 0, memoryGiB: 64, diskGiB: 8 };

function request(profiles: PlacementProfile[], extra: Partial<PlacementRequest> = {}): PlacementRequest {
  return { model: 'llama', weightsKey: 'hf://meta/llama', profiles, ...extra };
}

function fail(nodes: PlacementNode[], req: PlacementRequest): PlacementFailure {
  const result = place({ nodes }, req);
  if (result.ok)
    throw new Error(`expected no fit, but it was placed on ${result.placement.shards.map((s) => s.nodeId).join(', ')}`);
  return result;
}

/** The one rejection a single-node, single-profile failure should have. */
function only(nodes: PlacementNode[], req: PlacementRequest): Rejection {
  const { rejections } = fail(nodes, req);
  expect(rejections, `rejections: ${JSON.stringify(rejections, null, 1)}`).toHaveLength(1);
  return rejections[0]!;
}

describe('each check rejects with its code and a sentence', () => {
  it('cordoned', () => {
    expect(only([syntheticNode('n1', { adminState: 'cordoned' })], request([tp2]))).toEqual({
      profile: 'h100-tp2',
      node: 'n1',
      code: 'cordoned',
      dimension: 'node',
      reason: 'node is cordoned, so it takes no new replicas; uncordon it to allow them',
    });
  });

  it('draining', () => {
    const r = only([syntheticNode('n1', { adminState: 'draining' })], request([tp2]));
    expect([r.code, r.reason]).toEqual([
      'draining',
      'node is draining: it takes no new replicas and its replicas are moving off',
    ]);
  });

  it('stale', () => {
    const r = only([syntheticNode('n1', { liveness: 'stale' })], request([tp2]));
    expect([r.code, r.reason]).toEqual([
      'stale',
      "node's agent has not reported recently; it takes no new replicas until it does",
    ]);
  });

  it('lost', () => {
    const r = only([syntheticNode('n1', { liveness: 'lost' })], request([tp2]));
    expect([r.code, r.reason]).toEqual([
      'lost',
      'node is lost: its agent stopped reporting; check the machine and its agent',
    ]);
  });

  it('excluded (the node a replica is being drained off)', () => {
    const r = only([syntheticNode('n1')], request([tp2], { excludeNodes: ['n1'] }));
    expect([r.code, r.reason]).toEqual([
      'excluded',
      'node is excluded from this placement (the replica is moving off it)',
    ]);
  });

  it('pool_mismatch, naming each requirement the labels fail', () => {
    const r = only(
      [syntheticNode('n1', { labels: { pool: 't4', spot: 'true' } })],
      request([{ ...tp2, pool: 'pool=a100,!spot' }]),
    );
    expect(r).toEqual({
      profile: 'h100-tp2',
      pool: 'pool=a100,!spot',
      node: 'n1',
      code: 'pool_mismatch',
      dimension: 'pool',
      reason:
        'node is not in pool "pool=a100,!spot": label pool is "t4" (wants a100); label spot is "true", which the pool excludes',
    });
  });

  it('pool_invalid, once for the whole profile rather than per node', () => {
    const { rejections } = fail([syntheticNode('n1'), syntheticNode('n2')], request([{ ...tp2, pool: 'zone in (a' }]));
    expect(rejections).toHaveLength(1);
    expect(rejections[0]).toMatchObject({ profile: 'h100-tp2', code: 'pool_invalid', dimension: 'profile' });
    expect(rejections[0]!.node).toBeUndefined();
    expect(rejections[0]!.reason).toContain('pool selector "zone in (a": missing ")" to close the values of "zone in"');
    expect(rejections[0]!.reason).toMatch(/fix the profile's pool in the catalog$/);
  });

  it('engine_missing, listing what the node has', () => {
    const r = only([syntheticNode('n1', { engines: ['vllm', 'sim'] })], request([{ ...tp2, engine: 'sglang' }]));
    expect([r.code, r.dimension, r.reason]).toEqual([
      'engine_missing',
      'engine',
      'engine sglang is not available on this node (it has vllm, sim); install it or use a profile with another engine',
    ]);
  });

  it('gpus_unknown: GPUs not reported are unknown, not zero', () => {
    const r = only([syntheticNode('n1', { gpus: undefined })], request([tp2]));
    expect([r.code, r.reason]).toEqual([
      'gpus_unknown',
      "needs 2 GPUs of class h100-80gb with 70 GiB each, but the node did not report its GPUs; check its agent's GPU probe",
    ]);
  });

  it('no_gpus: a CPU node for a GPU profile', () => {
    const r = only([syntheticNode('n1', { gpus: [] })], request([tp2]));
    expect(r).toMatchObject({ code: 'no_gpus', unit: 'gpus', requested: 2, free: 0, capacity: 0 });
    expect(r.reason).toBe('needs 2 GPUs of class h100-80gb with 70 GiB each; the node has no GPUs');
  });

  it('gpu_class: GPUs of another class do not count, and are named by class', () => {
    const r = only([syntheticNode('n1', { gpus: syntheticGpus(8, 'a100-40gb', 40_960) })], request([tp2]));
    expect(r).toMatchObject({ code: 'gpu_class', unit: 'gpus', requested: 2, free: 0, capacity: 8 });
    expect(r.reason).toBe('needs 2 GPUs of class h100-80gb with 70 GiB each; none is free (8 are a100-40gb)');
  });

  it('gpu_class: a GPU reporting no class matches no allow-list', () => {
    const r = only(
      [
        syntheticNode('n1', {
          gpus: [
            { index: 0, healthy: true },
            { index: 1, healthy: true },
          ],
        }),
      ],
      request([tp2]),
    );
    expect([r.code, r.reason]).toEqual([
      'gpu_class',
      'needs 2 GPUs of class h100-80gb with 70 GiB each; none is free (2 report no class)',
    ]);
  });

  it('gpu_memory: GPUs with less memory than asked do not count', () => {
    const anyClass: PlacementProfile = { name: 'big', engine: 'vllm', gpus: 2, gpuMemoryGiB: 70 };
    const r = only([syntheticNode('n1', { gpus: syntheticGpus(8, 'l40s-48gb', 46_068) })], request([anyClass]));
    expect([r.code, r.reason]).toEqual([
      'gpu_memory',
      'needs 2 GPUs with 70 GiB each; none is free (8 have less than 70 GiB)',
    ]);
  });

  it('gpu_unhealthy: unhealthy GPUs are excluded and named with their problem', () => {
    const gpus = [
      { index: 2, class: 'h100-80gb', memoryTotalMiB: 81_559, healthy: true },
      { index: 3, class: 'h100-80gb', memoryTotalMiB: 81_559, healthy: false, problem: '12 uncorrectable ECC errors' },
    ];
    const r = only([syntheticNode('n1', { gpus })], request([tp2]));
    expect(r).toMatchObject({ code: 'gpu_unhealthy', dimension: 'gpus', requested: 2, free: 1, capacity: 2 });
    expect(r.reason).toBe(
      'needs 2 GPUs of class h100-80gb with 70 GiB each; 1 is free (GPU 3 is unhealthy: 12 uncorrectable ECC errors)',
    );
  });

  it('gpus_free: GPUs given to other shards do not count', () => {
    const r = only([syntheticNode('n1', { gpusInUse: [0, 1, 2, 3, 4, 5, 6] })], request([tp2]));
    expect(r).toMatchObject({ code: 'gpus_free', requested: 2, free: 1, capacity: 8 });
    expect(r.reason).toBe('needs 2 GPUs of class h100-80gb with 70 GiB each; 1 is free (7 are in use)');
  });

  it('the GPU sentence names every kind of GPU that did not count, and the code the stage where the node fell short', () => {
    const gpus = [
      ...syntheticGpus(2),
      { index: 2, class: 'h100-80gb', memoryTotalMiB: 81_559, healthy: false, problem: 'fell off the bus' },
      { index: 3, class: 'a100-40gb', memoryTotalMiB: 40_960, healthy: true },
      { index: 4, class: 'h100-80gb', memoryTotalMiB: 40_000, healthy: true },
    ];
    const r = only([syntheticNode('n1', { gpus, gpusInUse: [0] })], request([{ ...tp2, gpus: 3 }]));
    expect(r.code, 'three h100s with the memory exist, one is unhealthy: health is where it fell short').toBe(
      'gpu_unhealthy',
    );
    expect(r.reason).toBe(
      'needs 3 GPUs of class h100-80gb with 70 GiB each; 1 is free (GPU 2 is unhealthy: fell off the bus; 1 is in use; 1 is a100-40gb; 1 has less than 70 GiB)',
    );
  });

  it('ram, for a CPU profile, with the node total', () => {
    const r = only([syntheticNode('n1', { memoryTotalBytes: 128 * GiB, memoryFreeBytes: 12 * GiB })], request([cpu]));
    expect(r).toEqual({
      profile: 'cpu',
      node: 'n1',
      code: 'ram',
      dimension: 'memory',
      unit: 'bytes',
      requested: 64 * GiB,
      free: 12 * GiB,
      capacity: 128 * GiB,
      reason: 'needs 64 GiB of RAM; 12 GiB of 128 GiB is free',
    });
  });

  it('ram is not checked for a GPU profile: GPU shards do not claim RAM', () => {
    const result = place(
      { nodes: [syntheticNode('n1', { memoryFreeBytes: 1 * GiB })] },
      request([{ ...tp2, memoryGiB: 64 }]),
    );
    expect(result.ok).toBe(true);
  });

  it('disk, for the weights, on local filesystems only', () => {
    const r = only([syntheticNode('n1', { localDiskFreeBytes: 20 * GiB })], request([tp2]));
    expect(r).toMatchObject({ code: 'disk', dimension: 'disk', unit: 'bytes', requested: 140 * GiB, free: 20 * GiB });
    expect(r.reason).toBe(
      'needs 140 GiB of local disk for the weights; 20 GiB is free where the cache lives (shared filesystems do not count)',
    );
  });
});

describe('every failing check is reported', () => {
  it('a node failing three checks yields three rejections, in check order', () => {
    const node = syntheticNode('n1', {
      adminState: 'cordoned',
      gpusInUse: [0, 1, 2, 3, 4, 5, 6, 7],
      localDiskFreeBytes: 10 * GiB,
    });
    const { rejections } = fail([node], request([tp2]));
    expect(rejections.map((r) => r.code)).toEqual(['cordoned', 'gpus_free', 'disk']);
  });

  it('every profile is tried on every node, profile order then node id', () => {
    const nodes = [syntheticNode('n2', { adminState: 'cordoned' }), syntheticNode('n1', { liveness: 'lost' })];
    const { rejections, nodeCount } = fail(nodes, request([tp2, cpu]));
    expect(nodeCount).toBe(2);
    expect(rejections.map((r) => `${r.profile}/${r.node}/${r.code}`)).toEqual([
      'h100-tp2/n1/lost',
      'h100-tp2/n2/cordoned',
      'cpu/n1/lost',
      'cpu/n2/cordoned',
    ]);
  });
});

describe('disk for the weights', () => {
  it('is skipped on a node that already holds them: holding the file is what used the space', () => {
    const full = { localDiskFreeBytes: 1 * GiB };
    const bySource = place(
      { nodes: [syntheticNode('n1', { ...full, weightsHeld: ['hf://meta/llama'] })] },
      request([tp2]),
    );
    expect(bySource.ok, 'held under its source').toBe(true);
    const byCacheName = place(
      { nodes: [syntheticNode('n1', { ...full, weightsHeld: new Set(['ab'.repeat(32)]) })] },
      request([tp2], { weightsKey: ['hf://meta/llama', 'ab'.repeat(32)] }),
    );
    expect(byCacheName.ok, 'held under its cache name').toBe(true);
  });

  it('is not checked when the profile does not say how large the weights are, and a note says so', () => {
    const { diskGiB: _unused, ...noSize } = tp2;
    const result = place({ nodes: [syntheticNode('n1', { localDiskFreeBytes: 0 })] }, request([noSize]));
    expect(result.ok, 'an unknown size is not a rejection').toBe(true);
    expect(result.notes).toEqual([
      {
        profile: 'h100-tp2',
        code: 'disk_size_unknown',
        text: 'disk was not checked for profile h100-tp2: it does not say how large the weights are (set disk_gb)',
      },
    ]);
  });

  it('reads an absent localDiskFreeBytes as unknown, never as 0 free (shared filesystems were already left out)', () => {
    const { localDiskFreeBytes: _unused, ...rest } = syntheticNode('n1');
    const result = place({ nodes: [rest] }, request([tp2]));
    expect(result.ok, 'unknown free space is not a full disk').toBe(true);
    expect(result.notes.map((n) => n.text)).toEqual([
      'disk was not checked for profile h100-tp2 on 1 node that did not report free local disk: n1',
    ]);
    const zero = fail([syntheticNode('n1', { localDiskFreeBytes: 0 })], request([tp2]));
    expect(
      zero.rejections.map((r) => r.code),
      'a reported 0 is a full disk',
    ).toEqual(['disk']);
  });

  it('reads an absent memoryFreeBytes as unknown for a CPU profile, with a note', () => {
    const { memoryFreeBytes: _unused, ...rest } = syntheticNode('n1');
    const result = place({ nodes: [rest] }, request([cpu]));
    expect(result.ok).toBe(true);
    expect(result.notes.map((n) => n.code)).toEqual(['memory_free_unknown']);
  });
});

describe('multi-node profiles', () => {
  const tp8x2: PlacementProfile = { name: 'tp8x2', engine: 'vllm', gpus: 8, shards: 2, gpuClasses: ['h100-80gb'] };
  const on = (fabric: string) => ({ fabrics: [{ name: fabric, address: '10.0.0.1' }] });

  it('places all shards on nodes that share one fabric, with ranks', () => {
    const nodes = [syntheticNode('a', on('ib0')), syntheticNode('b', on('ib1')), syntheticNode('c', on('ib1'))];
    const result = place({ nodes }, request([tp8x2]));
    expect(result.ok && result.placement).toEqual({
      profile: 'tp8x2',
      fabric: 'ib1',
      shards: [
        { nodeId: 'b', rank: 0, gpuIndices: [0, 1, 2, 3, 4, 5, 6, 7] },
        { nodeId: 'c', rank: 1, gpuIndices: [0, 1, 2, 3, 4, 5, 6, 7] },
      ],
    });
  });

  it('rejects at the fabric level when no fabric has enough fitting nodes', () => {
    const nodes = [
      syntheticNode('a', on('ib0')),
      syntheticNode('b', on('ib1')),
      syntheticNode('c', { ...on('ib0'), gpusInUse: [0, 1, 2, 3] }),
      syntheticNode('d'),
    ];
    const { rejections } = fail(nodes, request([tp8x2]));
    expect(rejections.map((r) => [r.node ?? r.fabric, r.code, r.reason])).toEqual([
      ['c', 'gpus_free', 'needs 8 GPUs of class h100-80gb; 4 are free (4 are in use)'],
      ['d', 'no_fabric', 'fits on its own, but is on no fabric, and a 2-node replica needs nodes that share one'],
      ['ib0', 'fabric', 'fabric ib0 has 1 node with 8 free h100-80gb GPUs; needs 2'],
      ['ib1', 'fabric', 'fabric ib1 has 1 node with 8 free h100-80gb GPUs; needs 2'],
    ]);
    expect(rejections[2]).toMatchObject({ unit: 'nodes', requested: 2, free: 1 });
  });
});
