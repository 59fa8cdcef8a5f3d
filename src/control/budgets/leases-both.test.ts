// A key with a budget of its own in a team with one: admission checks both,
// from a list of the two made once per key. The failures this guards
// against: that list kept after the key moved to another team (the old
// team's budget still charged, the new one's never), or after the budgets
// were read again (a deleted budget still refusing). And the used-ratio
// gauge, which once read the map of leases made before the first reload and
// so never listed a budget.
import pino from 'pino';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import type { ApiKeyRecord } from '../../gateway/ports/index.js';
import { MemoryBudgetBook } from './book.js';
import type { BudgetRecord } from './budgets.js';
import { BudgetLeases } from './leases.js';
import { budgetRecord, TEAM_KEY } from '../../../test/support/budget-records.js';

const NOW = Date.parse('2026-12-06T10:00:00Z');
const key = TEAM_KEY;
const budget = (id: string, scope: 'team' | 'key', subject: string, amount: number): BudgetRecord =>
  budgetRecord({ id, scope, subject, amount });

async function gate(budgets: BudgetRecord[]): Promise<{ leases: BudgetLeases; book: MemoryBudgetBook }> {
  const book = new MemoryBudgetBook();
  for (const b of budgets) await book.create(b);
  const leases = new BudgetLeases({
    book,
    prices: { cost: () => undefined },
    now: () => NOW,
    logger: pino({ level: 'silent' }),
    // The whole amount as one lease, so what is admitted is exactly the amount.
    leaseFraction: 1,
    syncIntervalMs: 0,
  });
  await leases.reload();
  return { leases, book };
}

/** Admits requests of `tokens` each for `k` until one is refused; what refused it, and how many got in. */
async function spendUntilRefused(
  leases: BudgetLeases,
  k: ApiKeyRecord,
  tokens: number,
): Promise<{ admitted: number; by: string }> {
  for (let admitted = 0; admitted < 1000; admitted++) {
    const d = await leases.admit(k, 'alpha', tokens, 0);
    if (!d.ok) return { admitted, by: d.budget };
    d.hold!.settle('alpha', tokens, 0);
  }
  return { admitted: 1000, by: '' };
}

describe("a key's own budget and its team's together", () => {
  it('refuses on whichever runs out first, the key or its team', async () => {
    const { leases } = await gate([budget('b_key', 'key', 'key_a', 300), budget('b_ml', 'team', 'ml', 10_000)]);
    const r = await spendUntilRefused(leases, key, 100);
    expect(r.by).toContain('b_key');
    // The whole amount is leased at once, so the store has nothing left to give on credit: exactly the amount.
    expect(r.admitted).toBe(3);
  });

  it("charges the new team's budget once the key moved there, not the old team's", async () => {
    const { leases } = await gate([
      budget('b_key', 'key', 'key_a', 10_000),
      budget('b_ml', 'team', 'ml', 10_000),
      budget('b_ops', 'team', 'ops', 200),
    ]);
    expect((await leases.admit(key, 'alpha', 100, 0)).ok).toBe(true);
    const moved = { ...key, team: 'ops' };
    const r = await spendUntilRefused(leases, moved, 100);
    expect(r.by).toContain('b_ops');
    expect(r.admitted).toBe(2);
  });

  it('stops charging a budget deleted and read again', async () => {
    const { leases, book } = await gate([budget('b_key', 'key', 'key_a', 200), budget('b_ml', 'team', 'ml', 10_000)]);
    expect((await spendUntilRefused(leases, key, 100)).by).toContain('b_key');
    await book.delete('b_key');
    await leases.reload();
    const r = await spendUntilRefused(leases, key, 100);
    expect(r.by).toContain('b_ml');
    expect(r.admitted).toBeGreaterThan(90);
  });
});

describe('llmgw_budget_used_ratio', () => {
  it('lists every budget read, with what it has used', async () => {
    const book = new MemoryBudgetBook();
    await book.create(budget('b_ml', 'team', 'ml', 1000));
    const registry = new Registry();
    const leases = new BudgetLeases({
      book,
      prices: { cost: () => undefined },
      now: () => NOW,
      logger: pino({ level: 'silent' }),
      registry,
      leaseFraction: 1,
      syncIntervalMs: 0,
    });
    await leases.reload();
    const d = await leases.admit(key, 'alpha', 100, 0);
    expect(d.ok).toBe(true);
    if (d.ok) d.hold!.settle('alpha', 250, 0);
    const text = await registry.metrics();
    expect(text).toContain('llmgw_budget_used_ratio{budget="b_ml",scope="team",subject="ml",enforce="hard"} 0.25');
  });
});
