// One control plane's budget leases over a book in memory that holds one
// hard budget (budgetRecord's), leased whole: the store has nothing more, so
// what this plane holds is all there is, and nothing syncs in the background.
// For the tests of what a plane holds, waits for and gives back; in one
// place so that the drain, settlement and two-plane tests build the same plane.
import pino from 'pino';
import { BudgetLeases, MemoryBudgetBook, type BudgetBook } from '../../src/control/budgets/index.js';
import { budgetRecord } from './budget-records.js';

/** A plane over `book` leasing `leaseFraction` of each budget at a time, reloaded; nothing syncs in the background. */
export async function budgetPlane(
  book: BudgetBook,
  { leaseFraction, renewWaitMs = 600_000 }: { leaseFraction: number; renewWaitMs?: number },
): Promise<BudgetLeases> {
  const plane = new BudgetLeases({
    book,
    prices: { cost: () => undefined },
    now: () => Date.parse('2026-12-06T10:00:00Z'),
    logger: pino({ level: 'silent' }),
    leaseFraction,
    syncIntervalMs: 0,
    renewWaitMs,
  });
  await plane.reload();
  return plane;
}

/** The plane, reloaded; a request that finds the lease dry waits up to `renewWaitMs` (absent = 10 minutes: no test sees it end). */
export async function wholeBudgetPlane(amount: number, renewWaitMs?: number): Promise<BudgetLeases> {
  const book = new MemoryBudgetBook();
  await book.create(budgetRecord({ amount }));
  return budgetPlane(book, { leaseFraction: 1, ...(renewWaitMs === undefined ? {} : { renewWaitMs }) });
}
