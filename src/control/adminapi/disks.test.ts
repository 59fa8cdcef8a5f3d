// Where a node's disk went, from its report and the catalog: each
// filesystem's used space split into weights by model, orphans, operator's
// unused model directories and other files, with the numbers in the summary.
import { describe, expect, it } from 'vitest';
import { cacheNameOf, type NodeReport } from '../../protocol/index.js';
import { nodeDisksView } from './disks.js';

const GiB = 2 ** 30;

describe('node disks', () => {
  it('splits a filesystem into wanted weights, orphans, unused model dirs and the rest', () => {
    const kept = cacheNameOf('hf://org/kept')!;
    const gone = cacheNameOf('hf://org/gone')!;
    const report: NodeReport = {
      cache_dir: '/data/cache',
      disks: [
        { mount_point: '/data', shared: false, total_bytes: 1000 * GiB, free_bytes: 400 * GiB, paths: ['/data/cache'] },
        { mount_point: '/models', shared: true, total_bytes: 20_000 * GiB, free_bytes: 1000 * GiB, paths: ['/models'] },
      ],
      weights: [
        {
          path: `/data/cache/${kept}`,
          kind: 'cache',
          cache_name: kept,
          size_bytes: 140 * GiB,
          source: 'hf://org/kept',
        },
        { path: `/data/cache/${gone}`, kind: 'cache', cache_name: gone, size_bytes: 60 * GiB, source: 'hf://org/gone' },
        { path: '/models/llama', kind: 'model_dir', size_bytes: 10 * GiB },
        { path: '/models/mine', kind: 'model_dir', size_bytes: 5 * GiB },
        { path: '/elsewhere/x', kind: 'model_dir', size_bytes: 1 },
      ],
    } as NodeReport;
    const v = nodeDisksView('n1', report, [
      { name: 'kept', source: 'hf://org/kept' },
      { name: 'llama', source: 'file:///models/llama' },
    ]);
    const data = v.disks.find((d) => d.mount_point === '/data')!;
    expect(data).toMatchObject({
      used_bytes: 600 * GiB,
      wanted_bytes: 140 * GiB,
      orphan_bytes: 60 * GiB,
      unused_model_dir_bytes: 0,
      other_bytes: 400 * GiB,
    });
    expect(data.weights.map((w) => w.models)).toEqual([['kept'], []]);
    const models = v.disks.find((d) => d.mount_point === '/models')!;
    expect(models).toMatchObject({ shared: true, wanted_bytes: 10 * GiB, unused_model_dir_bytes: 5 * GiB });
    expect(v.elsewhere.map((w) => w.path)).toEqual(['/elsewhere/x']);
    expect(v.summary[0]).toBe(
      '/data: 600 GiB used of 1000 GiB (400 GiB free): 140 GiB weights of kept, 60 GiB in 1 cache entry no model wants (llmgw ctl weights --collect reclaims them), 400 GiB of other files (not weights llmgw knows of)',
    );
  });

  it('says unknown, never zero, when the node has not reported its filesystems', () => {
    expect(nodeDisksView('n1', null, []).summary).toEqual(['the node has not reported yet, so its disks are unknown']);
    const v = nodeDisksView('n1', { weights: [] } as unknown as NodeReport, []);
    expect(v.disks).toEqual([]);
    expect(v.summary[0]).toContain('did not report its filesystems');
  });
});
