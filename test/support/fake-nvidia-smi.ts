// A stand-in `nvidia-smi` for tests: an executable that prints a captured
// output and exits with a chosen code, to be put first on an agent's PATH so
// that tests exercise the real probe on machines without GPUs. Only tests
// use it, so it lives here and no production index exports it; the
// simulated agent (--simulate) declares its GPUs instead of faking the tool.
import { chmod, mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { GPU_QUERY_FIELDS } from '../../src/agent/probe/nvidia-smi.js';

export interface FakeNvidiaSmiOptions {
  /** Printed on stdout, byte for byte. Absent: nothing. */
  stdout?: string;
  /** Printed on stderr, byte for byte. Absent: nothing. */
  stderr?: string;
  /** Absent: 0. */
  exitCode?: number;
  /**
   * Fields this "driver" does not know: a query naming one is refused the
   * way a real old driver refuses it, so tests can drive the probe's
   * fallback. Absent: every field is known.
   */
  unknownFields?: readonly string[];
}

export interface FakeNvidiaSmi {
  /** The directory to put first on PATH. */
  dir: string;
  /** The executable's path. */
  path: string;
  /** A file to which each run appends its arguments, one run per line. */
  argsLog: string;
}

/** Single-quotes a string for sh: the only character that needs care inside single quotes is the quote itself. */
function shQuote(text: string): string {
  return `'${text.replace(/'/g, `'\\''`)}'`;
}

/**
 * Writes `<dir>/nvidia-smi`, a /bin/sh script, with its output in files
 * beside it (so any bytes, newlines included, come out unchanged). Creates
 * `dir` when missing.
 */
export async function writeFakeNvidiaSmi(dir: string, options: FakeNvidiaSmiOptions = {}): Promise<FakeNvidiaSmi> {
  await mkdir(dir, { recursive: true });
  const stdoutFile = join(dir, 'nvidia-smi.stdout');
  const stderrFile = join(dir, 'nvidia-smi.stderr');
  const argsLog = join(dir, 'nvidia-smi.args');
  await writeFile(stdoutFile, options.stdout ?? '');
  await writeFile(stderrFile, options.stderr ?? '');
  const refusals = (options.unknownFields ?? []).map(
    // A real driver names the first field it does not know; the case pattern matches it anywhere in the query.
    (field) =>
      `  *--query-gpu=*${field}*) echo ${shQuote(`Field "${field}" is not a valid field to query.`)}; exit 2 ;;`,
  );
  const script = [
    '#!/bin/sh',
    '# Stand-in nvidia-smi written by llmgw tests (src/agent/probe/fake-nvidia-smi.ts).',
    `printf '%s\\n' "$*" >> ${shQuote(argsLog)}`,
    ...(refusals.length > 0 ? ['case "$*" in', ...refusals, 'esac'] : []),
    `cat ${shQuote(stdoutFile)}`,
    `cat ${shQuote(stderrFile)} >&2`,
    `exit ${options.exitCode ?? 0}`,
    '',
  ].join('\n');
  const path = join(dir, 'nvidia-smi');
  await writeFile(path, script);
  await chmod(path, 0o755);
  return { dir, path, argsLog };
}

/**
 * CSV rows in the probe's own query format (noheader, nounits, fields in
 * GPU_QUERY_FIELDS order), for tests that want a machine of their own
 * making: each row gives the fields it cares about, the rest print `[N/A]`.
 */
export function queryGpuCsv(
  rows: ReadonlyArray<Readonly<Partial<Record<(typeof GPU_QUERY_FIELDS)[number], string | number>>>>,
): string {
  return rows.map((row) => GPU_QUERY_FIELDS.map((f) => String(row[f] ?? '[N/A]')).join(', ')).join('\n') + '\n';
}
