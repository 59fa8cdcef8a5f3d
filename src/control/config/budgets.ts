// The keys of budgets (docs/teams-and-budgets.md): how long a request whose
// lease of a hard budget ran dry waits for the store to renew it before it
// is refused as unsettled (503) rather than admitted. Apart from index.ts
// so the feature's keys read together; index.ts spreads them into the one
// schema, and their defaults are the leases' own (leases.ts), so the two
// cannot drift.
import { z } from 'zod';
import { BUDGET_RENEW_WAIT_MS } from '../budgets/leases.js';
import { formatDurationMs, parseDurationMs } from '../../units/index.js';

/** The longest budget_renew_wait taken: past it a client is better told to retry than held. */
const MAX_RENEW_WAIT_MS = 60_000;

/** Defaults of the budget keys, as an operator would write them. */
export const BUDGET_DEFAULTS = Object.freeze({
  budget_renew_wait: formatDurationMs(BUDGET_RENEW_WAIT_MS),
});

export const BUDGET_OPTIONS = {
  /**
   * How long a request that finds its plane's lease of a hard budget dry
   * (the store having had room at the last sync) waits for the lease's
   * renewal; past it, 503 LLMGW_BUDGET_UNSETTLED. 0 = no wait: refused at
   * once, the renewal still started.
   */
  budget_renew_wait: z
    .string()
    .refine((v) => ((ms) => typeof ms === 'number' && ms >= 0 && ms <= MAX_RENEW_WAIT_MS)(parseDurationMs(v)), {
      message: `want a duration from 0 to ${formatDurationMs(MAX_RENEW_WAIT_MS)} with a unit, like 500ms or 2s (budget_renew_wait)`,
    })
    .default(BUDGET_DEFAULTS.budget_renew_wait),
};

/** Budgets' settings, compiled. */
export interface BudgetSettings {
  /** BudgetLeasesOptions.renewWaitMs: 0 = a dry lease's request does not wait. */
  readonly renewWaitMs: number;
}

/** The keys, already checked by the schema. */
export function compileBudgets(o: { budget_renew_wait: string }): BudgetSettings {
  return Object.freeze({ renewWaitMs: parseDurationMs(o.budget_renew_wait) as number });
}
