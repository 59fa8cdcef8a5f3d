import { copyFile, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isLlmgwError, type LlmgwError } from '../../errors/index.js';
import { NodeReportSchema } from '../../protocol/index.js';
import type { ExecFn } from './exec.js';
import { queryGpuCsv, writeFakeNvidiaSmi } from '../../../test/support/fake-nvidia-smi.js';
import { compileProbeOptions, NodeProber, probeNode, type ProbeOptions } from './probe-node.js';

const fixtures = fileURLToPath(new URL('./fixtures/', import.meta.url));

let root: string;
beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'llmgw-probe-node-'));
});
afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

/** A /proc with captured meminfo and the pod's mount table (its "/" holds every path, so statfs answers for real). */
async function fakeProc(): Promise<string> {
  const proc = join(root, 'proc');
  await mkdir(join(proc, 'self'), { recursive: true });
  await copyFile(join(fixtures, 'meminfo/own-kernel-3.10-no-memavailable.txt'), join(proc, 'meminfo'));
  await copyFile(join(fixtures, 'mountinfo/own-k8s-pod-nfs4-pvc.txt'), join(proc, 'self', 'mountinfo'));
  return proc;
}

function codeOf(run: () => unknown): string {
  try {
    run();
  } catch (err) {
    if (isLlmgwError(err)) return `${err.code}: ${err.message}`;
    throw err;
  }
  return 'accepted';
}

describe('probeNode on a machine (real processes and files, a stand-in nvidia-smi)', () => {
  it('reports every part of the machine in a report the control plane accepts', async () => {
    const fake = await writeFakeNvidiaSmi(join(root, 'bin'), {
      stdout: queryGpuCsv([
        { index: 0, name: 'NVIDIA L40S', 'memory.total': 46068, uuid: 'GPU-1', 'remapped_rows.pending': 'No' },
        { index: 1, name: 'NVIDIA L40S', 'memory.total': 46068, uuid: 'GPU-2', 'remapped_rows.pending': 'Yes' },
      ]),
    });
    const cacheDir = join(root, 'cache');
    const modelDir = join(root, 'models');
    await mkdir(join(modelDir, 'qwen'), { recursive: true });
    await writeFile(join(modelDir, 'qwen', 'model.gguf'), Buffer.alloc(128));
    const warnings: string[] = [];

    const report = await probeNode(
      {
        cacheDir,
        modelDirs: [modelDir],
        fabrics: ['ib0=10.1.0.5'],
        pathEnv: fake.dir,
        procRoot: await fakeProc(),
        infinibandRoot: join(fixtures, 'infiniband/sys-class-infiniband-h100'),
      },
      { warn: (m) => warnings.push(m) },
    );

    expect(() => NodeReportSchema.parse(report), 'the wire schema accepts it').not.toThrow();
    expect(warnings).toEqual([]);
    expect(report.memory_total_bytes).toBe(528280184 * 1024);
    expect(report).not.toHaveProperty('memory_available_bytes');
    expect(report.cpu_count).toBeGreaterThan(0);
    expect(report.gpus?.map((g) => [g.class, g.problems.length])).toEqual([
      ['l40s-48gb', 0],
      ['l40s-48gb', 1],
    ]);
    expect(report).not.toHaveProperty('gpu_probe_error');
    expect(report.disks).toHaveLength(1);
    expect(report.disks![0]).toMatchObject({
      mount_point: '/',
      fs_type: 'overlay',
      shared: false,
      paths: [cacheDir, modelDir],
    });
    expect(report.disks![0]!.free_bytes).toBeGreaterThan(0);
    expect(report.weights).toEqual([
      { path: join(modelDir, 'qwen'), size_bytes: 128, kind: 'model_dir', source: `file://${join(modelDir, 'qwen')}` },
    ]);
    expect(report.fabrics![0]).toEqual({ name: 'ib0', address: '10.1.0.5', kind: 'configured' });
    expect(report.fabrics!.length, 'configured plus 9 RDMA ports').toBe(10);
    expect(report.engines).toEqual([{ name: 'builtin' }, { name: 'sim' }]);
    expect(report).toMatchObject({ cache_dir: cacheDir, model_dirs: [modelDir] });
    expect(report).not.toHaveProperty('simulated');
  });

  it('reports a CPU node (no nvidia-smi on PATH) with gpus: [] and no error', async () => {
    const report = await probeNode({
      cacheDir: join(root, 'cache'),
      pathEnv: join(root, 'empty-bin'),
      procRoot: await fakeProc(),
    });
    expect(report.gpus).toEqual([]);
    expect(report).not.toHaveProperty('gpu_probe_error');
  });
});

