// One report of everything an agent says about its machine: the entry point
// that runs each probe (GPUs, RAM and CPUs, disks, weights, fabrics,
// engines), or the declared machine of --simulate in place of the hardware
// ones, and puts the answers into a NodeReport. A probe that fails leaves its
// field out (unknown) and never fails the others: a node whose nvidia-smi
// hangs still reports its disks and weights.
import type { Dirent, Stats } from 'node:fs';
import { open, readdir, readFile, lstat, realpath, statfs } from 'node:fs/promises';
import { availableParallelism, hostname } from 'node:os';
import { isAbsolute, join } from 'node:path';
import { z } from 'zod';
import { ValidationError } from '../../errors/index.js';
import { type FabricReport, type NodeReport, octalEscapeControls } from '../../protocol/index.js';
import { parseOptions } from '../../validation/options.js';
import { probeDisks, type StatfsResult } from './disks.js';
import { probeEngines } from './engines.js';
import { type ExecFn, execProcess, findOnPath, type IsExecutableFn, isExecutableFile } from './exec.js';
import { parseFabricFlag, probeInfiniband } from './fabrics.js';
import { parseMeminfo } from './meminfo.js';
import { probeGpus } from './nvidia-smi.js';
import {
  parseSimulateSpec,
  type SimulatedMachine,
  simulatedDisks,
  simulatedEngines,
  simulatedGpus,
} from './simulate.js';
import { listWeights } from './weights.js';

/** The options as the agent writes them. Only `cacheDir` is required. */
export interface ProbeOptions {
  /** The agent's weight cache directory (absolute). Its filesystem and entries are reported; it need not exist yet. */
  cacheDir: string;
  /** The operator's model directories (absolute), used in place and never deleted. Absent: none. */
  modelDirs?: readonly string[];
  /** `--fabric` values, "name=address" or "name". Absent: none configured. */
  fabrics?: readonly string[];
  /** `--simulate` spec (see simulate.ts); absent: probe the real hardware. */
  simulate?: string;
  /** Seed for simulated GPU uuids, so they are stable across restarts; use the node id. Absent: the hostname. */
  simulateSeed?: string;
  /** PATH searched for nvidia-smi, dmesg and engines. Absent: the agent's own PATH. */
  pathEnv?: string;
  /** Where procfs is mounted (meminfo, self/mountinfo are read under it). Absent: /proc. */
  procRoot?: string;
  /** Where the kernel lists RDMA devices. Absent: /sys/class/infiniband. */
  infinibandRoot?: string;
  /** How long one nvidia-smi run may take, in ms. Absent: 15000 (a busy 8-GPU node answers in a few seconds). */
  nvidiaSmiTimeoutMs?: number;
  /** How long reading one engine's version may take, in ms. Absent: 5000. */
  engineVersionTimeoutMs?: number;
}

const ProbeOptionsSchema = z.strictObject({
  cacheDir: z.string().refine(isAbsolute, 'want an absolute path, e.g. /var/lib/llmgw/cache'),
  modelDirs: z.array(z.string().refine(isAbsolute, 'want an absolute path, e.g. /models')).default([]),
  fabrics: z.array(z.string()).default([]),
  simulate: z.string().optional(),
  simulateSeed: z.string().min(1).optional(),
  pathEnv: z.string().optional(),
  procRoot: z.string().refine(isAbsolute, 'want an absolute path').default('/proc'),
  infinibandRoot: z.string().refine(isAbsolute, 'want an absolute path').default('/sys/class/infiniband'),
  nvidiaSmiTimeoutMs: z.number().int().min(1).default(15_000),
  engineVersionTimeoutMs: z.number().int().min(1).default(5_000),
});

/** The compiled options: validated, defaulted, with the fabric flags and simulate spec parsed. */
export interface ProbeConfig {
  readonly cacheDir: string;
  readonly modelDirs: readonly string[];
  readonly fabrics: readonly FabricReport[];
  /** Null: real hardware. */
  readonly simulated: SimulatedMachine | null;
  /** Null: the hostname at probe time. */
  readonly simulateSeed: string | null;
  /** Null: the agent's PATH at probe time. */
  readonly pathEnv: string | null;
  readonly procRoot: string;
  readonly infinibandRoot: string;
  readonly nvidiaSmiTimeoutMs: number;
  readonly engineVersionTimeoutMs: number;
}

/**
 * Validates and fills defaults. Throws ValidationError: LLMGW_CONFIG_INVALID
 * listing every bad option or --fabric flag, or LLMGW_SIMULATE_SPEC_INVALID
 * for a malformed spec. Checked once at agent start, so a typo stops the
 * agent instead of producing a wrong report on every heartbeat.
 */
