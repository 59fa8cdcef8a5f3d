// One control plane's budget leases over a book in memory that holds one
// hard budget (budgetRecord's), leased whole: the store has nothing more, so
// what this plane holds is all there is, and nothing syncs in the background.
// For the tests of what a plane holds, waits for and gives back; in one
// place so that the drain and the settlement tests build the same plane.
import pino from 'pino';
import { BudgetLeases, MemoryBudgetBook } from '../../src/control/budgets/index.js';
import { budgetRecord } from './budget-records.js';

/** The plane, reloaded; a request that finds the lease dry waits up to `renewWaitMs` (absent = 10 minutes: no test sees it end). */
export async function wholeBudgetPlane(amount: number, renewWaitMs = 600_000): Promise<BudgetLeases> {
  const book = new MemoryBudgetBook();
  await book.create(budgetRecord({ amount }));
  const plane = new BudgetLeases({
    book,
    prices: { cost: () => undefined },
    now: () => Date.parse('2026-12-06T10:00:00Z'),
    logger: pino({ level: 'silent' }),
    leaseFraction: 1,
    syncIntervalMs: 0,
    renewWaitMs,
  });
  await plane.reload();
  return plane;
}
