// A plane whose lease runs dry while the store still has room, on a real
// SQLite book whose syncs the test holds back and lets go (a busy store's
// lag, with no clock in it). The failure this guards against: such a plane
// refused with LLMGW_BUDGET_EXCEEDED until its background sync landed (a CI
// gateway on a busy SQLite store was refused after 711 of 2,000 tokens, its
// lease 40), though the budget was not spent.
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { storeBackends } from '../../../test/support/postgres.js';
import type { BudgetDecision } from '../../gateway/ports/index.js';
import { Store } from '../store/index.js';
import { StoredBudgetBook, type BudgetBook, type SyncOp, type SyncResult } from './book.js';
import type { BudgetRecord } from './budgets.js';
import { BudgetLeases } from './leases.js';
import { budgetRecord, TEAM_KEY } from '../../../test/support/budget-records.js';

const NOW = Date.parse('2026-12-06T10:00:00Z');
const DAY = Date.parse('2026-12-06T00:00:00Z');
const key = TEAM_KEY;
const budget = (amount: number): BudgetRecord => budgetRecord({ amount });

/** A book whose syncs wait while held back (a store busy with others), or fail while `down` (unreachable). */
class LaggingBook implements BudgetBook {
  /** Syncs asked of it, held back or not. */
  syncs = 0;
  down = false;
  private gate: Promise<void> | null = null;
  private open: (() => void) | null = null;
  constructor(private readonly inner: BudgetBook) {}
  holdBack(): void {
    this.gate ??= new Promise((r) => (this.open = r));
  }
  /** Lets every held sync through; later ones pass until holdBack again. */
  release(): void {
    const open = this.open;
    this.gate = this.open = null;
    open?.();
  }
  async sync(op: SyncOp): Promise<SyncResult> {
    this.syncs++;
    if (this.gate) await this.gate;
    if (this.down) throw new Error('connect ECONNREFUSED 127.0.0.1:5432');
    return this.inner.sync(op);
  }
  list = () => this.inner.list();
  create = (b: BudgetRecord) => this.inner.create(b);
  update = (b: BudgetRecord) => this.inner.update(b);
  delete = (id: string) => this.inner.delete(id);
  spendOf = (p: readonly { budgetId: string; periodStartMs: number }[]) => this.inner.spendOf(p);
}

/** Whether a decision came at once or is still awaited after the event loop has run its queued work. */
async function pending(d: BudgetDecision | Promise<BudgetDecision>): Promise<boolean> {
  if (!(d instanceof Promise)) return false;
  let done = false;
  void d.then(() => (done = true));
  for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
  return !done;
}

const [sqlite] = storeBackends('llmgw-budget-renew');