export function compileProbeOptions(options: ProbeOptions): ProbeConfig {
  const o = parseOptions(ProbeOptionsSchema, options, 'the probe options are not valid');
  const problems: string[] = [];
  const fabrics: FabricReport[] = [];
  for (const raw of o.fabrics) {
    const fabric = parseFabricFlag(raw);
    if (typeof fabric === 'string') problems.push(fabric);
    else if (fabrics.some((f) => f.name === fabric.name))
      problems.push(`--fabric ${fabric.name} is given twice; give each fabric once`);
    else fabrics.push(fabric);
  }
  if (problems.length > 0)
    throw new ValidationError('LLMGW_CONFIG_INVALID', problems, 'the --fabric flags are not valid');
  return Object.freeze({
    cacheDir: o.cacheDir,
    modelDirs: Object.freeze([...o.modelDirs]),
    fabrics: Object.freeze(fabrics),
    simulated: o.simulate === undefined ? null : parseSimulateSpec(o.simulate),
    simulateSeed: o.simulateSeed ?? null,
    pathEnv: o.pathEnv ?? null,
    procRoot: o.procRoot,
    infinibandRoot: o.infinibandRoot,
    nvidiaSmiTimeoutMs: o.nvidiaSmiTimeoutMs,
    engineVersionTimeoutMs: o.engineVersionTimeoutMs,
  });
}

/** Everything the probe touches outside itself; tests replace any of it. */
export interface ProbeDeps {
  exec: ExecFn;
  isExecutable: IsExecutableFn;
  readFile: (path: string) => Promise<string>;
  /** The first `bytes` bytes of a file, as text. */
  readHead: (path: string, bytes: number) => Promise<string>;
  /** Entries of a directory, with their types (not following links). */
  readdir: (path: string) => Promise<Dirent[]>;
  lstat: (path: string) => Promise<Stats>;
  realpath: (path: string) => Promise<string>;
  statfs: (path: string) => Promise<StatfsResult>;
  hostname: () => string;
  cpuCount: () => number;
  /** The agent's PATH when `pathEnv` is not given. */
  env: () => NodeJS.ProcessEnv;
  /**
   * The kernel log's text, read only to explain a GPU failure; null when it
   * cannot be read (dmesg restricted to root is common). Absent: runs
   * `dmesg` from the PATH.
   */
  readKernelLog?: () => Promise<string | null>;
  /** The file:// weights this node's engines use in place now (path and source as written); absent = none. */
  inPlace?: () => readonly { readonly path: string; readonly source: string }[];
  /** Told each problem that has no field of its own in the report (an unreadable model directory). Absent: dropped. */
  warn?: (message: string) => void;
}

async function readFileHead(path: string, bytes: number): Promise<string> {
  const handle = await open(path, 'r');
  try {
    const buffer = Buffer.alloc(bytes);
    const { bytesRead } = await handle.read(buffer, 0, bytes, 0);
    return buffer.subarray(0, bytesRead).toString('utf8');
  } finally {
    await handle.close();
  }
}

/** The real machine. */
export function defaultProbeDeps(): ProbeDeps {
  return {
    exec: execProcess,
    isExecutable: isExecutableFile,
    readFile: (path) => readFile(path, 'utf8'),
    readHead: readFileHead,
    readdir: (path) => readdir(path, { withFileTypes: true }),
    lstat: (path) => lstat(path),
    realpath: (path) => realpath(path),
    statfs: (path) => statfs(path),
    hostname,
    cpuCount: availableParallelism,
    env: () => process.env,
  };
}

/** dmesg can print megabytes on a long-running node; a few seconds is plenty to read it. */
const KERNEL_LOG_TIMEOUT_MS = 5_000;

/**
 * Probes one machine, again and again (once per heartbeat). Keeps what it
 * learned between probes: the nvidia-smi field list the driver accepted, so
 * an old driver costs its fallback retries once, not on every heartbeat.
 */
export class NodeProber {
  readonly config: ProbeConfig;
  readonly #deps: ProbeDeps;
  #gpuFields: readonly string[] | undefined;

  /** Throws as compileProbeOptions does. `deps` replaces parts of the real machine. */
  constructor(options: ProbeOptions, deps: Partial<ProbeDeps> = {}) {
    this.config = compileProbeOptions(options);
    this.#deps = { ...defaultProbeDeps(), ...deps };
  }

