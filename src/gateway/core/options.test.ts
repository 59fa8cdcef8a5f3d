import { describe, expect, it } from 'vitest';
import { compileControlOptions } from '../../control/config/index.js';
import { compileRouterOptions, ROUTER_DEFAULTS } from './options.js';

describe('compileRouterOptions', () => {
  it('fills every absent setting from ROUTER_DEFAULTS', () => {
    const o = compileRouterOptions({});
    expect(o.timeouts).toEqual({
      headersTimeoutMs: ROUTER_DEFAULTS.headersTimeoutMs,
      idleBodyTimeoutMs: ROUTER_DEFAULTS.idleBodyTimeoutMs,
      totalTimeoutMs: ROUTER_DEFAULTS.totalTimeoutMs,
      coldStartTimeoutMs: ROUTER_DEFAULTS.coldStartTimeoutMs,
    });
    expect(o.maxAttempts).toBe(4);
    expect(o.bodyLimitBytes).toBe(8 * 2 ** 20);
    expect(o.corsOrigins, 'absent origins mean no CORS').toEqual([]);
    expect(o.engineCa, 'absent means the system CAs').toBeNull();
    expect(o.now).toBe(Date.now);
  });

  it('keeps what the caller set, a partial timeouts object included', () => {
    const o = compileRouterOptions({ timeouts: { coldStartTimeoutMs: 200 }, maxHeldPerKey: 2, sweepIntervalMs: 0 });
    expect(o.timeouts.coldStartTimeoutMs).toBe(200);
    expect(o.timeouts.totalTimeoutMs).toBe(ROUTER_DEFAULTS.totalTimeoutMs);
    expect(o.maxHeldPerKey).toBe(2);
    expect(o.sweepIntervalMs, '0 means never, not the default').toBe(0);
  });

  it('refuses a negative or non-finite number, naming the setting', () => {
    expect(() => compileRouterOptions({ maxAttempts: -1 })).toThrow(/maxAttempts is -1/);
    expect(() => compileRouterOptions({ timeouts: { totalTimeoutMs: Number.NaN } })).toThrow(/totalTimeoutMs/);
    // Past 2^31 - 1 ms Node fires a timer at once: every request would time out.
    expect(() => compileRouterOptions({ timeouts: { totalTimeoutMs: 30 * 86_400_000 } })).toThrow(
      /totalTimeoutMs is 2592000000; a timer waits at most/,
    );
    expect(compileRouterOptions({ timeouts: { totalTimeoutMs: 24 * 86_400_000 } }).timeouts.totalTimeoutMs).toBe(
      24 * 86_400_000,
    );
  });

  it("gives the control plane's configuration the same defaults", () => {
    const config = compileControlOptions({});
    expect(config.router).toEqual(compileRouterOptions({}).timeouts);
    expect(config.maxHeldPerKey).toBe(ROUTER_DEFAULTS.maxHeldPerKey);
  });
});
