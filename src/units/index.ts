// Durations and sizes as operators write them ("90s", "5m", "3.5t") and the
// numbers the code uses (milliseconds, bytes). Kept apart so that the catalog,
// the configuration, the agent's --simulate spec and ctl all read "5m" the same way.
import { closest, distance } from 'fastest-levenshtein';

const DURATION_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/**
 * Parses "500ms", "90s", "5m", "1h30m", "2d". A bare number is refused: a
 * duration without a unit is the classic source of "I meant minutes".
 * Returns a sentence on failure so callers can gather problems.
 */
export function parseDurationMs(text: string): number | string {
  const trimmed = text.trim();
  const re = /(\d+(?:\.\d+)?)(ms|s|m|h|d)/gy;
  let total = 0;
  let consumed = 0;
  for (let match = re.exec(trimmed); match; match = re.exec(trimmed)) {
    total += Number(match[1]) * DURATION_MS[match[2]!]!;
    consumed = re.lastIndex;
  }
  if (trimmed === '' || consumed !== trimmed.length) {
    return `${JSON.stringify(text)} is not a duration; write a number with a unit, like 500ms, 90s, 5m or 1h`;
  }
  return Math.round(total);
}

/**
 * The longest duration that may become a timer. Node's timers hold at most
 * 2^31 - 1 ms (24.8 days) and fire after 1 ms for anything longer, so a
 * request timeout of "30d" would end every request at once. Whole days, so
 * the limit reads as "24d".
 */
export const MAX_TIMER_MS = 24 * 86_400_000;

export function formatDurationMs(ms: number): string {
  if (ms % 3_600_000 === 0 && ms >= 3_600_000) return `${ms / 3_600_000}h`;
  if (ms % 60_000 === 0 && ms >= 60_000) return `${ms / 60_000}m`;
  if (ms % 1000 === 0 && ms >= 1000) return `${ms / 1000}s`;
  return `${ms}ms`;
}

const SIZE_BYTES: Record<string, number> = { '': 1, k: 2 ** 10, m: 2 ** 20, g: 2 ** 30, t: 2 ** 40, p: 2 ** 50 };

/** Parses "512m", "2048g", "3.5t" (binary units; a trailing "b" or "ib" is allowed). A bare number is bytes. */
export function parseSizeBytes(text: string): number | string {
  const match = /^(\d+(?:\.\d+)?)\s*([kmgtp]?)(?:i?b)?$/i.exec(text.trim());
  if (!match) return `${JSON.stringify(text)} is not a size; write a number with a unit, like 512m, 80g or 3.5t`;
  return Math.round(Number(match[1]) * SIZE_BYTES[match[2]!.toLowerCase()]!);
}

export const GiB = 2 ** 30;

/**
 * "141 GiB", "512 MiB": for messages, one decimal at most. With
 * `threeFigures`, values under 10 keep two decimals ("1.25 GiB"), as ctl's
 * tables show them.
 */
export function formatBytes(bytes: number, options: { threeFigures?: boolean } = {}): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  if (unit === 0 || value >= 100) return `${Math.round(value)} ${units[unit]}`;
  if (!options.threeFigures) return `${Math.round(value * 10) / 10} ${units[unit]}`;
  const shown = value >= 10 ? value.toFixed(1).replace(/\.0$/, '') : value.toFixed(2).replace(/\.?0+$/, '');
  return `${shown} ${units[unit]}`;
}

/** The valid name nearest to a mistyped one, for "did you mean …?"; null when nothing is close. */
export function nearestName(wrong: string, valid: readonly string[]): string | null {
  if (valid.length === 0) return null;
  const best = closest(wrong, valid as string[]);
  const limit = Math.max(2, Math.floor(best.length / 3));
  return distance(wrong.toLowerCase(), best.toLowerCase()) <= limit ? best : null;
}
