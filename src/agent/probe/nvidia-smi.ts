// What nvidia-smi says about a node's GPUs, turned into GPU reports: the
// query and its fallbacks for older drivers, the parse of its CSV and of the
// lines it prints instead when a GPU or the driver is in trouble, and the
// health sentences an operator acts on. Parsing is pure and tested on
// captured outputs; `probeGpus` is the thin edge that runs the program.
import type { GpuReport } from '../../protocol/index.js';
import { type ExecFn, findOnPath, type IsExecutableFn, isNotFound } from './exec.js';
import { gpuClass } from './gpu-class.js';
import { explainFromKernelLog, normaliseBusId, parseKernelLog } from './kernel-log.js';

/**
 * The fields asked for, in order. Every field after the first three is
 * optional: an older driver that does not know one makes nvidia-smi refuse
 * the whole query, so the probe drops it (or its whole family) and asks again.
 */
export const GPU_QUERY_FIELDS = [
  'index',
  'name',
  'memory.total',
  'uuid',
  'pci.bus_id',
  'memory.used',
  'temperature.gpu',
  'ecc.errors.uncorrected.volatile.total',
  'ecc.errors.uncorrected.aggregate.total',
  'retired_pages.pending',
  'remapped_rows.pending',
  'remapped_rows.failure',
  'mig.mode.current',
  'clocks_event_reasons.active',
] as const;

/** Without these there is no GPU to report: a driver that refuses them is reported as a probe failure. */
const REQUIRED_FIELDS: ReadonlySet<string> = new Set(['index', 'name', 'memory.total']);

/** Drivers before 535 call the event reasons throttle reasons; the bits are the same. */
const RENAMED_FIELDS: Readonly<Record<string, string>> = {
  'clocks_event_reasons.active': 'clocks_throttle_reasons.active',
};

/** nvidia-smi's arguments for a field list: no header and no units, so values are bare numbers. */
export function nvidiaSmiArgs(fields: readonly string[]): string[] {
  return [`--query-gpu=${fields.join(',')}`, '--format=csv,noheader,nounits'];
}

/**
 * The field list to try after nvidia-smi refused `invalid`: renamed if it has
 * an older name, else dropped with its family (a driver without
 * `remapped_rows.pending` has no `remapped_rows.failure` either). Null when
 * nothing sensible is left to try: a required field was refused, or the
 * refused field is not one we asked for.
 */
export function fallbackFields(fields: readonly string[], invalid: string): string[] | null {
  if (REQUIRED_FIELDS.has(invalid) || !fields.includes(invalid)) return null;
  const renamed = RENAMED_FIELDS[invalid];
  if (renamed !== undefined) return fields.map((f) => (f === invalid ? renamed : f));
  const family = invalid.slice(0, invalid.lastIndexOf('.') + 1);
  // A family is a dotted prefix shared with another field ("remapped_rows."); "index" has none.
  return fields.filter((f) => f !== invalid && (family === '' || !f.startsWith(family)));
}

/** A GPU nvidia-smi counts but cannot reach; its index is inferred (see parseNvidiaSmiOutput). */
export interface UnreachableGpu {
  index: number;
  /** "0000:02:00", as normaliseBusId writes it. */
  busId: string;
}

/** The outcome of one nvidia-smi run, read from its output alone. */
export type NvidiaSmiOutcome =
  /** At least one GPU row or one unreachable GPU: the node's GPUs, each with its problems. */
  | { kind: 'gpus'; gpus: GpuReport[]; unreachable: UnreachableGpu[] }
  /** nvidia-smi refused a field: ask again without it. */
  | { kind: 'invalid_field'; field: string }
  /** nvidia-smi could not report GPUs at all: the node's GPUs are unknown, and `reason` says why. */
  | { kind: 'failed'; reason: string };

const INVALID_FIELD_RE = /Field "([^"]+)" is not a valid field to query/;
/** "Unable to determine the device handle for GPU 0000:02:00.0: GPU is lost. …"; older drivers put a space after "GPU". */
const DEVICE_HANDLE_RE =
  /Unable to determine the device handle for GPU\s*([0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}(?:\.\d)?)\s*:\s*(.*)$/i;

/** Values nvidia-smi prints instead of a value: `[N/A]`, `[Not Supported]`, `[Unknown Error]`, `[Requested functionality has been deprecated]`. */
export function nvidiaSmiValue(raw: string | undefined): string | undefined {
  if (raw === undefined) return undefined;
  const value = raw.trim();
  if (value === '' || value === 'N/A' || (value.startsWith('[') && value.endsWith(']'))) return undefined;
  return value;
}

