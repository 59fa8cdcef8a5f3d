// The keys of batches (docs/batches.md): where uploaded files live, how big
// one may be, how many lines a batch input may hold, how long a runner's
// claim on a line lasts before another instance may take it over, and the
// shortest completion window a batch may ask for. Apart from index.ts so
// the feature's keys read together; index.ts spreads them into the one
// schema and compiles them with compileBatches.
import { constants } from 'node:buffer';
import { dirname, join, resolve } from 'node:path';
import { z } from 'zod';
import { parseDurationMs, parseSizeBytes } from '../../units/index.js';
import { durationSchema } from '../../validation/durations.js';

/** Defaults of the batch keys, as an operator would write them. */
export const BATCH_DEFAULTS = Object.freeze({
  /** OpenAI's own cap on a batch input file. */
  files_max_size: '200m',
  /** OpenAI's own cap on a batch's requests. */
  batch_max_lines: 50_000,
  /** A runner that stops renewing its claim on a line (killed) lets another take it over after this. */
  batch_lease: '60s',
  /** OpenAI accepts 24h only; a shorter minimum is for tests and trials. */
  batch_min_completion_window: '24h',
  /** Half a model's places (at least one) kept free of batch lines for interactive arrivals (pace.ts). */
  batch_headroom: 0.5,
});

/**
 * The largest files_max_size. A batch input is read as one string, to check
 * its lines at upload and by the runner, and V8's strings end at
 * MAX_STRING_LENGTH characters (512 MiB less 24 bytes on 64-bit Node); a
 * byte of UTF-8 is at most one character. Past it a larger upload was taken
 * and then answered 500.
 */
export const MAX_FILE_BYTES = constants.MAX_STRING_LENGTH;

export const BATCH_OPTIONS = {
  /**
   * Where uploaded files and batch outputs are kept. Absent = `files` beside
   * a SQLite store's database file; on Postgres it must be set (to a
   * directory every control plane sees, so another can take a batch over).
   */
  files_dir: z.string().min(1).optional(),
  /** The largest file /v1/files takes (413 past it); at most MAX_FILE_BYTES. */
  files_max_size: z
    .string()
    .refine((v) => ((n) => typeof n === 'number' && n > 0 && n <= MAX_FILE_BYTES)(parseSizeBytes(v)), {
      message: `want a size above 0 and at most ${Math.floor(MAX_FILE_BYTES / 2 ** 20)}m, like 200m (a batch input is read as one string, and Node's strings end at 512 MiB)`,
    })
    .default(BATCH_DEFAULTS.files_max_size),
  /** The most lines one batch input file may hold (413 past it). */
  batch_max_lines: z
    .union([z.number().int().min(1).max(1e9), z.string().regex(/^[1-9]\d{0,8}$/, 'want a whole number, 1 or more')])
    .default(BATCH_DEFAULTS.batch_max_lines),
  /** A timer renews the leases every third of it. */
  batch_lease: durationSchema({ like: '30s or 5m', aboveZero: true }).default(BATCH_DEFAULTS.batch_lease),
  /** Compared with a batch's age, never a timer. */
  batch_min_completion_window: durationSchema({ like: '1h or 24h', aboveZero: true, maxMs: Infinity }).default(
    BATCH_DEFAULTS.batch_min_completion_window,
  ),
  /** Share of a model's places batch lines leave free for interactive arrivals, 0..1; 0 = only the one place. */
  batch_headroom: z.coerce.number().min(0).max(1).default(BATCH_DEFAULTS.batch_headroom),
};

/** Batches' settings, compiled. */
export interface BatchSettings {
  /** Null = none could be chosen (a Postgres or no store without files_dir): the Files and Batch APIs say so. */
  readonly filesDir: string | null;
  readonly fileMaxBytes: number;
  readonly maxLines: number;
  readonly leaseMs: number;
  readonly minWindowMs: number;
  /** Share of a model's places kept free of batch lines (pace.ts's headroomFraction). */
  readonly headroomFraction: number;
}

interface BatchInput {
  files_dir?: string | undefined;
  files_max_size: string;
  batch_max_lines: number | string;
  batch_lease: string;
  batch_min_completion_window: string;
  batch_headroom: number;
}

/** The keys, already checked by the schema; `sqlitePath` is the store's file, when it is SQLite. */
export function compileBatches(o: BatchInput, sqlitePath: string | null): BatchSettings {
  const filesDir = o.files_dir
    ? resolve(o.files_dir)
    : sqlitePath !== null && sqlitePath !== ':memory:'
      ? join(dirname(resolve(sqlitePath)), 'files')
      : null;
  return Object.freeze({
    filesDir,
    fileMaxBytes: parseSizeBytes(o.files_max_size) as number,
    maxLines: Number(o.batch_max_lines),
    leaseMs: parseDurationMs(o.batch_lease) as number,
    minWindowMs: parseDurationMs(o.batch_min_completion_window) as number,
    headroomFraction: o.batch_headroom,
  });
}
