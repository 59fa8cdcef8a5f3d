// The fit table: per profile, the nodes that fit and every other node with
// the sentence of each check it failed; a node holding the weights needs no
// disk for them, as in place().
import { describe, expect, it } from 'vitest';
import { GiB } from '../../units/index.js';
import { fitTable } from './fit-table.js';
import { place } from './place.js';
import { syntheticGpus, syntheticNode } from './synthetic.js';

describe('fit table', () => {
  const nodes = [
    syntheticNode('a'),
    syntheticNode('b', { adminState: 'cordoned' }),
    syntheticNode('c', { gpus: syntheticGpus(8, 'l40s-48gb', 46_000) }),
    syntheticNode('d', { localDiskFreeBytes: 10 * GiB }),
    syntheticNode('e', { localDiskFreeBytes: 10 * GiB, weightsHeld: ['k'] }),
  ];
  const request = {
    model: 'big',
    weightsKey: 'k',
    profiles: [
      { name: 'h100', engine: 'vllm', gpus: 4, gpuClasses: ['h100-80gb'], diskGiB: 140 },
      { name: 'cpu', engine: 'builtin', gpus: 0, memoryGiB: 2048 },
    ],
  };

  it('names the nodes that fit each profile and why each other does not', () => {
    const [h100, cpu] = fitTable({ nodes }, request);
    expect(h100!.fits).toEqual(['a', 'e']);
    const why = new Map(h100!.rejected.map((r) => [r.node, r.reasons.join('; ')]));
    expect(why.get('b')).toContain('cordoned');
    expect(why.get('c')).toContain('needs 4 GPUs of class h100-80gb');
    expect(why.get('d')).toContain('needs 140 GiB of local disk for the weights; 10 GiB is free');
    expect(cpu!.fits, 'no node has 2 TiB of RAM').toEqual([]);
    expect(cpu!.rejected.find((r) => r.node === 'a')?.reasons).toEqual(['needs 2 TiB of RAM; 1 TiB of 1 TiB is free']);
  });

  it('agrees with place(): the node place chooses is one the table says fits', () => {
    const placed = place({ nodes }, request);
    expect(placed.ok).toBe(true);
    if (placed.ok) expect(fitTable({ nodes }, request)[0]!.fits).toContain(placed.placement.shards[0]!.nodeId);
  });
});
