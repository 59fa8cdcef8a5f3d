import { describe, expect, it } from 'vitest';
import { isLlmgwError, type ValidationError } from '../../errors/index.js';
import { GpuReportSchema } from '../../protocol/node-report.js';
import { gpuClass } from './gpu-class.js';
import { parseSimulateSpec, simulatedDisks, simulatedEngines, simulatedGpus, simulatedGpuUuid } from './simulate.js';

const T = 2 ** 40;
const G = 2 ** 30;

function specError(spec: string): ValidationError {
  try {
    parseSimulateSpec(spec);
  } catch (err) {
    if (isLlmgwError(err)) return err as ValidationError;
    throw err;
  }
  throw new Error(`spec ${JSON.stringify(spec)} was accepted`);
}

describe('parseSimulateSpec', () => {
  it('reads a whole declared machine', () => {
    const machine = parseSimulateSpec(
      'gpus=8xh100-80gb,ram=2048g,disk=/data:3.5t:local,disk=/models:20t:shared,fabric=ib0,cpus=64,engines=vllm+llamacpp',
    );
    expect(machine).toEqual({
      gpuClasses: Array(8).fill('h100-80gb'),
      badGpus: [],
      ramBytes: 2048 * G,
      cpuCount: 64,
      disks: [
        { mountPoint: '/data', freeBytes: 3.5 * T, totalBytes: 3.5 * T, shared: false },
        { mountPoint: '/models', freeBytes: 20 * T, totalBytes: 20 * T, shared: true },
      ],
      fabrics: [{ name: 'ib0', kind: 'configured' }],
      engines: ['vllm', 'llamacpp'],
    });
  });

  it('reads mixed GPUs, a bad GPU, free/total disk space and a fabric address', () => {
    const machine = parseSimulateSpec('gpus=2xh100-80gb+l40s-48gb,bad=1,disk=/data:1t/3.5t,fabric=ib0=10.1.0.5');
    expect(machine.gpuClasses).toEqual(['h100-80gb', 'h100-80gb', 'l40s-48gb']);
    expect(machine.badGpus).toEqual([1]);
    expect(machine.disks).toEqual([{ mountPoint: '/data', freeBytes: T, totalBytes: 3.5 * T, shared: false }]);
    expect(machine.fabrics).toEqual([{ name: 'ib0', address: '10.1.0.5', kind: 'configured' }]);
    expect(machine.engines, 'not declared: builtin and sim only').toBeUndefined();
  });

  it('refuses a malformed spec with LLMGW_SIMULATE_SPEC_INVALID, naming every bad part and showing the form', () => {
    const err = specError('gpus=8xh100,ram=2048,gpu=1,disk=data:1t,engines=vlm,bad=9');
    expect(err.code).toBe('LLMGW_SIMULATE_SPEC_INVALID');
    expect(err.problems).toEqual([
      'gpus=8xh100: "8xh100" is not COUNTxCLASS with a class like h100-80gb (family, dash, memory in GB)',
      'ram "2048" has no unit; write it like 512g or 3.5t',
      '"gpu=1": unknown part "gpu"; did you mean "gpus"?',
      'disk=data:1t is not PATH:SIZE[:local|shared] with an absolute PATH, e.g. disk=/data:3.5t:local',
      'engines=vlm: unknown engine "vlm"; did you mean "vllm"?',
      'bad=9: there is no GPU 9; no GPUs are declared',
    ]);
    expect(err.message).toMatch(/^--simulate spec is not valid \(the form is gpus=8xh100-80gb/);
  });

  it('refuses a repeated single part, a disk declared twice, free space above the size, and an empty spec', () => {
    expect(specError('cpus=4,cpus=8').problems).toEqual(['"cpus=8": cpus is given twice; give it once']);
    expect(specError('disk=/d:1t,disk=/d:2t').problems[0]).toMatch(/\/d is declared twice/);
    expect(specError('disk=/d:2t/1t').problems[0]).toMatch(/free space is larger than the disk/);
    expect(specError(' ').problems).toEqual(['the spec is empty']);
    expect(specError('cpus=0').problems[0]).toMatch(/^cpus=0: want a whole number/);
    expect(specError('gpus=2xa10g-24gb,bad=2').problems).toEqual([
      'bad=2: there is no GPU 2; the declared GPUs are 0 to 1',
    ]);
  });
});

describe('simulated hardware', () => {
  it('gives simulated GPUs stable uuids from the seed, the memory of their class, and health as declared', () => {
    const machine = parseSimulateSpec('gpus=4xh100-80gb,bad=3');
    const gpus = simulatedGpus(machine, 'node-7');
    for (const gpu of gpus) GpuReportSchema.parse(gpu);
    expect(gpus.map((g) => g.uuid)).toEqual(simulatedGpus(machine, 'node-7').map((g) => g.uuid));
    expect(new Set(gpus.map((g) => g.uuid)).size, 'uuids are distinct').toBe(4);
    expect(simulatedGpuUuid('node-8', 0)).not.toBe(gpus[0]!.uuid);
    expect(gpus[0]!.uuid).toMatch(/^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    expect(gpus[0]).toMatchObject({
      index: 0,
      class: 'h100-80gb',
      memory_total_mib: 81559,
      memory_used_mib: 0,
      problems: [],
    });
    expect(
      gpuClass('NVIDIA H100 80GB HBM3', gpus[0]!.memory_total_mib),
      'a simulated card is as big as a real one',
    ).toBe('h100-80gb');
    expect(gpus[3]!.problems).toEqual(['2 uncorrectable ECC errors since the driver loaded; drain and reset the GPU']);
  });

  it('puts each directory on the declared disk with the longest mount point holding it', () => {
    const machine = parseSimulateSpec('disk=/:100g,disk=/data:3.5t:local,disk=/data/models:20t:shared');
    const disks = simulatedDisks(machine.disks!, ['/data/llmgw/cache', '/data/models/llama', '/opt/models']);
    expect(disks.map((d) => [d.mount_point, d.paths, d.shared])).toEqual([
      ['/', ['/opt/models'], false],
      ['/data', ['/data/llmgw/cache'], false],
      ['/data/models', ['/data/models/llama'], true],
    ]);
    expect(disks[1]).toMatchObject({ free_bytes: 3.5 * T, total_bytes: 3.5 * T, source: 'simulated' });
  });

  it('always offers the engines shipped inside llmgw', () => {
    expect(simulatedEngines(parseSimulateSpec('engines=vllm+sim'))).toEqual([
      { name: 'vllm' },
      { name: 'sim' },
      { name: 'builtin' },
    ]);
    expect(simulatedEngines(parseSimulateSpec('cpus=2'))).toEqual([{ name: 'builtin' }, { name: 'sim' }]);
  });
});
