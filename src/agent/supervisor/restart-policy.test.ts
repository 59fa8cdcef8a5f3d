// The restart policy's numbers and sentences, with the random source pinned.
import { describe, expect, it } from 'vitest';
import { RestartPolicy } from './restart-policy.js';

describe('RestartPolicy', () => {
  it('doubles the delay per failure in a row up to the cap, with centred jitter giving exact delays', () => {
    const policy = new RestartPolicy({ baseDelayMs: 1000, factor: 2, maxDelayMs: 10_000, random: () => 0.5 });
    const delays: number[] = [];
    let failures = 0;
    for (let i = 0; i < 6; i++) {
      const decision = policy.decide(failures, 5_000);
      if (!decision.restart) throw new Error('expected a restart');
      delays.push(decision.delayMs);
      failures = decision.consecutiveFailures;
    }
    expect(delays).toEqual([1000, 2000, 4000, 8000, 10_000, 10_000]);
    expect(failures).toBe(6);
  });

  it('moves each delay by at most the jitter share, and never past the cap', () => {
    const low = new RestartPolicy({ baseDelayMs: 1000, jitterRatio: 0.2, random: () => 0 }).decide(0, 0);
    const high = new RestartPolicy({ baseDelayMs: 1000, jitterRatio: 0.2, random: () => 0.999_999 }).decide(0, 0);
    expect(low.restart && low.delayMs).toBe(800);
    expect(high.restart && high.delayMs).toBe(1200);
    const capped = new RestartPolicy({
      baseDelayMs: 1000,
      maxDelayMs: 1000,
      jitterRatio: 0.5,
      random: () => 0.999,
    }).decide(0, 0);
    expect(capped.restart && capped.delayMs, 'jitter does not lift a delay past the cap').toBe(1000);
  });

  it('starts over after a run as long as stableAfterMs, and says so', () => {
    const policy = new RestartPolicy({ baseDelayMs: 1000, stableAfterMs: 60_000, jitterRatio: 0 });
    const unstable = policy.decide(4, 59_999);
    const stable = policy.decide(4, 60_000);
    expect(unstable).toMatchObject({ restart: true, delayMs: 16_000, consecutiveFailures: 5 });
    expect(stable).toMatchObject({ restart: true, delayMs: 1000, consecutiveFailures: 1 });
    expect(stable.reason).toBe(
      'restart in 1s: it had run 1m, long enough to start the backoff over; backoff 1s ×2 each, at most 2m',
    );
    expect(unstable.reason).toBe('restart in 16s: 5 failures in a row; backoff 1s ×2 each, at most 2m');
  });

  it('gives up after maxConsecutiveFailures, and never with 0', () => {
    const policy = new RestartPolicy({ maxConsecutiveFailures: 3 });
    expect(policy.decide(2, 0).restart).toBe(true);
    expect(policy.decide(3, 0)).toEqual({
      restart: false,
      consecutiveFailures: 4,
      reason: 'not restarted: 4 failures in a row, and the policy gives up after 3',
    });
    expect(new RestartPolicy({ jitterRatio: 0 }).decide(1_000, 0), 'capped, still restarting').toMatchObject({
      restart: true,
      delayMs: 120_000,
    });
  });

  it('rejects unknown options and impossible numbers', () => {
    expect(() => new RestartPolicy({ baseDelay: 5 } as never)).toThrow(
      /"baseDelay" is unknown; did you mean "baseDelayMs"/,
    );
    expect(() => new RestartPolicy({ factor: 0.5 })).toThrow(/factor must be a multiplier of 1 or more/);
    expect(() => new RestartPolicy({ jitterRatio: 2 })).toThrow(/jitterRatio must be a share from 0 to 1/);
  });
});
