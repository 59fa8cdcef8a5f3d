// `--simulate SPEC`: a machine declared instead of probed, so one host can
// run a fleet of agents that look like H100 boxes, CPU boxes and NFS-backed
// nodes to the control plane. Only the hardware is declared; the agent's
// directories and what is in them stay real. The spec reads like the
// machine's datasheet:
//
//   gpus=8xh100-80gb,bad=3,ram=2048g,cpus=64,disk=/data:3.5t:local,
//   disk=/models:20t:shared,fabric=ib0=10.1.0.5,engines=vllm+llamacpp
//
// Parts left out keep their real values, except GPUs (none unless declared:
// a simulated node never shows the host's real GPUs), fabrics (only those
// declared or configured) and engines (builtin and sim unless declared).
import { createHash } from 'node:crypto';
import { ValidationError } from '../../errors/index.js';
import type { DiskReport, FabricReport, GpuReport } from '../../protocol/index.js';
import { nearestName, parseSizeBytes } from '../../units/index.js';
import { BUILTIN_ENGINES, ENGINE_NAMES } from './engines.js';
import { parseFabricFlag } from './fabrics.js';
import { classMemoryMiB, GPU_CLASS_RE } from './gpu-class.js';
import { gpuProblems } from './nvidia-smi.js';

export const SIMULATE_SPEC_FORM =
  'gpus=8xh100-80gb[+2xl40s-48gb],bad=3,ram=2048g,cpus=64,disk=/data:3.5t:local,disk=/models:1t/20t:shared,fabric=ib0=10.1.0.5,engines=vllm+llamacpp';

const KEYS = ['gpus', 'bad', 'ram', 'cpus', 'disk', 'fabric', 'engines'] as const;
type Key = (typeof KEYS)[number];
/** Keys that may appear more than once: a machine has several disks and fabrics. */
const REPEATABLE: ReadonlySet<Key> = new Set(['disk', 'fabric']);

export interface SimulatedDisk {
  mountPoint: string;
  freeBytes: number;
  totalBytes: number;
  shared: boolean;
}

/** The parsed spec. Absent fields were not declared and keep their real (probed) values. */
export interface SimulatedMachine {
  /** One class per GPU, in index order; [] = declared none, or not declared. */
  readonly gpuClasses: readonly string[];
  /** GPU indices declared unhealthy with `bad=`. */
  readonly badGpus: readonly number[];
  readonly ramBytes?: number;
  readonly cpuCount?: number;
  /** Absent: no `disk=` was given, so disks are probed for real. */
  readonly disks?: readonly SimulatedDisk[];
  readonly fabrics: readonly FabricReport[];
  /** Absent: no `engines=`; builtin and sim only. */
  readonly engines?: readonly string[];
}

/** A size with a unit: a bare number in a machine spec is far more likely a mistake than a byte count. */
function sizeOf(text: string, what: string): number | string {
  if (!/[kmgtp]/i.test(text)) return `${what} ${JSON.stringify(text)} has no unit; write it like 512g or 3.5t`;
  const bytes = parseSizeBytes(text);
  return typeof bytes === 'string' ? `${what}: ${bytes}` : bytes;
}

function parseGpus(value: string, problems: string[]): string[] {
  if (value === 'none' || value === '0') return [];
  const classes: string[] = [];
  for (const group of value.split('+')) {
    const match = /^(?:(\d+)x)?(.+)$/.exec(group.trim());
    const count = match?.[1] === undefined ? 1 : Number(match[1]);
    const cls = match?.[2] ?? '';
    if (!GPU_CLASS_RE.test(cls)) {
      problems.push(
        `gpus=${value}: "${group}" is not COUNTxCLASS with a class like h100-80gb (family, dash, memory in GB)`,
      );
      continue;
    }
    if (!Number.isInteger(count) || count < 1 || count > 64) {
      problems.push(`gpus=${value}: "${group}" needs a count from 1 to 64`);
      continue;
    }
    for (let i = 0; i < count; i++) classes.push(cls);
  }
  return classes;
}