describe('a plane whose lease ran dry while the store had room, on SQLite', () => {
  let store: Store;
  let book: LaggingBook;
  let teardown: () => Promise<void>;
  let planes: BudgetLeases[];
  beforeEach(async () => {
    const { location, teardown: t } = await sqlite!.setup();
    teardown = t;
    store = await Store.open({ location });
    book = new LaggingBook(new StoredBudgetBook(store.connection));
    planes = [];
  });
  afterEach(async () => {
    book.release();
    for (const p of planes) await p.close();
    await store.close();
    await teardown();
  });

  async function plane(amount: number, o: { leaseFraction?: number; renewWaitMs?: number } = {}) {
    await book.create(budget(amount));
    const p = new BudgetLeases({
      book,
      prices: { cost: () => undefined },
      now: () => NOW,
      logger: pino({ level: 'silent' }),
      leaseFraction: o.leaseFraction ?? 0.02,
      syncIntervalMs: 0,
      // No refusal by the clock unless a test asks for one.
      renewWaitMs: o.renewWaitMs ?? 600_000,
    });
    planes.push(p);
    await p.reload();
    return p;
  }

  const storeRow = async () => (await book.spendOf([{ budgetId: 'bud_ml', periodStartMs: DAY }])).get('bud_ml')!;

  it('replays the CI case: nothing is refused before the store is spent, and the first refusal is final', async () => {
    const p = await plane(2000);
    let spent = 0;
    let waited = 0;
    let refusal: BudgetDecision | undefined;
    for (let i = 0; i < 400 && !refusal; i++) {
      // Every sync lags: held until the test lets it go, and only once a request waits on it.
      book.holdBack();
      const d = p.admit(key, 'alpha', 4, 10);
      if (await pending(d)) {
        waited++;
        book.release();
      }
      const decided = await d;
      if (!decided.ok) {
        refusal = decided;
        break;
      }
      decided.hold!.settle('alpha', 4, 10);
      spent += 14;
      // Before this fix, the plane refused here once it had spent its lease and one on credit (80 tokens).
    }
    book.release();
    expect(waited, 'requests that found the lease dry waited for its renewal').toBeGreaterThan(0);
    expect(refusal, 'refused once the budget was spent').toBeDefined();
    expect(refusal).toMatchObject({ ok: false, budget: "team ml's hard budget bud_ml of 2000 tokens per day" });
    expect((refusal as { unsettled?: boolean }).unsettled, 'as spent (429), not as unsettled').toBeFalsy();
    expect(spent, 'no refusal before the budget was spent').toBeGreaterThan(2000 - 14);
    expect(spent, 'and at most one lease over it').toBeLessThanOrEqual(2000 + 40);
    await p.sync();
    const row = await storeRow();
    expect(row.committed, 'the store had nothing left to lease when it refused').toBeGreaterThanOrEqual(2000);
    expect(row.spent).toBe(spent);
  });

  it('many requests finding the lease dry share one renewal, and all are admitted when it lands', async () => {
    const p = await plane(2000);
    book.holdBack();
    const before = book.syncs;
    // Twenty at once on a lease of 40 and 40 of credit: five fit, the rest find it dry.
    const all = Array.from({ length: 20 }, () => p.admit(key, 'alpha', 4, 10));
    const waiting = all.filter((d) => d instanceof Promise);
    expect(waiting.length, 'those past the lease and its credit wait').toBe(15);
    for (const d of waiting) expect(await pending(d), 'held with the store').toBe(true);
    // The background sync kicked at half a lease, and the one renewal every waiter shares: not one per waiter.
    expect(book.syncs - before).toBeLessThanOrEqual(2);
    book.release();
    const decided = await Promise.all(all);
    expect(
      decided.map((d) => d.ok),
      'all admitted once the renewal granted room for them',
    ).toEqual(Array(20).fill(true));
    expect(book.syncs - before, 'the renewal asked for enough for every waiter at once').toBeLessThanOrEqual(3);
  });

  it('a request bigger than a lease and its credit is admitted while the store has room for it', async () => {
    const p = await plane(2000);
    const d = p.admit(key, 'alpha', 100, 200);
    expect(d instanceof Promise, 'it waits for a renewal sized for it').toBe(true);
    expect(await d).toMatchObject({ ok: true });
  });

  it('refuses as exceeded when the renewal says another plane took the rest', async () => {
    const p = await plane(100, { leaseFraction: 0.5 });
    // Another plane leases all that is left: this one still believes the store has 50.
    await book.sync({
      budgetId: 'bud_ml',
      periodStartMs: DAY,
      amount: 100,
      spentDelta: 0,
      debt: 0,
      want: 50,
      giveBack: 0,
    });
    let admitted = 0;
    let last: BudgetDecision;
    for (;;) {
      last = await p.admit(key, 'alpha', 0, 10);
      if (!last.ok) break;
      last.hold!.settle('alpha', 0, 10);
      admitted++;
    }
    expect(last).toMatchObject({ ok: false, retryAfterS: 14 * 3600 });
    expect((last as { unsettled?: boolean }).unsettled).toBeFalsy();
    // Its lease of 50 and one of credit while it thought the store had more: the bound.
    expect(admitted).toBe(10);
  });

  it('refuses as unsettled (not exceeded) when the renewal does not come in time', async () => {
    const p = await plane(2000, { renewWaitMs: 1 });
    // The store never answers from here on: a held sync stays held until the test ends.
    book.holdBack();
    let d: BudgetDecision;
    do {
      d = await p.admit(key, 'alpha', 4, 10);
      if (d.ok) d.hold!.settle('alpha', 4, 10);
    } while (d.ok);
    expect(d).toMatchObject({
      ok: false,
      unsettled: true,
      retryAfterS: 1,
      budget: "team ml's hard budget bud_ml of 2000 tokens per day",
    });
  });

  it('refuses as unsettled at once when the store cannot be reached, and admits again once it can', async () => {
    const p = await plane(2000);
    book.down = true;
    let d: BudgetDecision;
    let admitted = 0;
    do {
      d = await p.admit(key, 'alpha', 4, 10);
      if (d.ok) {
        d.hold!.settle('alpha', 4, 10);
        admitted++;
      }
    } while (d.ok);
    expect(d).toMatchObject({ ok: false, unsettled: true });
    expect(admitted * 14, 'it spent what it held and one lease on credit').toBeGreaterThan(40);
    book.down = false;
    expect(await p.admit(key, 'alpha', 4, 10)).toMatchObject({ ok: true });
  });

  it('a lease never synced this period (the store was down at start) renews rather than refusing as exceeded', async () => {
    book.down = true;
    const p = await plane(2000);
    book.down = false;
    const d = p.admit(key, 'alpha', 4, 10);
    expect(d instanceof Promise).toBe(true);
    expect(await d).toMatchObject({ ok: true });
  });
});
