// The circuits of remote replicas: a remote that keeps failing is left out
// for a while and then probed once; one that answered 429 is left alone
// until its Retry-After, and is not counted as failing.
import { describe, expect, it } from 'vitest';
import { RemoteCircuits, retryAfterMs } from './circuit.js';

function circuits(at = { ms: 1_000 }) {
  return {
    at,
    c: new RemoteCircuits({ failuresToOpen: 3, openMs: 10_000, defaultRetryAfterMs: 1_000, now: () => at.ms }),
  };
}

describe('remote circuits', () => {
  it('opens after consecutive failures, lets one probe through after openMs, and closes on its success', () => {
    const { at, c } = circuits();
    c.failed('r');
    c.failed('r');
    expect(c.available('r'), 'two failures of three leave it closed').toBe(true);
    c.failed('r');
    expect(c.phase('r')).toBe('open');
    expect(c.available('r'), 'open: not chosen').toBe(false);
    at.ms += 10_000;
    expect(c.phase('r')).toBe('half-open');
    expect(c.available('r'), 'half-open: one probe may go').toBe(true);
    c.started('r');
    expect(c.available('r'), 'a second request waits for the probe').toBe(false);
    c.succeeded('r');
    expect(c.phase('r')).toBe('closed');
    expect(c.available('r')).toBe(true);
  });

  it('opens again at once when the half-open probe fails', () => {
    const { at, c } = circuits();
    for (let i = 0; i < 3; i++) c.failed('r');
    at.ms += 10_000;
    c.started('r');
    c.failed('r');
    expect(c.phase('r')).toBe('open');
    expect(c.available('r')).toBe(false);
  });

  it('a success between failures resets the count', () => {
    const { c } = circuits();
    c.failed('r');
    c.failed('r');
    c.succeeded('r');
    c.failed('r');
    c.failed('r');
    expect(c.phase('r')).toBe('closed');
  });

  it('waits out a 429 for its Retry-After without counting a failure', () => {
    const { at, c } = circuits();
    expect(c.limited('r', '3')).toBe(3_000);
    expect(c.available('r')).toBe(false);
    expect(c.retryAfterS(['r', 'other'])).toBe(3);
    expect(c.phase('r'), 'a busy remote is not a failing one').toBe('closed');
    at.ms += 3_000;
    expect(c.available('r')).toBe(true);
    expect(c.retryAfterS(['r'])).toBeNull();
  });

  it('takes the default wait for a 429 without a readable Retry-After', () => {
    const { c } = circuits();
    expect(c.limited('r', undefined)).toBe(1_000);
    expect(c.limited('s', 'soon')).toBe(1_000);
  });
});

describe('retryAfterMs', () => {
  it.each([
    ['2', 2_000],
    ['0.5', 500],
    ['Thu, 01 Jan 1970 00:00:05 GMT', 4_000],
    ['', null],
    ['later', null],
  ])('reads %j', (value, ms) => {
    expect(retryAfterMs(value, 1_000)).toBe(ms);
  });
});
