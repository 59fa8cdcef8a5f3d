import { describe, expect, it } from 'vitest';
import { decideSpend, leaseWanted, periodOf, type BudgetRecord, type LeaseSnapshot } from './budgets.js';

const budget = (over: Partial<BudgetRecord> = {}): BudgetRecord => ({
  id: 'bud_1',
  scope: 'team',
  subject: 'ml',
  unit: 'tokens',
  period: 'day',
  amount: 1000,
  enforce: 'hard',
  alertAt: 1,
  createdAtMs: 0,
  createdBy: 't',
  ...over,
});
const lease = (over: Partial<LeaseSnapshot>): LeaseSnapshot => ({
  budget: budget(),
  granted: 100,
  used: 0,
  storeLeft: 800,
  leaseSize: 100,
  ...over,
});

describe('whether a request may spend, from the lease snapshot', () => {
  const cases: [string, LeaseSnapshot[], number[], boolean | number][] = [
    ['no budget applies', [], [], true],
    ['fits in the lease held', [lease({ used: 50 })], [50], true],
    ['past the lease, on credit of at most one lease while the store has more', [lease({ used: 90 })], [100], true],
    ['past the lease by more than one lease', [lease({ used: 90 })], [111], 0],
    ['past the lease with the store spent: refused', [lease({ used: 90, storeLeft: 0 })], [20], 0],
    ['within the lease with the store spent: still admitted', [lease({ used: 80, storeLeft: 0 })], [20], true],
    [
      'a soft budget never refuses',
      [lease({ budget: budget({ enforce: 'soft' }), used: 500, storeLeft: 0 })],
      [999],
      true,
    ],
    ['the second of two budgets refuses', [lease({}), lease({ granted: 0, used: 0, storeLeft: 0 })], [10, 1], 1],
    [
      'a request reserving nothing is refused once the lease and the store are spent',
      [lease({ used: 100, storeLeft: 0 })],
      [0],
      0,
    ],
    ['a request reserving nothing passes while credit is left', [lease({ used: 150 })], [0], true],
  ];
  for (const [name, leases, need, want] of cases)
    it(name, () => {
      const d = decideSpend(leases, need);
      if (want === true) expect(d).toEqual({ ok: true });
      else expect(d).toEqual({ ok: false, refusedBy: want });
    });

  it('asks for a lease again below half of one, covering any debt', () => {
    expect(leaseWanted({ granted: 100, used: 40, leaseSize: 100 })).toBe(0);
    expect(leaseWanted({ granted: 100, used: 60, leaseSize: 100 })).toBe(60);
    expect(leaseWanted({ granted: 100, used: 130, leaseSize: 100 })).toBe(130);
  });

  it('holds the overshoot to one lease: a plane admitting all it may spends at most granted plus one lease', () => {
    // The worst a plane can do between two syncs with the store spent: admit every request the decision lets through.
    let used = 0;
    const l = () => lease({ granted: 300, used, storeLeft: 1 });
    for (let i = 0; i < 10_000; i++) if (decideSpend([l()], [7]).ok) used += 7;
    expect(used).toBeLessThanOrEqual(300 + 100);
    expect(used, 'and it does spend its credit').toBeGreaterThan(300 + 90);
  });
});

describe('budget periods in UTC', () => {
  it('a day from midnight, a month from its first, December into January', () => {
    const t = Date.parse('2026-12-31T23:59:00Z');
    expect(periodOf('day', t)).toEqual({
      startMs: Date.parse('2026-12-31T00:00:00Z'),
      endMs: Date.parse('2027-01-01T00:00:00Z'),
    });
    expect(periodOf('month', t)).toEqual({
      startMs: Date.parse('2026-12-01T00:00:00Z'),
      endMs: Date.parse('2027-01-01T00:00:00Z'),
    });
  });
});