describe('probeNode when probes fail', () => {
  it('never throws: each failing probe leaves its field unknown and says why', async () => {
    const failing = () => Promise.reject(Object.assign(new Error('EACCES: permission denied'), { code: 'EACCES' }));
    const warnings: string[] = [];
    const report = await probeNode(
      { cacheDir: '/var/lib/llmgw/cache', modelDirs: ['/models'], pathEnv: '/usr/bin' },
      {
        exec: failing,
        isExecutable: () => Promise.resolve(true),
        readFile: failing,
        readHead: failing,
        readdir: failing,
        lstat: failing,
        realpath: failing,
        statfs: failing,
        hostname: () => {
          throw new Error('no hostname');
        },
        readKernelLog: () => Promise.resolve(null),
        warn: (m) => warnings.push(m),
      },
    );
    expect(() => NodeReportSchema.parse(report)).not.toThrow();
    expect(report.gpus).toBeUndefined();
    expect(report.gpu_probe_error).toBe(
      'nvidia-smi at /usr/bin/nvidia-smi could not be started: EACCES: permission denied',
    );
    expect(report).not.toHaveProperty('hostname');
    expect(report).not.toHaveProperty('disks');
    expect(report.weights, 'nothing listed, but listing ran').toEqual([]);
    expect(report.engines, 'engines whose version cannot be read are still there').toContainEqual({
      name: 'vllm',
      path: '/usr/bin/vllm',
    });
    expect(report).not.toHaveProperty('memory_total_bytes');
    // Probes run at once, so their warnings come in no fixed order.
    expect(warnings.sort()).toEqual([
      'cannot list the cache directory /var/lib/llmgw/cache: EACCES: permission denied',
      'cannot list the model directory /models: EACCES: permission denied',
      'cannot read the mount table /proc/self/mountinfo: EACCES: permission denied',
      'probing RAM failed: EACCES: permission denied',
      'probing the hostname and CPUs failed: no hostname',
    ]);
  });
});

describe('probeNode with --simulate', () => {
  it('reports the declared hardware and never runs nvidia-smi, while the weights stay real', async () => {
    const exec: ExecFn = () => Promise.reject(new Error('nothing may run on a simulated node'));
    const cacheDir = join(root, 'data', 'cache');
    const entry = 'b'.repeat(64);
    await mkdir(join(cacheDir, entry), { recursive: true });
    const report = await probeNode(
      {
        cacheDir,
        simulate: `gpus=2xh100-80gb,bad=1,ram=512g,cpus=32,disk=${root}/data:1t/2t,fabric=ib0,fabric=ib1=10.2.0.9,engines=vllm`,
        simulateSeed: 'node-a',
        fabrics: ['ib0=10.1.0.5'],
        pathEnv: '/usr/bin',
      },
      { exec, isExecutable: () => Promise.resolve(true), hostname: () => 'host-1' },
    );
    expect(() => NodeReportSchema.parse(report)).not.toThrow();
    expect(report.simulated).toBe(true);
    expect(report.gpus?.map((g) => [g.class, g.problems.length])).toEqual([
      ['h100-80gb', 0],
      ['h100-80gb', 1],
    ]);
    expect(report).toMatchObject({
      cpu_count: 32,
      memory_total_bytes: 512 * 2 ** 30,
      memory_available_bytes: 512 * 2 ** 30,
      hostname: 'host-1',
    });
    expect(report.disks).toEqual([
      {
        mount_point: `${root}/data`,
        source: 'simulated',
        shared: false,
        free_bytes: 2 ** 40,
        total_bytes: 2 * 2 ** 40,
        paths: [cacheDir],
      },
    ]);
    expect(report.fabrics, 'the configured address wins over the declared fabric of the same name').toEqual([
      { name: 'ib0', address: '10.1.0.5', kind: 'configured' },
      { name: 'ib1', address: '10.2.0.9', kind: 'configured' },
    ]);
    expect(report.engines).toEqual([{ name: 'vllm' }, { name: 'builtin' }, { name: 'sim' }]);
    expect(report.weights).toEqual([{ path: join(cacheDir, entry), size_bytes: 0, kind: 'cache', cache_name: entry }]);
  });
});

