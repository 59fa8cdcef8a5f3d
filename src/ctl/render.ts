// How ctl prints: tables that fit the terminal, colour for states only when
// stdout is a terminal, and one spelling for "not known" ("-"), so that an
// unreported value never reads as zero. Kept apart from the commands so every
// command prints the same way and the rules are tested once.
//
// Terminal safety lives here too. Much of what ctl prints was written by
// someone other than the operator: a node's hostname, labels, GPU names and
// disk paths, an engine's errors and log lines, a client's key names. Raw,
// such text can drive the operator's terminal (clear the screen, set the
// title, write the clipboard with OSC 52) or print a line that looks like
// ctl's own. So every control character in it is shown as a visible escape
// (\x1b, \n) instead: cleanForTerminal() on everything the admin API answers
// (index.ts applies it to the client, so a new command is covered without
// anyone remembering), and Output's writer again on every byte it prints.
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
  /** Colour is on, so an SGR sequence in what is printed may be ctl's own and is let through (nothing else is). */
  readonly #colors: boolean;

  constructor(write: (s: string) => void, options: OutputOptions) {
    this.#write = write;
    this.tty = options.tty;
    const w = options.width;
    this.#width = typeof w === 'function' ? w : () => w;
    this.#colors = options.tty && (options.color ?? true);
    this.c = picocolors.createColors(this.#colors);
  }

  line(s = ''): void {
    this.#write(terminalText(`${s}\n`, { colors: this.#colors }));
  }

  /** For --watch at a terminal: ctl's own sequence, the one thing written past the filter. */
  clearScreen(): void {
    if (this.tty) this.#write('\x1b[2J\x1b[H');
  }

  json(value: unknown): void {
    this.#write(`${jsonForTerminal(value)}\n`);
  }

  /** One value as one line of JSON (-o json for a stream: events --watch, logs -f). */
  jsonLine(value: unknown): void {
    this.#write(`${jsonForTerminal(value, 0)}\n`);
  }

  /** `s` as Output would print it (for stderr, which Output does not write): controls escaped, ctl's own colours kept. */
  safe(s: string): string {
    return terminalText(s, { colors: this.#colors });
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

// C0 (with newline and tab), DEL and C1: what a terminal may act on rather than print.
// eslint-disable-next-line no-control-regex
const CONTROL_RE = /[\x00-\x1f\x7f-\x9f]/g;
// eslint-disable-next-line no-control-regex
const CONTROL_BUT_LINES_RE = /[\x00-\x08\x0b-\x1f\x7f-\x9f]/g;
// eslint-disable-next-line no-control-regex
const CONTROL_BUT_TAB_RE = /[\x00-\x08\x0a-\x1f\x7f-\x9f]/g;
// An SGR sequence (colour, bold, dim): the only escape sequence ctl writes into text. Also the
// start of one cut short, followed by a space, a newline or ESC: cli-table3 cuts coloured text
// that it wraps inside its sequences, and escaping those pieces would break the table's columns.
// eslint-disable-next-line no-control-regex
const SGR_OR_CONTROL_RE = /(\x1b\[[0-9;]*m|\x1b(?:\[[0-9;]*)?(?=[\s\x1b]|$))|[\x00-\x08\x0b-\x1f\x7f-\x9f]/g;

/** A control character as the operator should see it: \n, \r and \t by name, the rest as \xHH. */
export function visibleEscape(c: string): string {
  if (c === '\n') return '\\n';
  if (c === '\r') return '\\r';
  if (c === '\t') return '\\t';
  return `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`;
}

/** How much layout a piece of outside text keeps; see sanitize(). */
type TextMode = 'line' | 'log-line' | 'text';

const MODE_RE: Record<TextMode, RegExp> = {
  line: CONTROL_RE,
  'log-line': CONTROL_BUT_TAB_RE,
  text: CONTROL_BUT_LINES_RE,
};

/**
 * Text from outside ctl made printable. `line` (the default): one line, for
 * a table cell or a "key  value" line, so newline, CR and tab are escaped too
 * and no value can start a line of its own. `log-line`: one line of an
 * engine's log, which keeps its tabs (a newline inside one, which no honest
 * agent sends, would print as a line the engine never wrote). `text`: a
 * field meant to span lines (a multi-line message), which keeps newline and tab.
 */
export function sanitize(s: string, mode: TextMode = 'line'): string {
  return s.replace(MODE_RE[mode], visibleEscape);
}

/**
 * The writer's filter, on every byte Output prints: newline and tab stay
 * (ctl's own layout), and with colour on so does an SGR sequence (ctl's own
 * colours); every other control character is escaped. Values reach here
 * already cleaned by cleanForTerminal(), so an escape that gets this far is
 * ctl's; this catches text that came some other way.
 */
export function terminalText(s: string, options: { colors: boolean }): string {
  if (!options.colors) return s.replace(CONTROL_BUT_LINES_RE, visibleEscape);
  return s.replace(SGR_OR_CONTROL_RE, (m, kept: string | undefined) => (kept === undefined ? visibleEscape(m) : m));
}

/**
 * JSON as the API sent it, the same value for any JSON reader. JSON.stringify
 * escapes C0 but leaves DEL and C1 raw (U+009B is CSI to some terminals), so
 * those are written as \u escapes as well.
 */
export function jsonForTerminal(value: unknown, indent = 2): string {
  return JSON.stringify(value, null, indent).replace(
    /[\x7f-\x9f]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}

/**
 * Fields of admin API answers that keep some layout: an engine's log lines
 * (tabs; one element a line) and a plan's explanation (lines). Every other
 * string (names, labels, paths, reasons, errors, events) is cleaned as one
 * line; a field missing here shows its newlines as \n, never as a line the
 * sender wrote.
 */
const FIELD_MODES: ReadonlyMap<string, TextMode> = new Map([
  ['lines', 'log-line'],
  ['explain', 'text'],
]);

/**
 * Every string in an admin API answer (object keys too: labels) with its
 * control characters made visible, by sanitize(): one line unless its field
 * is in FIELD_MODES. A fresh value; the answer is not changed.
 */
export function cleanForTerminal<T>(value: T): T {
  return cleanValue(value, 'line') as T;
}

function cleanValue(value: unknown, mode: TextMode): unknown {
  if (typeof value === 'string') return sanitize(value, mode);
  if (Array.isArray(value)) return value.map((v) => cleanValue(v, mode));
  if (value === null || typeof value !== 'object') return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[sanitize(k)] = cleanValue(v, FIELD_MODES.get(k) ?? 'line');
  return out;
}

/**
 * An error's message as ctl prints it: controls escaped, and the server's
 * multi-line messages (a refused model file, a placement that cannot fit)
 * kept on several lines, each after the first indented, so that no line
 * of it can pass for one of ctl's own.
 */
export function errorText(message: string): string {
  return sanitize(message, 'text').replace(/\n/g, '\n  ');
}