  /** A full report. Never throws: each failing probe leaves its field out and tells `warn`. */
  async probe(): Promise<NodeReport> {
    const c = this.config;
    const d = this.#deps;
    const pathEnv = c.pathEnv ?? d.env().PATH ?? '';
    const sim = c.simulated;
    const dirs = [c.cacheDir, ...c.modelDirs];
    const warn = (message: string) => d.warn?.(message);
    const attempt = async <T>(what: string, run: () => Promise<T>): Promise<T | undefined> => {
      try {
        return await run();
      } catch (err) {
        warn(`probing ${what} failed: ${(err as Error).message}`);
        return undefined;
      }
    };
    const readKernelLog = d.readKernelLog ?? (() => runDmesg(pathEnv, d));

    const [host, memory, gpus, disks, weights, fabrics, engines] = await Promise.all([
      attempt('the hostname and CPUs', () =>
        Promise.resolve({ hostname: d.hostname(), cpuCount: sim?.cpuCount ?? d.cpuCount() }),
      ),
      attempt('RAM', async () =>
        sim?.ramBytes !== undefined
          ? { totalBytes: sim.ramBytes, availableBytes: sim.ramBytes }
          : parseMeminfo(await d.readFile(join(c.procRoot, 'meminfo'))),
      ),
      attempt('GPUs', async () => {
        if (sim) return { gpus: simulatedGpus(sim, c.simulateSeed ?? d.hostname()) };
        const result = await probeGpus(
          { pathEnv, timeoutMs: c.nvidiaSmiTimeoutMs, ...(this.#gpuFields ? { fields: this.#gpuFields } : {}) },
          { exec: d.exec, isExecutable: d.isExecutable, readKernelLog },
        );
        if (result.fields) this.#gpuFields = result.fields;
        return result;
      }),
      attempt('disks', async () => {
        if (sim?.disks) return simulatedDisks(sim.disks, dirs);
        const result = await probeDisks(dirs, join(c.procRoot, 'self', 'mountinfo'), d);
        result.problems.forEach(warn);
        return result.disks;
      }),
      attempt('weights on disk', async () => {
        const result = await listWeights(c.cacheDir, c.modelDirs, d, d.inPlace?.() ?? []);
        result.problems.forEach(warn);
        return result.weights;
      }),
      attempt('fabrics', async () => {
        const found = sim ? [...sim.fabrics] : await probeInfiniband(c.infinibandRoot, d);
        // A configured fabric carries the address peers use, so it wins over a declared one of the same name.
        const fabrics: FabricReport[] = [...c.fabrics];
        for (const f of found) if (!fabrics.some((g) => g.name === f.name)) fabrics.push(f);
        return fabrics;
      }),
      attempt('engines', () =>
        sim ? Promise.resolve(simulatedEngines(sim)) : probeEngines(pathEnv, c.engineVersionTimeoutMs, d),
      ),
    ]);

    const report: NodeReport = { cache_dir: c.cacheDir, model_dirs: [...c.modelDirs] };
    if (host) {
      // The kernel takes any bytes as a hostname; the control plane refuses control characters in one.
      report.hostname = octalEscapeControls(host.hostname);
      report.cpu_count = host.cpuCount;
    }
    if (memory?.totalBytes !== undefined) report.memory_total_bytes = memory.totalBytes;
    if (memory?.availableBytes !== undefined) report.memory_available_bytes = memory.availableBytes;
    if (gpus?.gpus) report.gpus = gpus.gpus;
    if (gpus && 'error' in gpus && gpus.error !== undefined) report.gpu_probe_error = gpus.error;
    if (disks) report.disks = disks;
    if (weights) report.weights = weights;
    if (fabrics) report.fabrics = fabrics;
    if (engines) report.engines = engines;
    if (sim) report.simulated = true;
    return report;
  }
}

/** One report of this machine: `new NodeProber(options, deps).probe()`. Throws only for invalid options. */
export function probeNode(options: ProbeOptions, deps: Partial<ProbeDeps> = {}): Promise<NodeReport> {
  return new NodeProber(options, deps).probe();
}

/** The kernel log through `dmesg`; null when it is missing, restricted (dmesg_restrict) or slow. */
async function runDmesg(pathEnv: string, deps: Pick<ProbeDeps, 'exec' | 'isExecutable'>): Promise<string | null> {
  const dmesg = await findOnPath('dmesg', pathEnv, deps.isExecutable);
  if (dmesg === null) return null;
  try {
    const result = await deps.exec(dmesg, [], { timeoutMs: KERNEL_LOG_TIMEOUT_MS });
    return result.exitCode === 0 ? result.stdout : null;
  } catch {
    return null;
  }
}
