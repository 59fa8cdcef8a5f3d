// `ctl budgets set`'s flags: a change read wrongly would move a budget's
// amount or enforcement other than asked, or send an empty change that does
// nothing while saying it did.
import { describe, expect, it } from 'vitest';
import { KeyFlagError } from './access.js';
import { budgetChangeFrom } from './budget-change.js';

describe('ctl budgets set', () => {
  it.each([
    [{ tokens: '5000' }, { amount: 5000 }],
    [
      { usd: '12.5', soft: true },
      { amount: 12.5, enforce: 'soft' },
    ],
    [
      { hard: true, alertAt: '0.9' },
      { enforce: 'hard', alert_at: 0.9 },
    ],
  ])('reads %j', (flags, want) => {
    expect(budgetChangeFrom(flags)).toEqual(want);
  });

  it.each([
    [{}, /nothing to change/],
    [{ tokens: '1', usd: '1' }, /not both/],
    [{ usd: '0' }, /--usd: "0" is not a number above 0/],
    [{ soft: true, hard: true }, /--soft and --hard/],
    [{ alertAt: '1.5' }, /--alert-at: "1.5"/],
  ])('refuses %j, naming the flag', (flags, why) => {
    expect(() => budgetChangeFrom(flags)).toThrow(KeyFlagError);
    expect(() => budgetChangeFrom(flags)).toThrow(why);
  });
});
