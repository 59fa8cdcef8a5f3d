// How ctl prints: tables that fit the terminal, colour for states only when
// stdout is a terminal, and one spelling for "not known" ("-"), so that an
// unreported value never reads as zero. Kept apart from the commands so every
// command prints the same way and the rules are tested once.
import Table from 'cli-table3';
import picocolors from 'picocolors';
import { formatBytes } from '../units/index.js';

type Colors = ReturnType<typeof picocolors.createColors>;

export const UNKNOWN = '-';

export interface OutputOptions {
  /** stdout is a terminal: decoration (clearing the screen for --watch) is allowed. */
  tty: boolean;
  /** Colour for states; absent = tty. Never true for pipes and files. */
  color?: boolean;
  /** Columns to fit tables into, read at each table (a terminal resized under --watch); absent or undefined = no limit (a pipe: let the reader's tools wrap). */
  width?: number | (() => number | undefined);
}

export class Output {
  readonly tty: boolean;
  readonly #width: () => number | undefined;
  readonly c: Colors;
  readonly #write: (s: string) => void;

  constructor(write: (s: string) => void, options: OutputOptions) {
    this.#write = write;
    this.tty = options.tty;
    const w = options.width;
    this.#width = typeof w === 'function' ? w : () => w;
    this.c = picocolors.createColors(options.tty && (options.color ?? true));
  }

  line(s = ''): void {
    this.#write(`${s}\n`);
  }

  raw(s: string): void {
    this.#write(s);
  }

  json(value: unknown): void {
    this.#write(`${JSON.stringify(value, null, 2)}\n`);
  }

  /** A state word in its colour: green is fine, yellow is on its way or held back, red needs a person. */
  state(s: string | undefined): string {
    if (!s) return UNKNOWN;
    if (GOOD.has(s)) return this.c.green(s);
    if (BAD.has(s)) return this.c.red(s);
    if (PASSING.has(s)) return this.c.yellow(s);
    if (s === 'stopped') return this.c.dim(s);
    return s;
  }

  heading(s: string): string {
    return this.c.bold(s);
  }

  /** A table whose columns shrink (widest first, wrapping) to fit `width`. */
  table(head: string[], rows: string[][]): string {
    const natural = head.map((h, i) => Math.max(visibleWidth(h), ...rows.map((r) => longestLine(r[i] ?? ''))) + 2);
    const width = this.#width();
    const colWidths = width === undefined ? natural : fit(natural, width - (head.length + 1));
    const table = new Table({
      head: head.map((h) => this.c.bold(h)),
      colWidths,
      wordWrap: true,
      wrapOnWordBoundary: false,
      // cli-table3 colours headers and borders itself unless told not to; colour is ours to decide.
      style: { head: [], border: [], 'padding-left': 1, 'padding-right': 1 },
      // No rule between rows: a row is one line unless it wraps, and the rules doubled every table's height.
      chars: { mid: '', 'left-mid': '', 'mid-mid': '', 'right-mid': '' },
    });
    for (const r of rows) table.push(r);
    return table.toString();
  }
}

const GOOD = new Set(['ready', 'up', 'ok', 'yes', 'placed', 'removed']);
const BAD = new Set(['failed', 'lost', 'unhealthy', 'refused', 'unreachable', 'not placed']);
const PASSING = new Set(['pending', 'fetching', 'starting', 'draining', 'stopping', 'cordoned', 'stale']);

// eslint-disable-next-line no-control-regex
const ANSI_RE = /\x1b\[[0-9;]*m/g;

export function visibleWidth(s: string): number {
  return s.replace(ANSI_RE, '').length;
}

function longestLine(s: string): number {
  return Math.max(0, ...s.split('\n').map(visibleWidth));
}

/** Shrinks the widest columns first until the sum fits; no column below 6. */
export function fit(widths: number[], budget: number): number[] {
  const out = [...widths];
  const MIN = 6;
  let total = out.reduce((a, b) => a + b, 0);
  while (total > budget) {
    let widest = 0;
    for (let i = 1; i < out.length; i++) if (out[i]! > out[widest]!) widest = i;
    if (out[widest]! <= MIN) break;
    out[widest]!--;
    total--;
  }
  return out;
}

/** Bytes in binary units, to three significant figures; absent = unknown. */
export function bytesOrUnknown(bytes: number | undefined): string {
  return bytes === undefined || !Number.isFinite(bytes) ? UNKNOWN : formatBytes(bytes, { threeFigures: true });
}

/** GiB as the API reports it (whole GiB); absent = unknown. */
export function formatGiB(gib: number | undefined): string {
  return gib === undefined ? UNKNOWN : `${gib} GiB`;
}

/** Seconds as "45s", "3m12s", "2h5m"; negative or absent = unknown. */
export function formatSeconds(seconds: number | undefined): string {
  if (seconds === undefined || seconds < 0) return UNKNOWN;
  const h = Math.floor(seconds / 3600);
  const m = Math.floor((seconds % 3600) / 60);
  const s = Math.floor(seconds % 60);
  if (h) return `${h}h${m}m`;
  if (m) return `${m}m${s}s`;
  return `${s}s`;
}

export function orUnknown(v: string | number | undefined | null): string {
  return v === undefined || v === null || v === '' ? UNKNOWN : String(v);
}

export function list(values: readonly string[] | undefined): string {
  return values && values.length ? values.join(', ') : UNKNOWN;
}
