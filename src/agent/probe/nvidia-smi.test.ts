import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { GpuReport } from '../../protocol/index.js';
import { GpuReportSchema } from '../../protocol/node-report.js';
import type { ExecFn, ExecResult } from './exec.js';
import { execProcess, isExecutableFile } from './exec.js';
import { queryGpuCsv, writeFakeNvidiaSmi } from '../../../test/support/fake-nvidia-smi.js';
import {
  fallbackFields,
  GPU_QUERY_FIELDS,
  nvidiaSmiValue,
  parseNvidiaSmiOutput,
  probeGpus,
  throttleReasons,
  type GpuProbeDeps,
} from './nvidia-smi.js';

function fixture(path: string): string {
  return readFileSync(new URL(`./fixtures/${path}`, import.meta.url), 'utf8');
}

/**
 * A full `--format=csv` capture (header with units, every field) projected
 * onto the probe's own fields in `noheader,nounits` form: the captured
 * values, in the order and shape the probe asks nvidia-smi for.
 */
function projectCapture(
  text: string,
  fields: readonly string[] = GPU_QUERY_FIELDS,
  overrides: Record<string, string> = {},
): string {
  const [header, ...rows] = text.split('\n').filter((l) => l.trim() !== '');
  const names = header!.split(',').map((h) => h.trim().replace(/ \[.*\]$/, ''));
  return rows
    .map((row) => {
      const values = row.split(',').map((v) => v.trim());
      return fields
        .map((field) => {
          if (field in overrides) return overrides[field]!;
          const at = names.indexOf(field);
          if (at === -1) throw new Error(`the capture has no field ${field}`);
          return values[at]!.replace(/^(-?[\d.]+) [A-Za-z%]+$/, '$1');
        })
        .join(', ');
    })
    .join('\n')
    .concat('\n');
}

function gpusOf(stdout: string, stderr = '', exitCode: number | null = 0): GpuReport[] {
  const outcome = parseNvidiaSmiOutput(stdout, stderr, GPU_QUERY_FIELDS, exitCode);
  if (outcome.kind !== 'gpus') throw new Error(`expected GPUs, got ${JSON.stringify(outcome)}`);
  for (const gpu of outcome.gpus) GpuReportSchema.parse(gpu);
  return outcome.gpus;
}

