// The key and budget records the budget tests build their planes from: one
// key (`key_a`) in team `ml`, and a hard budget in tokens per day on that
// team unless a test says otherwise. In one place so that each test names
// only what it is about (an amount, a unit, a scope), and the records'
// shape cannot drift between the lease, renewal and GPU true-up tests.
import type { BudgetRecord } from '../../src/control/budgets/budgets.js';
import type { ApiKeyRecord } from '../../src/gateway/ports/index.js';

/** Key `key_a` of team `ml`, with no limits of its own. */
export const TEAM_KEY: ApiKeyRecord = {
  id: 'key_a',
  name: 'a',
  prefix: 'llmgw-aaaaaa',
  hash: 'h',
  allowedModels: null,
  requestsPerMinute: null,
  tokensPerMinute: null,
  expiresAtMs: null,
  createdAtMs: 0,
  createdBy: 't',
  revokedAtMs: null,
  team: 'ml',
};

/** A hard budget: team `ml`'s `bud_ml`, in tokens per day, alerting at 1, unless `over` says otherwise. */
export function budgetRecord(over: Partial<BudgetRecord> & Pick<BudgetRecord, 'amount'>): BudgetRecord {
  return {
    id: 'bud_ml',
    scope: 'team',
    subject: 'ml',
    unit: 'tokens',
    period: 'day',
    enforce: 'hard',
    alertAt: 1,
    createdAtMs: 0,
    createdBy: 't',
    ...over,
  };
}
