import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { DiskReportSchema } from '../../protocol/node-report.js';
import { type DiskProbeDeps, probeDisks, type StatfsResult } from './disks.js';

const podTable = readFileSync(new URL('./fixtures/mountinfo/own-k8s-pod-nfs4-pvc.txt', import.meta.url), 'utf8');

function enoent(path: string): Error {
  return Object.assign(new Error(`ENOENT: no such file or directory, realpath '${path}'`), { code: 'ENOENT' });
}

/** A machine with the pod's mount table, the given existing paths (and links), and statfs answers by path prefix. */
function machine(
  existing: Record<string, string>,
  space: Record<string, StatfsResult>,
): DiskProbeDeps & { statfsCalls: string[] } {
  const statfsCalls: string[] = [];
  return {
    statfsCalls,
    readFile: (path) => (path === '/proc/self/mountinfo' ? Promise.resolve(podTable) : Promise.reject(enoent(path))),
    realpath: (path) => (path in existing ? Promise.resolve(existing[path]!) : Promise.reject(enoent(path))),
    statfs: (path) => {
      statfsCalls.push(path);
      const key = Object.keys(space).find((prefix) => path.startsWith(prefix));
      return key ? Promise.resolve(space[key]!) : Promise.reject(new Error(`EIO: statfs ${path}`));
    },
  };
}

const fourKiB = (blocks: number, bavail: number): StatfsResult => ({ bsize: 4096, blocks, bavail });

describe('probeDisks', () => {
  it('lists each filesystem once with the directories it holds, shared NFS marked, free space from bavail', async () => {
    const deps = machine(
      { '/var/lib/llmgw/cache': '/var/lib/llmgw/cache', '/models': '/models', '/scratch/models': '/scratch/models' },
      { '/var/lib/llmgw': fourKiB(1000, 250), '/scratch': fourKiB(1000, 250), '/models': fourKiB(5000, 4000) },
    );
    const result = await probeDisks(
      ['/var/lib/llmgw/cache', '/models', '/scratch/models'],
      '/proc/self/mountinfo',
      deps,
    );
    expect(result.problems).toEqual([]);
    expect(result.disks).toEqual([
      {
        mount_point: '/var/lib/llmgw/cache',
        fs_type: 'xfs',
        source: '/dev/nvme1n1',
        shared: false,
        // /scratch is the same emptyDir disk (device 259:2) bind-mounted again: counting it twice would double its space.
        paths: ['/var/lib/llmgw/cache', '/scratch/models'],
        free_bytes: 250 * 4096,
        total_bytes: 1000 * 4096,
      },
      {
        mount_point: '/models',
        fs_type: 'nfs4',
        source: '10.20.0.7:/export/models/pvc-6f3c2d1e-8b7a-4c1d-9e2f-0a1b2c3d4e5f',
        shared: true,
        paths: ['/models'],
        free_bytes: 4000 * 4096,
        total_bytes: 5000 * 4096,
      },
    ]);
    for (const disk of result.disks!) DiskReportSchema.parse(disk);
    expect(deps.statfsCalls.length, 'one statfs per filesystem').toBe(2);
  });

  it('places a cache directory that does not exist yet on the filesystem of its nearest existing ancestor', async () => {
    const deps = machine(
      { '/var/lib/llmgw/cache': '/var/lib/llmgw/cache' },
      { '/var/lib/llmgw/cache': fourKiB(10, 5) },
    );
    const result = await probeDisks(['/var/lib/llmgw/cache/new/deeper'], '/proc/self/mountinfo', deps);
    expect(result.disks).toMatchObject([
      { mount_point: '/var/lib/llmgw/cache', paths: ['/var/lib/llmgw/cache/new/deeper'], free_bytes: 5 * 4096 },
    ]);
    expect(deps.statfsCalls).toEqual(['/var/lib/llmgw/cache']);
  });

  it('follows a link to the filesystem it leads to', async () => {
    const deps = machine({ '/opt/models': '/models/shared-llama' }, { '/models': fourKiB(10, 5) });
    const result = await probeDisks(['/opt/models'], '/proc/self/mountinfo', deps);
    expect(result.disks).toMatchObject([{ mount_point: '/models', shared: true, paths: ['/opt/models'] }]);
  });

  it('keeps a filesystem whose space cannot be measured, with its space unknown and a sentence', async () => {
    const deps = machine({ '/models': '/models' }, {});
    const result = await probeDisks(['/models'], '/proc/self/mountinfo', deps);
    expect(result.disks![0]).not.toHaveProperty('free_bytes');
    expect(result.problems).toEqual(['cannot measure free space on /models: EIO: statfs /models']);
  });

  it('reports disks unknown, with a sentence, when the mount table cannot be read', async () => {
    const deps = machine({}, {});
    const result = await probeDisks(['/models'], '/nonexistent/mountinfo', deps);
    expect(result.disks).toBeUndefined();
    expect(result.problems[0]).toMatch(/^cannot read the mount table \/nonexistent\/mountinfo: ENOENT/);
  });
});
