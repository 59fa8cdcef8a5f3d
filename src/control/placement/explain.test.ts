// What an operator reads when a model will not schedule: the exact text.
import { describe, expect, it } from 'vitest';
import { explain, toRejectionViews } from './explain.js';
import { place } from './place.js';
import { syntheticNode } from './synthetic.js';
import type { PlacementFailure, PlacementNode, PlacementProfile, PlacementRequest } from './types.js';

const GiB = 2 ** 30;
const tp2: PlacementProfile = { name: 'h100-tp2', engine: 'vllm', gpus: 2, gpuClasses: ['h100-80gb'], diskGiB: 140 };

function fail(nodes: PlacementNode[], profiles: PlacementProfile[]): PlacementFailure {
  const req: PlacementRequest = { model: 'llama-70b', weightsKey: 'hf://meta/llama-70b', profiles };
  const result = place({ nodes }, req);
  if (result.ok) throw new Error('expected no fit');
  return result;
}

function summarise(nodes: PlacementNode[], profiles: PlacementProfile[]) {
  const r = fail(nodes, profiles);
  return explain('llama-70b', r.rejections, { nodeCount: r.nodeCount, profiles, notes: r.notes });
}

const busy = (id: string) => syntheticNode(id, { gpusInUse: [0, 1, 2, 3, 4, 5, 6] });
const cordoned = (id: string) => syntheticNode(id, { adminState: 'cordoned' });
const smallDisk = (id: string) => syntheticNode(id, { localDiskFreeBytes: 20 * GiB });
const ids = (prefix: string, n: number) =>
  Array.from({ length: n }, (_, i) => `${prefix}${String(i + 1).padStart(2, '0')}`);

