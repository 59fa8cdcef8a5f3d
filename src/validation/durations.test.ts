import { describe, expect, it } from 'vitest';
import { MAX_TIMER_MS } from '../units/index.js';
import { durationSchema, timerFlagMs } from './durations.js';

describe('duration fields', () => {
  it('hold no timer longer than Node can: 24d, just under 2^31 - 1 ms', () => {
    expect(MAX_TIMER_MS).toBeLessThanOrEqual(2 ** 31 - 1);
    expect(MAX_TIMER_MS).toBe(24 * 86_400_000);
  });

  it('take what parses within the range, and word the range in the refusal', () => {
    const timer = durationSchema({ like: '30s' });
    expect(timer.safeParse('24d').success).toBe(true);
    expect(timer.safeParse('0s').success, '0 allowed unless aboveZero').toBe(true);
    const over = timer.safeParse('24d1ms');
    expect(over.success).toBe(false);
    expect(over.error?.issues[0]?.message).toBe('want a duration up to 24d with a unit, like 30s');
    expect(timer.safeParse('30').success, 'no unit').toBe(false);

    const positive = durationSchema({ like: '5s', aboveZero: true });
    expect(positive.safeParse('0ms').error?.issues[0]?.message).toBe(
      'want a duration above 0 and up to 24d with a unit, like 5s',
    );
    expect(positive.safeParse('1ms').success).toBe(true);

    const age = durationSchema({ like: '30d', maxMs: Infinity });
    expect(age.safeParse('365d').success, 'no timer: no bound').toBe(true);
    expect(age.safeParse('soon').error?.issues[0]?.message).toBe('want a duration with a unit, like 30d');
  });

  it('reads a flag by hand, naming it when it is no duration or too long', () => {
    expect(() => timerFlagMs('--load-interval', '30d')).toThrow(
      '--load-interval 30d is longer than a timer can wait; give at most 24d',
    );
    expect(timerFlagMs('--load-interval', '24d')).toBe(MAX_TIMER_MS);
    expect(() => timerFlagMs('--load-interval', '30')).toThrow(/^--load-interval: "30" is not a duration/);
    expect(() => timerFlagMs('--heartbeat-interval', 'soon', 'heartbeat interval')).toThrow(/^heartbeat interval: /);
  });
});