describe('parseNvidiaSmiOutput on captured GPUs', () => {
  it('reads an idle H100 as healthy, with [N/A] retired pages left unknown', () => {
    const [gpu, ...rest] = gpusOf(projectCapture(fixture('nvidia-smi/query-gpu/h100-80gb-hbm3-idle.txt')));
    expect(rest).toEqual([]);
    expect(gpu).toEqual({
      index: 0,
      uuid: 'GPU-00000000-0000-0000-0000-000000000000',
      name: 'NVIDIA H100 80GB HBM3',
      class: 'h100-80gb',
      memory_total_mib: 81559,
      memory_used_mib: 0,
      temperature_c: 41,
      ecc_uncorrected: 0,
      remapped_rows_pending: false,
      remapped_rows_failure: false,
      throttle_reasons: ['gpu_idle'],
      problems: [],
    });
    expect(gpu, '[N/A] must read as unknown, not as "no"').not.toHaveProperty('retired_pages_pending');
  });

  it('reads an H100 under load with its memory in use and no clock events', () => {
    const [gpu] = gpusOf(projectCapture(fixture('nvidia-smi/query-gpu/h100-80gb-hbm3-load.txt')));
    expect(gpu).toMatchObject({ memory_used_mib: 19818, temperature_c: 59, throttle_reasons: [], problems: [] });
  });

  it('classes an H200 by its 143771 MiB as h200-141gb', () => {
    const [gpu] = gpusOf(projectCapture(fixture('nvidia-smi/query-gpu/h200-idle.txt')));
    expect(gpu).toMatchObject({ name: 'NVIDIA H200', class: 'h200-141gb', memory_total_mib: 143771, problems: [] });
  });

  it('classes an L40S as l40s-48gb', () => {
    const [gpu] = gpusOf(projectCapture(fixture('nvidia-smi/query-gpu/l40s-idle.txt')));
    expect(gpu).toMatchObject({ class: 'l40s-48gb', temperature_c: 63, ecc_uncorrected: 0, problems: [] });
  });

  it('leaves the ECC and remap fields of a consumer card unknown, not zero, and finds nothing wrong', () => {
    const [gpu] = gpusOf(projectCapture(fixture('nvidia-smi/query-gpu/rtx-4080-super-idle.txt')));
    expect(gpu).toMatchObject({ class: 'rtx4080super-16gb', memory_used_mib: 596, problems: [] });
    for (const field of [
      'ecc_uncorrected',
      'retired_pages_pending',
      'remapped_rows_pending',
      'remapped_rows_failure',
    ]) {
      expect(gpu, `${field} is [N/A] on a GeForce card and must stay unknown`).not.toHaveProperty(field);
    }
  });

  it('keeps a GPU in MIG mode out of placement with a sentence saying how to turn MIG off', () => {
    const [gpu] = gpusOf(projectCapture(fixture('nvidia-smi/query-gpu/h100-80gb-hbm3-mig-enabled.txt')));
    expect(gpu!.problems).toEqual([
      'MIG mode is on, and llmgw places whole GPUs only: turn it off (nvidia-smi -i 0 -mig 0) and reset the GPU',
    ]);
  });

  it('reports the A10 with a pending row remap (values of its -q capture) as needing a reset', () => {
    const [gpu] = gpusOf(fixture('nvidia-smi/own/a10-remapped-rows-pending.txt'));
    expect(gpu).toMatchObject({
      class: 'a10-24gb',
      uuid: 'GPU-73d12ef7-f589-f867-4259-c7090ab44736',
      remapped_rows_pending: true,
      remapped_rows_failure: false,
      problems: ['a memory row remap is pending: reset the GPU to apply it'],
    });
  });

  it('turns uncorrectable ECC errors since the driver loaded into a sentence that says to drain and reset', () => {
    const stdout = projectCapture(fixture('nvidia-smi/query-gpu/h100-80gb-hbm3-idle.txt'), GPU_QUERY_FIELDS, {
      'ecc.errors.uncorrected.volatile.total': '12',
      'ecc.errors.uncorrected.aggregate.total': '12',
    });
    const [gpu] = gpusOf(stdout);
    expect(gpu!.ecc_uncorrected).toBe(12);
    expect(gpu!.problems).toEqual(['12 uncorrectable ECC errors since the driver loaded; drain and reset the GPU']);
  });

  it('does not hold old, already repaired ECC errors (aggregate only) against a GPU', () => {
    const stdout = projectCapture(fixture('nvidia-smi/query-gpu/h100-80gb-hbm3-idle.txt'), GPU_QUERY_FIELDS, {
      'ecc.errors.uncorrected.aggregate.total': '3',
    });
    const [gpu] = gpusOf(stdout);
    expect(gpu!.ecc_uncorrected, 'the lifetime count is still reported').toBe(3);
    expect(gpu!.problems).toEqual([]);
  });

  it('says what to do about pending page retirement and a failed row remap', () => {
    const stdout = projectCapture(fixture('nvidia-smi/query-gpu/h100-80gb-hbm3-idle.txt'), GPU_QUERY_FIELDS, {
      'retired_pages.pending': 'Yes',
      'remapped_rows.failure': 'Yes',
    });
    const [gpu] = gpusOf(stdout);
    expect(gpu!.problems).toEqual([
      'ECC page retirement is pending: reset the GPU to apply it',
      'row remapping failed, so the GPU can no longer repair its memory: replace the GPU',
    ]);
  });

  it('keeps the other seven GPUs of a node whose GPU 3 is lost, and gives the lost one its index and a sentence', () => {
    const gpus = gpusOf(fixture('nvidia-smi/own/h100-x8-gpu3-lost.txt'), '', 15);
    expect(gpus.map((g) => g.index)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    expect(gpus.filter((g) => g.problems.length > 0).map((g) => g.index)).toEqual([3]);
    expect(gpus[3]).toEqual({
      index: 3,
      problems: [
        'GPU 0000:5d:00 is lost (nvidia-smi: "GPU is lost. Reboot the system to recover this GPU"): reboot the machine to recover it, and replace the GPU if it is lost again',
      ],
    });
    expect(gpus[4]).toMatchObject({ uuid: 'GPU-2b6f61f9-8b00-3b57-d912-b62792120662', class: 'h100-80gb' });
  });

  it('keeps a GPU whose row was cut short, with its values dropped and a sentence, and the complete rows intact', () => {
    const rows = fixture('nvidia-smi/own/h100-x8-gpu3-lost.txt').split('\n');
    const cut = rows[1]!.slice(0, rows[1]!.indexOf('HBM3') - 3);
    const gpus = gpusOf([rows[0], cut].join('\n'));
    expect(gpus[0]!.problems).toEqual([]);
    expect(gpus[1]).toEqual({
      index: 1,
      problems: [
        `nvidia-smi printed 2 of ${GPU_QUERY_FIELDS.length} fields for GPU 1, so its health is unknown: run "nvidia-smi -q -i 1" on the node to see why`,
      ],
    });
  });
});

describe('parseNvidiaSmiOutput on nvidia-smi failures', () => {
  it('reads a device-handle Unknown Error (no space after "GPU") as one unreachable GPU', () => {
    const gpus = gpusOf('', fixture('nvidia-smi/errors/device-handle-unknown-error.txt'), 15);
    expect(gpus).toEqual([
      {
        index: 0,
        problems: [
          'nvidia-smi cannot reach GPU 0000:07:00 ("Unknown Error"): look for Xid errors in the kernel log, then reset the GPU or reboot',
        ],
      },
    ]);
  });

  it('reads the older device-handle form with a space after "GPU"', () => {
    const gpus = gpusOf(fixture('nvidia-smi/errors/device-handle-unknown-error-2015.txt'));
    expect(gpus[0]!.problems[0]).toContain('cannot reach GPU 0000:0b:00');
  });

  it('reads "GPU is lost" as a lost GPU that needs a reboot', () => {
    const gpus = gpusOf(fixture('nvidia-smi/errors/device-handle-gpu-lost.txt'));
    expect(gpus[0]!.problems[0]).toMatch(/^GPU 0000:02:00 is lost .*reboot the machine/);
  });

  it('makes a driver communication failure a probe error: the GPUs are unknown, not absent', () => {
    const outcome = parseNvidiaSmiOutput(
      fixture('nvidia-smi/errors/driver-communication-failure.txt'),
      '',
      GPU_QUERY_FIELDS,
      9,
    );
    expect(outcome).toEqual({
      kind: 'failed',
      reason:
        "nvidia-smi cannot talk to the NVIDIA driver: check that the driver is loaded (lsmod | grep nvidia) and matches nvidia-smi's version; until then this node's GPUs are unknown",
    });
  });

  it('makes "No devices were found" a probe error that says where to look', () => {
    const outcome = parseNvidiaSmiOutput(
      fixture('nvidia-smi/errors/no-devices-were-found.txt'),
      '',
      GPU_QUERY_FIELDS,
      6,
    );
    expect(outcome.kind).toBe('failed');
    expect(outcome.kind === 'failed' && outcome.reason).toMatch(/^nvidia-smi found no GPUs .*lspci/);
  });

  it('quotes anything else nvidia-smi says when it fails, with the exit code', () => {
    const outcome = parseNvidiaSmiOutput('', 'Failed to initialize NVML: Unknown Error\n', GPU_QUERY_FIELDS, 255);
    expect(outcome).toEqual({
      kind: 'failed',
      reason: `nvidia-smi failed (exit 255): "Failed to initialize NVML: Unknown Error"; until then this node's GPUs are unknown`,
    });
  });

  it('asks for a retry when nvidia-smi refuses a field', () => {
    const outcome = parseNvidiaSmiOutput(
      'Field "clocks_event_reasons.active" is not a valid field to query.\n\n',
      '',
      GPU_QUERY_FIELDS,
      2,
    );
    expect(outcome).toEqual({ kind: 'invalid_field', field: 'clocks_event_reasons.active' });
  });
});

describe('values nvidia-smi prints instead of a value', () => {
  it('reads [N/A], [Not Supported], deprecation notices and empty fields as absent', () => {
    // The fifth field of both captures is fan.speed: [N/A] on a recent driver, [Not Supported] on an old one.
    const recent = fixture('nvidia-smi/query-gpu/fan-na-noheader-nounits.txt').trim().split(', ');
    const old = fixture('nvidia-smi/query-gpu/fan-not-supported-old-driver-noheader-nounits.txt').trim().split(', ');
    expect(nvidiaSmiValue(recent[4])).toBeUndefined();
    expect(nvidiaSmiValue(old[4])).toBeUndefined();
    expect(nvidiaSmiValue(recent[3]), 'temperature.gpu').toBe('44');
    expect(nvidiaSmiValue('[Requested functionality has been deprecated]')).toBeUndefined();
    expect(nvidiaSmiValue('')).toBeUndefined();
    expect(nvidiaSmiValue(' N/A ')).toBeUndefined();
  });

  it('decodes clock event reason bits, and leaves an unreadable mask unknown', () => {
    expect(throttleReasons('0x0000000000000000')).toEqual([]);
    expect(throttleReasons('0x0000000000000044')).toEqual(['sw_power_cap', 'hw_thermal_slowdown']);
    expect(throttleReasons('[N/A]')).toBeUndefined();
  });
});

describe('fallbackFields', () => {
  it('renames clock event reasons to the throttle reasons of drivers before 535', () => {
    const next = fallbackFields(GPU_QUERY_FIELDS, 'clocks_event_reasons.active');
    expect(next).toContain('clocks_throttle_reasons.active');
    expect(next).not.toContain('clocks_event_reasons.active');
  });

  it('drops a refused field with its whole family', () => {
    const next = fallbackFields(GPU_QUERY_FIELDS, 'remapped_rows.pending')!;
    expect(next.filter((f) => f.startsWith('remapped_rows.'))).toEqual([]);
    expect(next.length).toBe(GPU_QUERY_FIELDS.length - 2);
  });

  it('gives up on a required field or one not asked for', () => {
    expect(fallbackFields(GPU_QUERY_FIELDS, 'memory.total')).toBeNull();
    expect(fallbackFields(GPU_QUERY_FIELDS, 'cuda_version')).toBeNull();
  });
});

/** An exec that answers like nvidia-smi from a function of its arguments, and records each call. */
function fakeExec(answer: (args: readonly string[]) => ExecResult | Error): { exec: ExecFn; calls: string[][] } {
  const calls: string[][] = [];
  const exec: ExecFn = (_file, args) => {
    calls.push([...args]);
    const result = answer(args);
    return result instanceof Error ? Promise.reject(result) : Promise.resolve(result);
  };
  return { exec, calls };
}

const ok = (stdout: string, exitCode = 0): ExecResult => ({ exitCode, stdout, stderr: '', timedOut: false });

function deps(exec: ExecFn, kernelLog: string | null = null): GpuProbeDeps {
  return {
    exec,
    isExecutable: (path) => Promise.resolve(path === '/usr/bin/nvidia-smi'),
    readKernelLog: () => Promise.resolve(kernelLog),
  };
}

const options = { pathEnv: '/usr/local/bin:/usr/bin', timeoutMs: 10_000 };

describe('probeGpus', () => {
  it('reports a node without nvidia-smi on its PATH as a CPU node, with no GPUs and no error', async () => {
    const { exec, calls } = fakeExec(() => ok(''));
    expect(await probeGpus({ ...options, pathEnv: '/usr/local/bin' }, deps(exec))).toEqual({ gpus: [] });
    expect(calls, 'nothing is run when nothing is found').toEqual([]);
  });

  it('treats nvidia-smi vanishing between the look-up and the run (ENOENT) as a CPU node', async () => {
    const { exec } = fakeExec(() => Object.assign(new Error('spawn nvidia-smi ENOENT'), { code: 'ENOENT' }));
    expect(await probeGpus(options, deps(exec))).toEqual({ gpus: [] });
  });

  it('falls back field by field on an old driver and remembers the list that worked', async () => {
    const refused = ['clocks_event_reasons.active', 'remapped_rows.pending', 'mig.mode.current'];
    const { exec, calls } = fakeExec((args) => {
      const field = refused.find((f) => args[0]!.includes(f));
      if (field) return ok(`Field "${field}" is not a valid field to query.\n`, 2);
      const fields = args[0]!.slice('--query-gpu='.length).split(',');
      return ok(
        fields
          .map((f) =>
            f === 'index' ? '0' : f === 'name' ? 'Tesla P100-PCIE-16GB' : f === 'memory.total' ? '16280' : '[N/A]',
          )
          .join(', '),
      );
    });
    const result = await probeGpus(options, deps(exec));
    expect(result.gpus).toEqual([
      { index: 0, name: 'Tesla P100-PCIE-16GB', class: 'p100-16gb', memory_total_mib: 16280, problems: [] },
    ]);
    expect(calls.length, 'one refusal per unknown field family, then the query that works').toBe(4);
    expect(result.fields).toContain('clocks_throttle_reasons.active');
    expect(result.fields!.some((f) => f.startsWith('remapped_rows.') || f === 'mig.mode.current')).toBe(false);
  });

  it('reports a hung nvidia-smi as a probe error, explained by the GSP timeouts in the kernel log', async () => {
    const { exec } = fakeExec(() => ({ exitCode: null, stdout: '', stderr: '', timedOut: true }));
    const result = await probeGpus(options, deps(exec, fixture('dmesg/xid-119-gsp-rpc-timeout.txt')));
    expect(result.gpus).toBeUndefined();
    expect(result.error).toMatch(/^nvidia-smi did not answer within 10 s/);
    expect(result.error).toContain(
      '(the kernel log shows Xid 119 (GSP firmware stopped answering) for GPU 0000:9b:00)',
    );
  });

  it("adds the kernel log's Xid 79 to the sentence of the GPU nvidia-smi lost", async () => {
    const { exec } = fakeExec(() => ok(fixture('nvidia-smi/own/h100-x8-gpu3-lost.txt'), 15));
    const result = await probeGpus(options, deps(exec, fixture('dmesg/own-xid-79-5d.txt')));
    expect(result.gpus![3]!.problems[0]).toMatch(
      /is lost .*\(the kernel log shows Xid 79 \(fallen off the bus\) for GPU 0000:5d:00\)$/,
    );
    expect(result.gpus![0]!.problems).toEqual([]);
  });

  it('explains "No devices were found" with a GPU the kernel says fell off the bus', async () => {
    const { exec } = fakeExec(() => ok(fixture('nvidia-smi/errors/no-devices-were-found.txt'), 6));
    const result = await probeGpus(options, deps(exec, fixture('dmesg/fallen-off-the-bus-no-xid.txt')));
    expect(result.error).toMatch(
      /^nvidia-smi found no GPUs .*\(the kernel log shows fallen off the bus for GPU 0000:b3:00\)$/,
    );
  });

  it('still reports the failure when the kernel log cannot be read', async () => {
    const { exec } = fakeExec(() => ok(fixture('nvidia-smi/errors/driver-communication-failure.txt'), 9));
    const failing: GpuProbeDeps = { ...deps(exec), readKernelLog: () => Promise.reject(new Error('EPERM')) };
    const result = await probeGpus(options, failing);
    expect(result.error).toMatch(/^nvidia-smi cannot talk to the NVIDIA driver/);
  });
});

describe('probeGpus through a real process (stand-in nvidia-smi first on PATH)', () => {
  let dir: string | null = null;
  afterEach(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
    dir = null;
  });

  it('runs nvidia-smi with the probe query and reads what it printed, whatever its exit code', async () => {
    dir = await mkdtemp(join(tmpdir(), 'llmgw-probe-'));
    const fake = await writeFakeNvidiaSmi(join(dir, 'bin'), {
      stdout: fixture('nvidia-smi/own/h100-x8-gpu3-lost.txt'),
      exitCode: 15,
    });
    const result = await probeGpus(
      { pathEnv: `${fake.dir}:/usr/bin:/bin`, timeoutMs: 10_000 },
      { exec: execProcess, isExecutable: isExecutableFile, readKernelLog: () => Promise.resolve(null) },
    );
    expect(result.gpus?.length, JSON.stringify(result)).toBe(8);
    expect(result.gpus![3]!.problems[0]).toMatch(/^GPU 0000:5d:00 is lost/);
    const args = await readFile(fake.argsLog, 'utf8');
    expect(args).toBe(`--query-gpu=${GPU_QUERY_FIELDS.join(',')} --format=csv,noheader,nounits\n`);
  });

  it('falls back through a stand-in that refuses the newer field names like an old driver', async () => {
    dir = await mkdtemp(join(tmpdir(), 'llmgw-probe-'));
    const fake = await writeFakeNvidiaSmi(join(dir, 'bin'), {
      stdout: queryGpuCsv([{ index: 0, name: 'NVIDIA A10G', 'memory.total': 23028 }]),
      unknownFields: ['clocks_event_reasons.active'],
    });
    const result = await probeGpus(
      { pathEnv: fake.dir, timeoutMs: 10_000 },
      { exec: execProcess, isExecutable: isExecutableFile, readKernelLog: () => Promise.resolve(null) },
    );
    // The stand-in prints the same row for any query, so after the rename the row's width still matches.
    expect(result.gpus).toEqual([
      { index: 0, name: 'NVIDIA A10G', class: 'a10g-24gb', memory_total_mib: 23028, problems: [] },
    ]);
    expect((await readFile(fake.argsLog, 'utf8')).split('\n').filter(Boolean).length).toBe(2);
  });
});