describe('NodeProber', () => {
  it('asks an old driver with the field list that worked, instead of falling back on every heartbeat', async () => {
    const queries: string[] = [];
    const exec: ExecFn = (_file, args) => {
      queries.push(args[0] ?? '');
      if (args[0]!.includes('clocks_event_reasons')) {
        return Promise.resolve({
          exitCode: 2,
          stdout: 'Field "clocks_event_reasons.active" is not a valid field to query.\n',
          stderr: '',
          timedOut: false,
        });
      }
      const width = args[0]!.split(',').length;
      const row = ['0', 'Tesla T4', '15360', ...Array(width - 3).fill('[N/A]')].join(', ');
      return Promise.resolve({ exitCode: 0, stdout: `${row}\n`, stderr: '', timedOut: false });
    };
    const prober = new NodeProber(
      { cacheDir: join(root, 'cache'), pathEnv: '/usr/bin', procRoot: await fakeProc() },
      { exec, isExecutable: (p) => Promise.resolve(p === '/usr/bin/nvidia-smi') },
    );
    const first = await prober.probe();
    const second = await prober.probe();
    expect(first.gpus?.[0]?.class).toBe('t4-16gb');
    expect(second.gpus).toEqual(first.gpus);
    expect(queries.length, 'a refusal and a success, then one query').toBe(3);
  });
});

describe('compileProbeOptions', () => {
  const base: ProbeOptions = { cacheDir: '/var/lib/llmgw/cache' };

  it('fills the defaults', () => {
    const config = compileProbeOptions(base);
    expect(config).toMatchObject({
      modelDirs: [],
      fabrics: [],
      simulated: null,
      procRoot: '/proc',
      nvidiaSmiTimeoutMs: 15_000,
    });
    expect(Object.isFrozen(config)).toBe(true);
  });

  it('refuses an unknown option naming the nearest one, and relative directories', () => {
    expect(codeOf(() => compileProbeOptions({ ...base, modelDir: ['/m'] } as ProbeOptions))).toMatch(
      /^LLMGW_CONFIG_INVALID: .*modelDir: unknown field; did you mean "modelDirs"\?/,
    );
    expect(codeOf(() => compileProbeOptions({ cacheDir: 'cache' }))).toMatch(
      /^LLMGW_CONFIG_INVALID: .*cacheDir.*absolute path/,
    );
  });

  it('refuses bad and repeated --fabric flags, listing each', () => {
    const err = (() => {
      try {
        compileProbeOptions({ ...base, fabrics: ['ib0=1.2.3.4', 'ib0=5.6.7.8', '=x'] });
      } catch (e) {
        return e as LlmgwError & { problems: string[] };
      }
      throw new Error('accepted');
    })();
    expect(err.code).toBe('LLMGW_CONFIG_INVALID');
    expect(err.problems).toHaveLength(2);
    expect(err.problems[0]).toBe('--fabric ib0 is given twice; give each fabric once');
  });

  it('refuses a malformed --simulate spec at start, with its own code', () => {
    expect(codeOf(() => compileProbeOptions({ ...base, simulate: 'gpus=lots' }))).toMatch(
      /^LLMGW_SIMULATE_SPEC_INVALID: /,
    );
  });
});
