import { readdir, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { FabricReportSchema } from '../../protocol/node-report.js';
import { parseFabricFlag, probeInfiniband } from './fabrics.js';

const sysfs = fileURLToPath(new URL('./fixtures/infiniband/sys-class-infiniband-h100', import.meta.url));
const deps = {
  readdir: (p: string) => readdir(p, { withFileTypes: true }),
  readFile: (p: string) => readFile(p, 'utf8'),
};

describe('parseFabricFlag', () => {
  it('reads name=address and a bare name', () => {
    expect(parseFabricFlag('ib0=10.1.0.5')).toEqual({ name: 'ib0', address: '10.1.0.5', kind: 'configured' });
    expect(parseFabricFlag(' roce-a ')).toEqual({ name: 'roce-a', kind: 'configured' });
    expect(parseFabricFlag('ib0=fe80::1')).toEqual({ name: 'ib0', address: 'fe80::1', kind: 'configured' });
  });

  it('says what is wrong with an empty name or address, showing the form', () => {
    expect(parseFabricFlag('=10.1.0.5')).toMatch(/fabric name must be .*--fabric ib0=10\.1\.0\.5$/);
    expect(parseFabricFlag('ib0=')).toMatch(/address after "=" is empty/);
  });
});

describe('probeInfiniband', () => {
  it('reports every port of the captured H100 node, InfiniBand and RoCE, with state and rate', async () => {
    const fabrics = await probeInfiniband(sysfs, deps);
    for (const f of fabrics) FabricReportSchema.parse(f);
    expect(fabrics.map((f) => f.name)).toEqual([
      'mlx5_0/1',
      'mlx5_1/1',
      'mlx5_4/1',
      'mlx5_5/1',
      'mlx5_6/1',
      'mlx5_7/1',
      'mlx5_8/1',
      'mlx5_9/1',
      'mlx5_bond_0/1',
    ]);
    expect(fabrics[0]).toEqual({ name: 'mlx5_0/1', kind: 'infiniband', state: 'ACTIVE', rate: '400 Gb/sec (4X NDR)' });
    expect(fabrics.at(-1)).toEqual({
      name: 'mlx5_bond_0/1',
      kind: 'roce',
      state: 'ACTIVE',
      rate: '200 Gb/sec (2X NDR)',
    });
  });

  it('finds no fabric on a node without /sys/class/infiniband', async () => {
    expect(await probeInfiniband('/nonexistent/sys/class/infiniband', deps)).toEqual([]);
  });
});