/** A number, ignoring a unit nvidia-smi may still append ("81559 MiB"); absent when not a number. */
function numberOf(raw: string | undefined): number | undefined {
  const value = nvidiaSmiValue(raw);
  if (value === undefined) return undefined;
  const match = /^(-?\d+(?:\.\d+)?)(?:\s*[A-Za-z%]+)?$/.exec(value);
  return match ? Number(match[1]) : undefined;
}

function countOf(raw: string | undefined): number | undefined {
  const n = numberOf(raw);
  return n !== undefined && Number.isInteger(n) && n >= 0 ? n : undefined;
}

/** "Yes"/"No" (and "Enabled"/"Disabled") as a boolean; absent for anything else. */
function yesNo(raw: string | undefined): boolean | undefined {
  const value = nvidiaSmiValue(raw)?.toLowerCase();
  if (value === 'yes' || value === 'enabled') return true;
  if (value === 'no' || value === 'disabled') return false;
  return undefined;
}

/** NVML's clock event (throttle) reason bits, in bit order. */
const THROTTLE_REASON_BITS = [
  'gpu_idle',
  'applications_clocks_setting',
  'sw_power_cap',
  'hw_slowdown',
  'sync_boost',
  'sw_thermal_slowdown',
  'hw_thermal_slowdown',
  'hw_power_brake_slowdown',
  'display_clock_setting',
] as const;

/** "0x0000000000000005" -> ['gpu_idle', 'sw_power_cap']; [] for none; absent when unreadable. */
export function throttleReasons(raw: string | undefined): string[] | undefined {
  const value = nvidiaSmiValue(raw);
  if (value === undefined || !/^0x[0-9a-f]+$/i.test(value)) return undefined;
  const mask = BigInt(value);
  const names: string[] = [];
  THROTTLE_REASON_BITS.forEach((name, bit) => {
    if (mask & (1n << BigInt(bit))) names.push(name);
  });
  return names;
}

/** The facts the health sentences are made from; absent = not reported, never "healthy". */
export interface GpuHealthFacts {
  index: number;
  /** Uncorrectable ECC errors since the driver loaded (volatile): the ones a reset clears. */
  eccUncorrectedVolatile?: number;
  retiredPagesPending?: boolean;
  remappedRowsPending?: boolean;
  remappedRowsFailure?: boolean;
  migEnabled?: boolean;
}

/**
 * What is wrong with a GPU, as sentences an operator acts on; [] = nothing
 * nvidia-smi shows. Lifetime (aggregate) ECC counts are reported but make no
 * sentence: a GPU that had an error long ago and repaired it by retiring the
 * page or remapping the row is healthy, and would otherwise be out of
 * placement for good.
 */
export function gpuProblems(facts: GpuHealthFacts): string[] {
  const problems: string[] = [];
  const ecc = facts.eccUncorrectedVolatile;
  if (ecc !== undefined && ecc > 0) {
    problems.push(
      `${ecc} uncorrectable ECC error${ecc === 1 ? '' : 's'} since the driver loaded; drain and reset the GPU`,
    );
  }
  if (facts.retiredPagesPending) problems.push('ECC page retirement is pending: reset the GPU to apply it');
  if (facts.remappedRowsPending) problems.push('a memory row remap is pending: reset the GPU to apply it');
  if (facts.remappedRowsFailure) {
    problems.push('row remapping failed, so the GPU can no longer repair its memory: replace the GPU');
  }
  if (facts.migEnabled) {
    problems.push(
      `MIG mode is on, and llmgw places whole GPUs only: turn it off (nvidia-smi -i ${facts.index} -mig 0) and reset the GPU`,
    );
  }
  return problems;
}

/** One complete CSV row as a GPU report. */
function gpuFromRow(values: ReadonlyMap<string, string>): GpuReport {
  const index = countOf(values.get('index'))!;
  const name = nvidiaSmiValue(values.get('name'));
  const memoryTotalMiB = numberOf(values.get('memory.total'));
  const throttle = throttleReasons(
    values.get('clocks_event_reasons.active') ?? values.get('clocks_throttle_reasons.active'),
  );
  const gpu: GpuReport = {
    index,
    uuid: nvidiaSmiValue(values.get('uuid')),
    name,
    class: gpuClass(name, memoryTotalMiB) ?? undefined,
    memory_total_mib: memoryTotalMiB,
    memory_used_mib: numberOf(values.get('memory.used')),
    temperature_c: numberOf(values.get('temperature.gpu')),
    ecc_uncorrected: countOf(values.get('ecc.errors.uncorrected.aggregate.total')),
    retired_pages_pending: yesNo(values.get('retired_pages.pending')),
    remapped_rows_pending: yesNo(values.get('remapped_rows.pending')),
    remapped_rows_failure: yesNo(values.get('remapped_rows.failure')),
    throttle_reasons: throttle,
    problems: gpuProblems({
      index,
      eccUncorrectedVolatile: countOf(values.get('ecc.errors.uncorrected.volatile.total')),
      retiredPagesPending: yesNo(values.get('retired_pages.pending')),
      remappedRowsPending: yesNo(values.get('remapped_rows.pending')),
      remappedRowsFailure: yesNo(values.get('remapped_rows.failure')),
      migEnabled: yesNo(values.get('mig.mode.current')),
    }),
  };
  return dropAbsent(gpu);
}

