// The true-up of money budgets for models priced by GPU-hours: guards
// against a budget keeping the estimate it was charged at request time
// (spend drifting from the usage rows' cost_usd), against a replica's tokens
// being trued up at another replica's rate, and against one interval's
// estimates being trued up twice.
import { describe, expect, it } from 'vitest';
import { GpuOwed, type TrueRate } from './gpu-owed.js';

describe('GpuOwed', () => {
  const cases: {
    why: string;
    owed: [model: string, replicaId: string | undefined, tokens: number, usd: number][];
    rate: TrueRate;
    spentAfter: number;
  }[] = [
    {
      why: 'an estimate below the true rate: the difference is charged',
      owed: [['m', 'r1', 1000, 1]],
      rate: () => 0.002,
      spentAfter: 1 + 1,
    },
    {
      why: 'an estimate above the true rate: the difference comes back',
      owed: [['m', 'r1', 1000, 3]],
      rate: () => 0.001,
      spentAfter: 3 - 2,
    },
    {
      why: 'nothing measured before the first interval: the estimate was 0, the whole cost is charged now',
      owed: [['m', undefined, 500, 0]],
      rate: () => 0.01,
      spentAfter: 5,
    },
    {
      why: 'each replica at its own rate (an H100 and an A10 of one model)',
      owed: [
        ['m', 'h100', 1000, 0],
        ['m', 'a10', 1000, 0],
      ],
      rate: (_m, r) => (r === 'h100' ? 0.004 : 0.001),
      spentAfter: 5,
    },
    {
      why: 'a rate of null (the usage row is charged nothing): the estimate comes back whole',
      owed: [['m', 'gone', 100, 0.5]],
      rate: () => null,
      spentAfter: 0,
    },
  ];
  it.each(cases)('$why', ({ owed, rate, spentAfter }) => {
    const lease = { spent: 0 };
    const book = new GpuOwed<typeof lease>();
    for (const [model, replicaId, tokens, usd] of owed) {
      lease.spent += usd;
      book.add(lease, model, replicaId, tokens, usd);
    }
    book.take().trueUp(rate);
    expect(lease.spent).toBeCloseTo(spentAfter, 12);
  });

  it('trues up each interval once: what is added after take waits for the next', () => {
    const lease = { spent: 0 };
    const book = new GpuOwed<typeof lease>();
    book.add(lease, 'm', 'r', 100, 0);
    const first = book.take();
    book.add(lease, 'm', 'r', 10, 0);
    first.trueUp(() => 1);
    expect(lease.spent).toBe(100);
    book.take().trueUp(() => 1);
    expect(lease.spent).toBe(110);
    book.take().trueUp(() => 1);
    expect(lease.spent, 'nothing left to true up').toBe(110);
  });
});
