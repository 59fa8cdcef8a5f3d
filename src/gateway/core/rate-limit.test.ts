import { describe, expect, it } from 'vitest';
import { RateLimiter } from './rate-limit.js';

describe('rate limits', () => {
  it('lets a key burst to its per-minute figure, then refills continuously', () => {
    let now = 0;
    const limiter = new RateLimiter(() => now);
    expect(
      [0, 1, 2].map(() => limiter.admit('k', 3, null).remaining),
      'what is left after each',
    ).toEqual([{ requests: 2 }, { requests: 1 }, { requests: 0 }]);
    const refused = limiter.admit('k', 3, null);
    expect(refused).toEqual({ ok: false, retryAfterS: 20, limit: 'requests', remaining: { requests: 0 } });
    now += 20_000;
    expect(limiter.admit('k', 3, null).ok, 'one request refilled after 20 s at 3/min').toBe(true);
  });

  it('charges tokens after the answer and refuses while the balance is spent', () => {
    let now = 0;
    const limiter = new RateLimiter(() => now);
    expect(limiter.admit('k', null, 600).ok).toBe(true);
    limiter.settle('k', 600, 0, 700);
    const refused = limiter.admit('k', null, 600);
    expect(refused.ok).toBe(false);
    expect(refused.limit).toBe('tokens');
    expect(limiter.admit('k', 5, 600).remaining, 'refused for tokens, both limits still told').toEqual({
      requests: 5,
      tokens: 0,
    });
    now += refused.retryAfterS * 1000;
    expect(limiter.admit('k', null, 600).ok).toBe(true);
  });

  // A burst of concurrent requests each admitted while the balance was above zero spent many minutes' worth of a
  // key's tokens: each request now reserves what it may cost, and the excess is refused before it runs.
  it("reserves each request's tokens at admission, so a concurrent burst past the balance is refused", () => {
    const limiter = new RateLimiter(() => 0);
    const decisions = [0, 1, 2, 3].map(() => limiter.admit('k', null, 100, 30));
    expect(
      decisions.map((d) => d.ok),
      'three reservations of 30 fit in 100, the fourth does not',
    ).toEqual([true, true, true, false]);
    expect(decisions.map((d) => d.reservedTokens ?? 0)).toEqual([30, 30, 30, 0]);
    expect(decisions[2]!.remaining, 'what is left after the third reservation').toEqual({ tokens: 10 });
    expect(decisions[3]!.limit).toBe('tokens');
  });

  it('settles a reservation to the real use: refunds the rest, or all when no token was used', () => {
    const limiter = new RateLimiter(() => 0);
    const first = limiter.admit('k', null, 100, 60);
    expect(limiter.admit('k', null, 100, 60).ok, '40 left, 60 asked').toBe(false);
    limiter.settle('k', 100, first.reservedTokens!, 10);
    const second = limiter.admit('k', null, 100, 60);
    expect(second.ok, 'the 50 unused tokens came back').toBe(true);
    limiter.settle('k', 100, second.reservedTokens!, 0);
    expect(limiter.admit('k', null, 100, 90).ok, 'a request that failed before any token gave all 60 back').toBe(true);
  });

  it('caps a reservation at the per-minute limit, so one large request fits a full balance', () => {
    const limiter = new RateLimiter(() => 0);
    const big = limiter.admit('k', null, 100, 5_000);
    expect(big).toMatchObject({ ok: true, reservedTokens: 100 });
    expect(limiter.admit('k', null, 100, 1).ok, 'nothing left until it settles').toBe(false);
  });
});