/** Absent fields are left out rather than set to undefined, so reports compare and serialise cleanly. */
function dropAbsent(gpu: GpuReport): GpuReport {
  return Object.fromEntries(Object.entries(gpu).filter(([, v]) => v !== undefined)) as GpuReport;
}

function unreachableSentence(busId: string, detail: string): string {
  const quoted = JSON.stringify(detail.trim());
  return /GPU is lost/i.test(detail)
    ? `GPU ${busId} is lost (nvidia-smi: ${quoted}): reboot the machine to recover it, and replace the GPU if it is lost again`
    : `nvidia-smi cannot reach GPU ${busId} (${quoted}): look for Xid errors in the kernel log, then reset the GPU or reboot`;
}

/**
 * Reads one run's output against the fields asked for. Rows and the lines
 * nvidia-smi prints for GPUs it cannot reach may come on either stream and
 * with any exit code (a node with one lost GPU still lists the others), so
 * the text decides, not the exit code.
 */
export function parseNvidiaSmiOutput(
  stdout: string,
  stderr: string,
  fields: readonly string[],
  exitCode: number | null,
): NvidiaSmiOutcome {
  const lines = `${stdout}\n${stderr}`
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '');
  for (const line of lines) {
    const invalid = INVALID_FIELD_RE.exec(line);
    if (invalid) return { kind: 'invalid_field', field: invalid[1]! };
  }

  const gpus: GpuReport[] = [];
  const unreachable: { busId: string; detail: string }[] = [];
  const other: string[] = [];
  for (const line of lines) {
    const handle = DEVICE_HANDLE_RE.exec(line);
    if (handle) {
      unreachable.push({ busId: normaliseBusId(handle[1]!)!, detail: handle[2]! });
      continue;
    }
    const values = line.split(',').map((v) => v.trim());
    const index = countOf(values[0]);
    if (index === undefined) {
      other.push(line);
      continue;
    }
    if (values.length === fields.length) {
      gpus.push(gpuFromRow(new Map(fields.map((f, i) => [f, values[i]!]))));
      continue;
    }
    // A cut or misaligned row: keep the GPU (its index is sure) but not its
    // values, whose positions are not, and keep it out of placement.
    gpus.push({
      index,
      problems: [
        `nvidia-smi printed ${values.length} of ${fields.length} fields for GPU ${index}, so its health is unknown: run "nvidia-smi -q -i ${index}" on the node to see why`,
      ],
    });
  }

  if (gpus.length === 0 && unreachable.length === 0)
    return { kind: 'failed', reason: failureSentence(other, exitCode) };

  // nvidia-smi numbers GPUs in PCI order and still counts one it cannot
  // reach, so the unreachable GPUs hold the indices missing from the rows,
  // in the order of their PCI addresses.
  const taken = new Set(gpus.map((g) => g.index));
  const free: number[] = [];
  for (let i = 0; free.length < unreachable.length; i++) if (!taken.has(i)) free.push(i);
  const placed = [...unreachable]
    .sort((a, b) => a.busId.localeCompare(b.busId))
    .map((u, i) => ({ index: free[i]!, busId: u.busId, detail: u.detail }));
  for (const u of placed) gpus.push({ index: u.index, problems: [unreachableSentence(u.busId, u.detail)] });
  gpus.sort((a, b) => a.index - b.index);
  return { kind: 'gpus', gpus, unreachable: placed.map(({ index, busId }) => ({ index, busId })) };
}

/** Why nvidia-smi printed no GPUs, as a sentence ending in what the operator should do. */
function failureSentence(lines: readonly string[], exitCode: number | null): string {
  const text = lines.join(' ');
  const unknown = "until then this node's GPUs are unknown";
  if (/couldn't communicate with the NVIDIA driver/i.test(text)) {
    return `nvidia-smi cannot talk to the NVIDIA driver: check that the driver is loaded (lsmod | grep nvidia) and matches nvidia-smi's version; ${unknown}`;
  }
  if (/Driver\/library version mismatch/i.test(text)) {
    return `the NVIDIA driver and its library differ in version (an upgrade without a reboot?): reboot the node or reload the nvidia modules; ${unknown}`;
  }
  if (/No devices were found/i.test(text)) {
    return `nvidia-smi found no GPUs although the NVIDIA driver is installed: check that the GPUs are visible (lspci | grep -i nvidia) and look for NVRM errors in the kernel log; ${unknown}`;
  }
  const first = lines[0];
  if (first === undefined) {
    return `nvidia-smi printed nothing (exit ${exitCode ?? 'by signal'}): run it by hand on the node to see why; ${unknown}`;
  }
  return `nvidia-smi failed (exit ${exitCode ?? 'by signal'}): ${JSON.stringify(first)}; ${unknown}`;
}

