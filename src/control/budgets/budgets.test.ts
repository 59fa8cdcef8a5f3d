import { describe, expect, it } from 'vitest';
import {
  decideAdmission,
  decideSpend,
  leaseWanted,
  periodOf,
  renewalWanted,
  type BudgetRecord,
  type LeaseSnapshot,
  type SpendOutcome,
} from './budgets.js';

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

// The failure these guard against: a plane whose lease ran dry before its background sync landed refused with
// LLMGW_BUDGET_EXCEEDED while the store still had room (a CI gateway refused after 711 of 2,000 tokens).
describe('what admission does with a request its lease cannot take', () => {
  const cases: [string, LeaseSnapshot[], number[], SpendOutcome][] = [
    ['fits: admitted, no renewal', [lease({ used: 50 })], [50], { kind: 'admit' }],
    ['fits on credit: admitted, no wait', [lease({ used: 90 })], [100], { kind: 'admit' }],
    [
      'dry here, the store had room: renew, then decide again',
      [lease({ used: 190, granted: 100 })],
      [20],
      { kind: 'renew', refusedBy: 0, renew: [0] },
    ],
    [
      'bigger than the lease and its credit, the store had room: renew (the renewal asks for enough)',
      [lease({ used: 0 })],
      [350],
      { kind: 'renew', refusedBy: 0, renew: [0] },
    ],
    [
      'dry here, the store had nothing left: exceeded, no wait',
      [lease({ used: 100, storeLeft: 0 })],
      [20],
      { kind: 'exceeded', refusedBy: 0 },
    ],
    [
      'dry here, never synced this period: renew (storeLeft 0 is unknown, not spent)',
      [lease({ granted: 0, used: 0, storeLeft: 0, unsynced: true })],
      [20],
      { kind: 'renew', refusedBy: 0, renew: [0] },
    ],
    [
      'one budget dry with room, another spent: exceeded by the spent one, no wait',
      [lease({ used: 190 }), lease({ used: 100, storeLeft: 0 })],
      [20, 20],
      { kind: 'exceeded', refusedBy: 1 },
    ],
    [
      'two budgets dry with room: both renewed',
      [lease({ used: 190 }), lease({ used: 10 }), lease({ used: 200, storeLeft: 5 })],
      [20, 20, 20],
      { kind: 'renew', refusedBy: 0, renew: [0, 2] },
    ],
    // Holds are upper bounds (a prompt's most tokens): requests running here hold room they will mostly give back,
    // and a request refused as exceeded while they run would have fitted once they settled.
    [
      'the store spent, but requests running here hold room it fits in: drain, then decide again',
      [lease({ used: 100, reserved: 60, storeLeft: 0 })],
      [50],
      { kind: 'drain', refusedBy: 0, drain: [0] },
    ],
    [
      'the store spent, and it would not fit even were every hold here given back: exceeded',
      [lease({ used: 100, reserved: 60, storeLeft: 0 })],
      [61],
      { kind: 'exceeded', refusedBy: 0 },
    ],
    [
      'one budget to renew and one to drain: renew first',
      [lease({ used: 100, reserved: 60, storeLeft: 0 }), lease({ used: 200 })],
      [50, 50],
      { kind: 'renew', refusedBy: 1, renew: [1] },
    ],
    [
      'a soft budget past its amount neither renews nor refuses',
      [lease({ budget: budget({ enforce: 'soft' }), used: 900, storeLeft: 0 })],
      [20],
      { kind: 'admit' },
    ],
  ];
  for (const [name, leases, need, want] of cases)
    it(name, () => {
      expect(decideAdmission(leases, need)).toEqual(want);
    });

  it('admits exactly what decideSpend admits, so the one-lease bound is the same', () => {
    for (const used of [0, 50, 99, 100, 150, 199, 200, 250])
      for (const storeLeft of [0, 1, 800])
        for (const n of [0, 1, 50, 100, 101, 200]) {
          const l = [lease({ used, storeLeft })];
          expect(decideAdmission(l, [n]).kind === 'admit', `used ${used} left ${storeLeft} need ${n}`).toBe(
            decideSpend(l, [n]).ok,
          );
        }
  });

  it('renews for a whole lease besides what the waiters need, and nothing while half a lease is held and none wait', () => {
    expect(renewalWanted({ held: 60, leaseSize: 100, waiting: 0 })).toBe(0);
    expect(renewalWanted({ held: 40, leaseSize: 100, waiting: 0 })).toBe(60);
    expect(renewalWanted({ held: 60, leaseSize: 100, waiting: 350 })).toBe(390);
    expect(renewalWanted({ held: 0, leaseSize: 100, waiting: 20 })).toBe(120);
    expect(renewalWanted({ held: 500, leaseSize: 100, waiting: 20 })).toBe(0);
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
