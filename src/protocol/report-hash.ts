// The report hash: what lets a heartbeat leave the node's report out. The
// agent hashes the parts of its report that the control plane decides on and
// sends the full report only when the hash changes (or when asked); every
// other heartbeat carries the hash alone, and a control plane that holds a
// report under that hash skips parsing, validating and storing it again. It
// lives in protocol because it defines what "the report changed" means on the
// wire; only the agent computes it, the control plane compares it as an
// opaque string, so a later agent may hash differently without breaking it.
import { createHash } from 'node:crypto';
import type { NodeReport } from './node-report.js';

const GiB = 2 ** 30;
const MINUTE_MS = 60_000;

/**
 * A stable hash (32 hex digits) of what the control plane decides on in a
 * report. Readings that move on an idle machine are left out or counted in
 * the unit decisions use, so an idle node keeps one hash: GPU temperature is
 * left out, free memory, free disk and GPU memory in use count in whole GiB,
 * and a weight's last use in whole minutes. Key order does not matter.
 */
export function reportHash(report: NodeReport): string {
  return createHash('sha256')
    .update(canonicalJson(hashedView(report)))
    .digest('hex')
    .slice(0, 32);
}

/** The report as the hash sees it: the readings that move while idle are rounded or left out. */
export function hashedView(report: NodeReport): unknown {
  return {
    ...report,
    memory_available_bytes: floorTo(report.memory_available_bytes, GiB),
    gpus: report.gpus?.map(({ temperature_c: _temperature, ...g }) => ({
      ...g,
      memory_used_mib: floorTo(g.memory_used_mib, 1024),
    })),
    disks: report.disks?.map((d) => ({ ...d, free_bytes: floorTo(d.free_bytes, GiB) })),
    weights: report.weights?.map((w) => ({ ...w, last_used_ms: floorTo(w.last_used_ms, MINUTE_MS) })),
  };
}

/** Rounds down to a whole number of `unit`; absent stays absent (unknown, not zero). */
function floorTo(value: number | undefined, unit: number): number | undefined {
  return value === undefined ? undefined : Math.floor(value / unit);
}

/**
 * JSON with object keys sorted at every depth and undefined members left
 * out, so that two reports with the same content give the same text
 * whatever order the probe built them in. Array order is kept: GPUs and
 * disks are listed in a stable order by the probe.
 */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) return `[${value.map((v) => (v === undefined ? 'null' : canonicalJson(v))).join(',')}]`;
  const entries = Object.entries(value as Record<string, unknown>)
    .filter(([, v]) => v !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
}