function parseDisk(value: string, problems: string[]): SimulatedDisk | null {
  const parts = value.split(':');
  const [mountPoint, size, kind = 'local'] = parts;
  if (parts.length > 3 || !mountPoint?.startsWith('/') || !size) {
    problems.push(`disk=${value} is not PATH:SIZE[:local|shared] with an absolute PATH, e.g. disk=/data:3.5t:local`);
    return null;
  }
  if (kind !== 'local' && kind !== 'shared') {
    problems.push(`disk=${value}: "${kind}" is neither local nor shared`);
    return null;
  }
  const [freeText, totalText] = size.includes('/') ? size.split('/', 2) : [size, size];
  const free = sizeOf(freeText!, `disk=${value}: free size`);
  const total = sizeOf(totalText!, `disk=${value}: size`);
  if (typeof free === 'string' || typeof total === 'string') {
    for (const p of [free, total]) if (typeof p === 'string') problems.push(p);
    return null;
  }
  if (free > total) {
    problems.push(`disk=${value}: free space is larger than the disk; write FREE/TOTAL, e.g. 1t/3.5t`);
    return null;
  }
  const trimmed = mountPoint.length > 1 ? mountPoint.replace(/\/+$/, '') : mountPoint;
  return { mountPoint: trimmed, freeBytes: free, totalBytes: total, shared: kind === 'shared' };
}

/**
 * Parses a --simulate spec. Throws a ValidationError
 * (LLMGW_SIMULATE_SPEC_INVALID) listing every bad part and showing the form.
 */
export function parseSimulateSpec(spec: string): SimulatedMachine {
  const problems: string[] = [];
  const seen = new Set<Key>();
  let gpuClasses: string[] = [];
  let badGpus: number[] = [];
  let ramBytes: number | undefined;
  let cpuCount: number | undefined;
  let disks: SimulatedDisk[] | undefined;
  const fabrics: FabricReport[] = [];
  let engines: string[] | undefined;

  const parts = spec
    .split(',')
    .map((p) => p.trim())
    .filter((p) => p !== '');
  if (parts.length === 0) problems.push('the spec is empty');
  for (const part of parts) {
    const eq = part.indexOf('=');
    const key = (eq === -1 ? part : part.slice(0, eq)).trim();
    const value = eq === -1 ? '' : part.slice(eq + 1).trim();
    if (!(KEYS as readonly string[]).includes(key)) {
      const near = nearestName(key, KEYS);
      problems.push(
        `"${part}": unknown part "${key}"${near ? `; did you mean "${near}"?` : `; the parts are ${KEYS.join(', ')}`}`,
      );
      continue;
    }
    const k = key as Key;
    if (value === '') {
      problems.push(`"${part}" has no value; write ${k}=…`);
      continue;
    }
    if (seen.has(k) && !REPEATABLE.has(k)) {
      problems.push(`"${part}": ${k} is given twice; give it once`);
      continue;
    }
    seen.add(k);
    switch (k) {
      case 'gpus':
        gpuClasses = parseGpus(value, problems);
        break;
      case 'bad':
        badGpus = value.split('+').map((v) => Number(v.trim()));
        if (badGpus.some((i) => !Number.isInteger(i) || i < 0))
          problems.push(`bad=${value}: want GPU indices such as 3 or 3+5`);
        break;
      case 'ram': {
        const bytes = sizeOf(value, 'ram');
        if (typeof bytes === 'string') problems.push(bytes);
        else ramBytes = bytes;
        break;
      }
      case 'cpus':
        cpuCount = Number(value);
        if (!Number.isInteger(cpuCount) || cpuCount < 1)
          problems.push(`cpus=${value}: want a whole number of CPUs, 1 or more`);
        break;
      case 'disk': {
        const disk = parseDisk(value, problems);
        if (disk && disks?.some((d) => d.mountPoint === disk.mountPoint)) {
          problems.push(`disk=${value}: ${disk.mountPoint} is declared twice; declare each disk once`);
        } else if (disk) (disks ??= []).push(disk);
        break;
      }
      case 'fabric': {
        const fabric = parseFabricFlag(value);
        if (typeof fabric === 'string') problems.push(`fabric=${value}: ${fabric.replace(/^--fabric "[^"]*": /, '')}`);
        else fabrics.push(fabric);
        break;
      }
      case 'engines':
        engines = value.split('+').map((e) => e.trim());
        for (const name of engines) {
          if ((ENGINE_NAMES as readonly string[]).includes(name)) continue;
          const near = nearestName(name, ENGINE_NAMES);
          problems.push(
            `engines=${value}: unknown engine "${name}"${near ? `; did you mean "${near}"?` : `; the engines are ${ENGINE_NAMES.join(', ')}`}`,
          );
        }
        break;
    }
  }
  for (const index of badGpus) {
    if (Number.isInteger(index) && index >= gpuClasses.length) {
      const declared =
        gpuClasses.length === 0 ? 'no GPUs are declared' : `the declared GPUs are 0 to ${gpuClasses.length - 1}`;
      problems.push(`bad=${index}: there is no GPU ${index}; ${declared}`);
    }
  }
  if (problems.length > 0) {
    throw new ValidationError(
      'LLMGW_SIMULATE_SPEC_INVALID',
      problems,
      `--simulate spec is not valid (the form is ${SIMULATE_SPEC_FORM})`,
    );
  }
  return Object.freeze({
    gpuClasses: Object.freeze(gpuClasses),
    badGpus: Object.freeze(badGpus),
    ...(ramBytes === undefined ? {} : { ramBytes }),
    ...(cpuCount === undefined ? {} : { cpuCount }),
    ...(disks === undefined ? {} : { disks: Object.freeze(disks) }),
    fabrics: Object.freeze(fabrics),
    ...(engines === undefined ? {} : { engines: Object.freeze([...new Set(engines)]) }),
  });
}

