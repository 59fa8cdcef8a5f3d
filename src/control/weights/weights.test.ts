import { describe, expect, it } from 'vitest';
import { cacheNameOf } from '../../protocol/index.js';
import { orphansOf } from './weights.js';

const wantedName = cacheNameOf('hf://org/wanted')!;
const orphanName = cacheNameOf('hf://org/gone')!;

const node = (weights: unknown[], cacheDir = '/var/cache/llmgw') =>
  ({ id: 'n1', report: { cache_dir: cacheDir, weights } }) as never;

describe('orphans', () => {
  it('lists only entries llmgw fetched itself that no model wants', () => {
    const result = orphansOf(
      node([
        { path: `/var/cache/llmgw/${wantedName}`, kind: 'cache', cache_name: wantedName, size_bytes: 10 },
        {
          path: `/var/cache/llmgw/${orphanName}`,
          kind: 'cache',
          cache_name: orphanName,
          size_bytes: 20,
          source: 'hf://org/gone',
        },
        // The operator's: in a model directory, or in the cache without a cache name.
        { path: '/models/llama-70b', kind: 'model_dir', size_bytes: 1e12 },
        { path: '/var/cache/llmgw/notes', kind: 'model_dir', size_bytes: 5 },
      ]),
      new Set([wantedName]),
    );
    expect(result.entries).toEqual([
      { path: `/var/cache/llmgw/${orphanName}`, cache_name: orphanName, size_bytes: 20, source: 'hf://org/gone' },
    ]);
    expect(result.reclaimable_bytes).toBe(20);
  });

  it('never lists a claimed cache entry that is not a direct child of the cache directory', () => {
    const result = orphansOf(
      node([
        { path: `/elsewhere/${orphanName}`, kind: 'cache', cache_name: orphanName },
        { path: `/var/cache/llmgw/sub/${orphanName}`, kind: 'cache', cache_name: orphanName },
        { path: `/var/cache/llmgw/../../etc/${orphanName}`, kind: 'cache', cache_name: orphanName },
        { path: `/var/cache/llmgw/${orphanName.toUpperCase()}`, kind: 'cache', cache_name: orphanName.toUpperCase() },
      ]),
      new Set(),
    );
    expect(result.entries, 'a report that claims odd paths is not believed').toEqual([]);
  });

  it('lists nothing for a node whose report names no cache directory', () => {
    expect(
      orphansOf(
        node([{ path: `/c/${orphanName}`, kind: 'cache', cache_name: orphanName }], undefined as never),
        new Set(),
      ).entries,
    ).toEqual([]);
  });
});
