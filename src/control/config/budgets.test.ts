// budget_renew_wait through the one config schema: the default is the
// leases' own, an operator may shorten, lengthen or turn off the wait, and
// a value the leases cannot use is refused with what to write instead.
import { describe, expect, it } from 'vitest';
import { BUDGET_RENEW_WAIT_MS } from '../budgets/leases.js';
import { loadControlConfig } from './index.js';

describe('budget_renew_wait', () => {
  it("defaults to the leases' own wait, and takes a duration from env or file", () => {
    expect(loadControlConfig({ env: {} }).budgets).toEqual({ renewWaitMs: BUDGET_RENEW_WAIT_MS });
    expect(loadControlConfig({ env: { LLMGW_BUDGET_RENEW_WAIT: '2s' } }).budgets.renewWaitMs).toBe(2000);
    expect(loadControlConfig({ env: { LLMGW_BUDGET_RENEW_WAIT: '0s' } }).budgets.renewWaitMs, 'no wait').toBe(0);
  });

  it('refuses what is not a duration, or one past a minute, saying what to write', () => {
    expect(() => loadControlConfig({ env: { LLMGW_BUDGET_RENEW_WAIT: '300' } })).toThrow(/budget_renew_wait/);
    expect(() => loadControlConfig({ env: { LLMGW_BUDGET_RENEW_WAIT: '5m' } })).toThrow(/from 0 to 1m/);
  });
});
