// Budgets shared by two control planes through one store, on SQLite and
// (LLMGW_TEST_POSTGRES) Postgres: each plane spends leases it took, and the
// store must never lease the same room twice. A plane that leased it twice
// would let a hard budget be overshot by far more than one lease per plane.
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { storeBackends } from '../../../test/support/postgres.js';
import { Store, type StoreLocation } from '../store/index.js';
import { StoredBudgetBook } from './book.js';
import { BudgetLeases } from './leases.js';
import { budgetRecord, TEAM_KEY } from '../../../test/support/budget-records.js';

const backends = storeBackends('llmgw-budgets');

const NOW = Date.parse('2026-12-06T10:00:00Z');
const key = TEAM_KEY;
const budget = budgetRecord({ amount: 10_000, alertAt: 0.5 });

for (const backend of backends) {
  describe.skipIf(backend.skip !== '')(`a hard budget shared by two control planes on ${backend.name}`, () => {
    let location: StoreLocation;
    let teardown: () => Promise<void>;
    beforeAll(async () => {
      ({ location, teardown } = await backend.setup());
    });
    afterAll(async () => {
      await teardown();
    });

    it('holds under concurrent requests on both: spent ≤ amount + one lease per plane, refusals name the reset', async () => {
      const stores = [await Store.open({ location }), await Store.open({ location })];
      const alerts: string[] = [];
      try {
        await new StoredBudgetBook(stores[0]!.connection).create(budget);
        const planes = stores.map(
          (s) =>
            new BudgetLeases({
              book: new StoredBudgetBook(s.connection),
              prices: { cost: () => undefined },
              now: () => NOW,
              logger: pino({ level: 'silent' }),
              events: { record: (e) => void alerts.push(e.message) },
              leaseFraction: 0.05,
              syncIntervalMs: 0,
              // A dry lease waits for its renewal however slow a loaded machine makes the store: no refusal by the clock.
              renewWaitMs: 600_000,
            }),
        );
        for (const p of planes) await p.reload();
        const lease = budget.amount * 0.05;
        let spent = 0;
        let refusals = 0;
        let reset = '';
        // Streams on both planes at once: each admitted one runs a few turns and uses what it reserved, or less.
        const stream = async (plane: BudgetLeases, i: number): Promise<void> => {
          for (let turn = 0; turn < 40; turn++) {
            const d = await plane.admit(key, 'alpha', 20, 80);
            if (!d.ok && d.unsettled) {
              // Not a refusal of the budget: this plane's sync failed (two connections in one process on one SQLite
              // file can find each other holding its lock), and a client retries such a 503.
              await new Promise((r) => setTimeout(r, 1));
              continue;
            }
            if (!d.ok) {
              refusals++;
              reset = new Date(d.resetAtMs).toISOString();
              expect(d.budget).toBe("team ml's hard budget bud_ml of 10000 tokens per day");
              expect(d.retryAfterS).toBe(14 * 3600);
              await new Promise((r) => setTimeout(r, 1));
              continue;
            }
            await new Promise((r) => setImmediate(r));
            const used = 20 + ((i + turn) % 81);
            d.hold!.settle('alpha', 20, used - 20);
            spent += used;
            if (turn % 5 === 0) await plane.sync();
          }
        };
        await Promise.all(planes.flatMap((p, pi) => Array.from({ length: 100 }, (_, i) => stream(p, pi * 100 + i))));
        for (const p of planes) await p.close();
        expect(refusals, 'the budget ran out and refused').toBeGreaterThan(0);
        expect(reset, 'refusals name the next UTC midnight').toBe('2026-12-07T00:00:00.000Z');
        expect(
          spent,
          `spent ${spent} of ${budget.amount}: at most one lease (${lease}) over per plane`,
        ).toBeLessThanOrEqual(budget.amount + 2 * lease);
        expect(spent, 'and most of the budget was spendable').toBeGreaterThan(budget.amount * 0.9);
        const row = await new StoredBudgetBook(stores[0]!.connection).spendOf([
          { budgetId: budget.id, periodStartMs: Date.parse('2026-12-06T00:00:00Z') },
        ]);
        expect(row.get(budget.id)?.spent, 'the store holds what both planes spent').toBe(spent);
        expect(alerts.length, 'the alert at half the amount is written once, by one plane').toBe(1);
      } finally {
        for (const s of stores) await s.close();
      }
    });
  });
}