describe('explain', () => {
  it('summarises the way Kubernetes does, most common reason first', () => {
    const nodes = [...ids('busy', 7).map(busy), ...ids('cord', 3).map(cordoned), ...ids('disk', 2).map(smallDisk)];
    expect(summarise(nodes, [tp2]).text).toBe(
      '0/12 nodes fit profile h100-tp2: 7 have fewer than 2 free h100-80gb GPUs, 3 are cordoned, 2 lack 140 GiB of local disk',
    );
  });

  it('counts a node once under each reason it has, and once in the total', () => {
    const both = syntheticNode('both', { adminState: 'cordoned', localDiskFreeBytes: 1 * GiB });
    const summary = summarise([both, cordoned('c1'), smallDisk('d1')], [tp2]);
    expect(summary.profiles[0]!.clauses.map((c) => [c.code, c.count])).toEqual([
      ['cordoned', 2],
      ['disk', 2],
    ]);
    expect(summary.text).toBe('0/3 nodes fit profile h100-tp2: 2 are cordoned, 2 lack 140 GiB of local disk');
  });

  it('breaks ties in check order, and words one node in the singular', () => {
    const nodes = [
      syntheticNode('a', { liveness: 'lost' }),
      cordoned('b'),
      syntheticNode('c', { gpus: [] }),
      syntheticNode('d', { engines: ['sim'] }),
      syntheticNode('e', { liveness: 'stale' }),
      syntheticNode('f', { gpus: undefined }),
      syntheticNode('g', { adminState: 'draining' }),
    ];
    expect(summarise(nodes, [{ ...tp2, gpus: 1 }]).text).toBe(
      '0/7 nodes fit profile h100-tp2: 1 is cordoned, 1 is draining, 1 has not reported recently, 1 is lost, ' +
        '1 lacks engine vllm, 1 did not report its GPUs, 1 has no GPUs',
    );
  });

  it('words each GPU stage, RAM and pool clause', () => {
    const nodes = [
      syntheticNode('a', { gpus: [{ index: 0, class: 'a100-40gb', memoryTotalMiB: 40_960, healthy: true }] }),
      syntheticNode('b', { gpus: [{ index: 0, class: 'h100-80gb', memoryTotalMiB: 40_000, healthy: true }] }),
      syntheticNode('c', { gpus: [{ index: 0, class: 'h100-80gb', memoryTotalMiB: 81_559, healthy: false }] }),
      syntheticNode('d', { gpusInUse: [0, 1, 2, 3, 4, 5, 6, 7], labels: { pool: 't4' } }),
    ];
    const profile: PlacementProfile = {
      name: 'one',
      engine: 'vllm',
      gpus: 1,
      gpuClasses: ['h100-80gb'],
      gpuMemoryGiB: 70,
      pool: 'pool!=t4',
      diskGiB: 10,
    };
    expect(summarise(nodes, [profile]).text).toBe(
      '0/4 nodes fit profile one: 1 is not in pool pool!=t4, 1 has no h100-80gb GPU, 1 has no h100-80gb GPU with 70 GiB, ' +
        '1 has no healthy h100-80gb GPU with 70 GiB, 1 has no free h100-80gb GPU with 70 GiB',
    );
    const cpu: PlacementProfile = { name: 'cpu', engine: 'builtin', gpus: 0, memoryGiB: 64, diskGiB: 8 };
    expect(
      summarise(
        [syntheticNode('a', { memoryFreeBytes: 8 * GiB }), syntheticNode('b', { memoryFreeBytes: 8 * GiB })],
        [cpu],
      ).text,
    ).toBe('0/2 nodes fit profile cpu: 2 lack 64 GiB of free RAM');
  });

  it('gives one line per profile, in catalog order, then the notes', () => {
    const cpu: PlacementProfile = { name: 'cpu', engine: 'builtin', gpus: 0, memoryGiB: 4096 };
    const { localDiskFreeBytes: _unused, ...unknownDisk } = busy('busy01');
    const nodes = [unknownDisk, cordoned('cord01')];
    expect(summarise(nodes, [tp2, cpu]).text).toBe(
      [
        '0/2 nodes fit profile h100-tp2: 1 is cordoned, 1 has fewer than 2 free h100-80gb GPUs',
        '0/2 nodes fit profile cpu: 2 lack 4 TiB of free RAM, 1 is cordoned',
        'disk was not checked for profile h100-tp2 on 1 node that did not report free local disk: busy01',
        'disk was not checked for profile cpu: it does not say how large the weights are (set disk_gb)',
      ].join('\n'),
    );
  });

  it('adds the fabric reasons of a multi-node profile after the node counts', () => {
    const tp8x2: PlacementProfile = {
      name: 'tp8x2',
      engine: 'vllm',
      gpus: 8,
      shards: 2,
      gpuClasses: ['h100-80gb'],
      diskGiB: 100,
    };
    const nodes = [
      syntheticNode('a', { fabrics: [{ name: 'ib0' }] }),
      syntheticNode('b', { fabrics: [{ name: 'ib1' }] }),
      syntheticNode('c'),
      busy('d'),
    ];
    expect(summarise(nodes, [tp8x2]).text).toBe(
      '2/4 nodes fit profile tp8x2: 1 has fewer than 8 free h100-80gb GPUs, 1 fits alone but is on no fabric; ' +
        'fabric ib0 has 1 node with 8 free h100-80gb GPUs; needs 2; fabric ib1 has 1 node with 8 free h100-80gb GPUs; needs 2',
    );
  });

  it('says when a profile cannot be placed anywhere because its pool does not parse', () => {
    const summary = summarise([syntheticNode('a')], [{ ...tp2, pool: 'zone in (a' }]);
    expect(summary.text).toMatch(
      /^profile h100-tp2 cannot be placed on any node: pool selector "zone in \(a": missing "\)"/,
    );
  });

  it('says when there are no nodes at all', () => {
    expect(explain('llama-70b', [], { nodeCount: 0, profiles: [tp2] }).text).toBe(
      '0/0 nodes fit profile h100-tp2: no node has joined',
    );
  });

  it('words clauses plainly when the profiles are not given', () => {
    const r = fail([busy('a')], [tp2]);
    expect(explain('llama-70b', r.rejections, { nodeCount: 1 }).text).toBe(
      '0/1 nodes fit profile h100-tp2: 1 has fewer than 2 free GPUs',
    );
  });

  it('drills down per node, in id order, with every reason', () => {
    const both = syntheticNode('b', { adminState: 'cordoned', localDiskFreeBytes: 1 * GiB });
    const summary = summarise([both, smallDisk('a')], [tp2]);
    expect(summary.nodes.map((n) => [n.node, n.rejections.map((r) => r.code)])).toEqual([
      ['a', ['disk']],
      ['b', ['cordoned', 'disk']],
    ]);
    expect(summary.nodes[0]!.rejections[0]!.reason).toBe(
      'needs 140 GiB of local disk for the weights; 20 GiB is free where the cache lives (shared filesystems do not count)',
    );
  });
});

describe('the seed view of rejections', () => {
  it('maps each rejection to {profile, pool, node, reason}, leaving out what is absent', () => {
    const r = fail(
      [cordoned('a')],
      [
        { ...tp2, pool: 'pool' },
        { name: 'x2', engine: 'vllm', gpus: 1, shards: 2 },
      ],
    );
    const views = toRejectionViews(r.rejections);
    expect(views[0]).toEqual({
      profile: 'h100-tp2',
      pool: 'pool',
      node: 'a',
      reason: 'node is cordoned, so it takes no new replicas; uncordon it to allow them',
    });
    expect(Object.keys(views[views.length - 1]!)).toEqual(['profile', 'node', 'reason']);
  });
});