/** A stable GPU uuid in nvidia-smi's form, the same for the same seed and index on every start. */
export function simulatedGpuUuid(seed: string, index: number): string {
  const hex = createHash('sha256').update(`llmgw/simulated-gpu/v1\0${seed}\0${index}`).digest('hex');
  return `GPU-${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20, 32)}`;
}

/** Uncorrectable errors a `bad=` GPU reports: enough to make the same sentence a real one would. */
const BAD_GPU_ECC_ERRORS = 2;

/** The declared GPUs as nvidia-smi would report them: idle, healthy unless named in `bad=`. */
export function simulatedGpus(machine: SimulatedMachine, seed: string): GpuReport[] {
  return machine.gpuClasses.map((cls, index) => {
    const bad = machine.badGpus.includes(index);
    const ecc = bad ? BAD_GPU_ECC_ERRORS : 0;
    return {
      index,
      uuid: simulatedGpuUuid(seed, index),
      name: `simulated ${cls}`,
      class: cls,
      memory_total_mib: classMemoryMiB(cls) ?? 0,
      memory_used_mib: 0,
      ecc_uncorrected: ecc,
      retired_pages_pending: false,
      remapped_rows_pending: false,
      remapped_rows_failure: false,
      throttle_reasons: [],
      problems: gpuProblems({ index, eccUncorrectedVolatile: ecc }),
    };
  });
}

function under(mountPoint: string, path: string): boolean {
  return mountPoint === '/' || path === mountPoint || path.startsWith(`${mountPoint}/`);
}

/**
 * The declared disks, each holding the agent's directories that lie under
 * its mount point (the longest one wins, as with real mounts). A directory
 * under no declared disk is on none: the spec said what the disks are.
 */
export function simulatedDisks(disks: readonly SimulatedDisk[], dirs: readonly string[]): DiskReport[] {
  const reports: DiskReport[] = disks.map((d) => ({
    mount_point: d.mountPoint,
    source: 'simulated',
    shared: d.shared,
    free_bytes: d.freeBytes,
    total_bytes: d.totalBytes,
    paths: [],
  }));
  for (const dir of dirs) {
    let best: DiskReport | null = null;
    for (const report of reports) {
      if (under(report.mount_point, dir) && (best === null || report.mount_point.length >= best.mount_point.length))
        best = report;
    }
    if (best !== null && !best.paths.includes(dir)) best.paths.push(dir);
  }
  return reports;
}

/** The engines a simulated node reports: the declared ones plus those shipped inside llmgw. */
export function simulatedEngines(machine: SimulatedMachine): { name: string }[] {
  const names = new Set<string>([...(machine.engines ?? []), ...BUILTIN_ENGINES]);
  return [...names].map((name) => ({ name }));
}
