// `llmgw ctl budgets set ID`: change a budget's amount, enforcement or alert
// threshold in place (its period's spend and leases stay). Apart from
// money.ts so the flag rules of a change read together with their test.
import type { BudgetChange } from '../api/index.js';
import { KeyFlagError } from './access.js';
import { type CtlContext, EXIT } from './context.js';
import { amountText } from './money.js';

export interface BudgetChangeFlags {
  tokens?: string;
  usd?: string;
  soft?: boolean;
  hard?: boolean;
  alertAt?: string;
}

/** The request for `budgets set`; throws KeyFlagError naming the flag. A budget keeps its unit: --tokens or --usd only restates it. */
export function budgetChangeFrom(o: BudgetChangeFlags): BudgetChange {
  const change: BudgetChange = {};
  if (o.tokens !== undefined && o.usd !== undefined)
    throw new KeyFlagError('name the new amount with one of --tokens N or --usd AMOUNT, not both');
  const raw = o.tokens ?? o.usd;
  if (raw !== undefined) {
    const amount = Number(raw);
    if (!Number.isFinite(amount) || amount <= 0)
      throw new KeyFlagError(`${o.tokens !== undefined ? '--tokens' : '--usd'}: "${raw}" is not a number above 0`);
    change.amount = amount;
  }
  if (o.soft && o.hard) throw new KeyFlagError('--soft and --hard: name one');
  if (o.soft) change.enforce = 'soft';
  if (o.hard) change.enforce = 'hard';
  if (o.alertAt !== undefined) {
    const a = Number(o.alertAt);
    if (!(a > 0 && a <= 1))
      throw new KeyFlagError(`--alert-at: "${o.alertAt}" is not a fraction above 0 and at most 1`);
    change.alert_at = a;
  }
  if (Object.keys(change).length === 0)
    throw new KeyFlagError('nothing to change: give --tokens, --usd, --soft, --hard or --alert-at');
  return change;
}

export async function setBudget(
  ctx: CtlContext,
  id: string,
  change: BudgetChange,
  o: BudgetChangeFlags,
): Promise<number> {
  const { budgets } = await ctx.client.budgets();
  const old = budgets.find((b) => b.id === id);
  // The unit is the budget's own: --usd on a token budget would read dollars as tokens.
  if (old && change.amount !== undefined && (o.tokens !== undefined) !== (old.unit === 'tokens')) {
    ctx.warn(`budget ${id} counts ${old.unit === 'tokens' ? 'tokens: use --tokens' : 'US dollars: use --usd'}`);
    return EXIT.usage;
  }
  const b = await ctx.client.setBudget(id, change);
  if (ctx.json) ctx.out.json(b);
  else
    ctx.out.line(
      `budget ${b.id}: ${b.enforce} ${amountText(b.unit, b.amount)} per ${b.period} on ${b.scope} ${b.subject}` +
        (b.enforce === 'soft' || b.alert_at < 1 ? `, alert at ${Math.round(b.alert_at * 100)}%` : ''),
    );
  return EXIT.ok;
}
