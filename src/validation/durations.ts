// A duration field of the configuration or the catalog ("90s", "5m"), as one
// zod schema: it parses, and it lies within the field's range. Most
// durations become timers, and a timer longer than Node can hold fires at
// once (MAX_TIMER_MS), so the bound is part of the field, not left to the
// code that arms the timer. One builder, so each field words its range the
// same way.
import { z } from 'zod';
import { LlmgwError } from '../errors/index.js';
import { MAX_TIMER_MS, parseDurationMs } from '../units/index.js';

export interface DurationRange {
  /** Examples for the message, like '30s or 500ms'. */
  readonly like: string;
  /** True: 0 is refused (a timeout that ends everything at once, an interval that spins). Absent = 0 is allowed. */
  readonly aboveZero?: boolean;
  /** Longest allowed, in ms; absent = MAX_TIMER_MS. Infinity for a duration that never becomes a timer (a stored item's age). */
  readonly maxMs?: number;
}

/** Words the longest a field allows: "24d" for MAX_TIMER_MS. */
function longest(ms: number): string {
  return ms % 86_400_000 === 0 ? `${ms / 86_400_000}d` : `${ms}ms`;
}

/** A duration text schema: parses, is above 0 where asked, and is at most the field's longest. */
export function durationSchema(range: DurationRange): z.ZodString {
  const maxMs = range.maxMs ?? MAX_TIMER_MS;
  const bounds = [range.aboveZero ? 'above 0' : '', Number.isFinite(maxMs) ? `up to ${longest(maxMs)}` : '']
    .filter(Boolean)
    .join(' and ');
  return z.string().refine(
    (v) => {
      const ms = parseDurationMs(v);
      return typeof ms === 'number' && ms <= maxMs && (!range.aboveZero || ms > 0);
    },
    { message: `want a duration${bounds ? ` ${bounds}` : ''} with a unit, like ${range.like}` },
  );
}

/**
 * A duration flag read by hand (the agent's), in ms: throws
 * LLMGW_CONFIG_INVALID when `text` is no duration (the message led by
 * `named`, the flag unless told) or is longer than a timer can wait.
 */
export function timerFlagMs(flag: string, text: string, named = flag): number {
  const ms = parseDurationMs(text);
  if (typeof ms === 'string') throw new LlmgwError('LLMGW_CONFIG_INVALID', `${named}: ${ms}`);
  if (ms > MAX_TIMER_MS)
    throw new LlmgwError(
      'LLMGW_CONFIG_INVALID',
      `${flag} ${text} is longer than a timer can wait; give at most ${longest(MAX_TIMER_MS)}`,
    );
  return ms;
}