export interface GpuProbeOptions {
  /** Where to look for nvidia-smi (colon-separated). */
  pathEnv: string;
  /** How long one nvidia-smi run may take, in milliseconds. */
  timeoutMs: number;
  /** The field list to start from; absent = GPU_QUERY_FIELDS. A prober passes the list that worked last time. */
  fields?: readonly string[];
}

export interface GpuProbeDeps {
  exec: ExecFn;
  isExecutable: IsExecutableFn;
  /** The kernel log's text, read only to explain a failure; null when it cannot be read. */
  readKernelLog: () => Promise<string | null>;
}

export interface GpuProbeResult {
  /** Absent when the GPUs are unknown; [] on a node without nvidia-smi (a CPU node). */
  gpus?: GpuReport[];
  /** Why the GPUs are unknown; set exactly when `gpus` is absent. */
  error?: string;
  /** The field list nvidia-smi accepted, to start from next time; absent when none was. */
  fields?: readonly string[];
}

/**
 * Runs nvidia-smi and reports the node's GPUs. Never throws: a failure is an
 * `error` sentence with `gpus` absent. A node without nvidia-smi on its PATH
 * is a CPU node, not a failure.
 */
export async function probeGpus(options: GpuProbeOptions, deps: GpuProbeDeps): Promise<GpuProbeResult> {
  const nvidiaSmi = await findOnPath('nvidia-smi', options.pathEnv, deps.isExecutable);
  if (nvidiaSmi === null) return { gpus: [] };

  let fields: readonly string[] = options.fields ?? GPU_QUERY_FIELDS;
  // Each retry drops at least one field, so this ends; the bound is a guard.
  for (let attempt = 0; attempt <= GPU_QUERY_FIELDS.length; attempt++) {
    let run;
    try {
      run = await deps.exec(nvidiaSmi, nvidiaSmiArgs(fields), { timeoutMs: options.timeoutMs });
    } catch (err) {
      if (isNotFound(err)) return { gpus: [] };
      return { error: `nvidia-smi at ${nvidiaSmi} could not be started: ${(err as Error).message}` };
    }
    if (run.timedOut) {
      const sentence = `nvidia-smi did not answer within ${Math.round(options.timeoutMs / 1000)} s, so a GPU or the driver may be hung: look for Xid 79 or 119 in the kernel log; until it answers this node's GPUs are unknown`;
      return { error: await withKernelExplanation(sentence, null, deps) };
    }
    const outcome = parseNvidiaSmiOutput(run.stdout, run.stderr, fields, run.exitCode);
    if (outcome.kind === 'invalid_field') {
      const next = fallbackFields(fields, outcome.field);
      if (next === null) {
        return {
          error: `nvidia-smi refused the field "${outcome.field}", which llmgw needs: update the NVIDIA driver; until then this node's GPUs are unknown`,
        };
      }
      fields = next;
      continue;
    }
    if (outcome.kind === 'failed') return { error: await withKernelExplanation(outcome.reason, null, deps), fields };
    return { gpus: await explainUnreachable(outcome.gpus, outcome.unreachable, deps), fields };
  }
  return { error: 'nvidia-smi refused every field list llmgw tried: update the NVIDIA driver' };
}

async function withKernelExplanation(sentence: string, busId: string | null, deps: GpuProbeDeps): Promise<string> {
  const log = await deps.readKernelLog().catch(() => null);
  const clause = log === null ? null : explainFromKernelLog(parseKernelLog(log), busId);
  return clause === null ? sentence : `${sentence} (${clause})`;
}

/** Adds what the kernel log says about each unreachable GPU to its sentence; reads the log only when there is one. */
async function explainUnreachable(
  gpus: GpuReport[],
  unreachable: readonly UnreachableGpu[],
  deps: GpuProbeDeps,
): Promise<GpuReport[]> {
  if (unreachable.length === 0) return gpus;
  const log = await deps.readKernelLog().catch(() => null);
  if (log === null) return gpus;
  const events = parseKernelLog(log);
  return gpus.map((gpu) => {
    const busId = unreachable.find((u) => u.index === gpu.index)?.busId;
    const clause = busId === undefined ? null : explainFromKernelLog(events, busId);
    return clause === null ? gpu : { ...gpu, problems: gpu.problems.map((p) => `${p} (${clause})`) };
  });
}
