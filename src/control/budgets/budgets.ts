// Budgets and the decision whether a request may spend: pure functions over
// a snapshot of this control plane's leases, no I/O, table-tested. A budget
// caps a team or a key in tokens or US dollars per UTC day or month. Each
// control plane spends leases it took from the store (leases.ts); the store
// never hears of a single request.

export type BudgetScope = 'team' | 'key';
export type BudgetUnit = 'tokens' | 'usd';
export type BudgetPeriod = 'day' | 'month';

export interface BudgetRecord {
  readonly id: string;
  readonly scope: BudgetScope;
  /** The team's name or the key's id. */
  readonly subject: string;
  readonly unit: BudgetUnit;
  readonly period: BudgetPeriod;
  readonly amount: number;
  /** hard: refused past the amount; soft: only an event and a metric at alertAt. */
  readonly enforce: 'hard' | 'soft';
  /** Fraction of the amount at which the event is written, 0 < alertAt ≤ 1. */
  readonly alertAt: number;
  readonly createdAtMs: number;
  readonly createdBy: string;
}

/** The UTC period holding `nowMs`: its first and its next period's first instant, epoch ms. */
export function periodOf(period: BudgetPeriod, nowMs: number): { startMs: number; endMs: number } {
  const d = new Date(nowMs);
  if (period === 'day') {
    const startMs = Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate());
    return { startMs, endMs: startMs + 86_400_000 };
  }
  return {
    startMs: Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1),
    endMs: Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1),
  };
}

/** A budget in words, for a refusal: "team ml's hard budget of 1000000 tokens per day". */
export function budgetWords(b: BudgetRecord): string {
  const whose = b.scope === 'team' ? `team ${b.subject}'s` : `key ${b.subject}'s`;
  const amount = b.unit === 'usd' ? `$${b.amount.toFixed(2)}` : `${b.amount} tokens`;
  return `${whose} ${b.enforce} budget ${b.id} of ${amount} per ${b.period}`;
}

/** One budget's lease on this control plane in the current period, as admission reads it. */
export interface LeaseSnapshot {
  readonly budget: BudgetRecord;
  /** What this plane took from the store this period (leases, and debts the store has absorbed). */
  readonly granted: number;
  /** Spent here (settled) plus reserved by requests still running here. */
  readonly used: number;
  /** What the store had left to lease at this plane's last sync; ≤ 0 = nothing more is coming. */
  readonly storeLeft: number;
  /** How much a lease is: also the most this plane may spend beyond what it holds, on credit while the store has more. */
  readonly leaseSize: number;
}

export type SpendDecision = { readonly ok: true } | { readonly ok: false; readonly refusedBy: number };

/**
 * Whether a request that may cost `need[i]` against each budget i (tokens
 * or dollars, in that budget's unit) may run: every hard budget must have
 * it in its lease, or (the renewal not back yet) on credit of at most one
 * lease while the store had more to give. Soft budgets never refuse.
 * `refusedBy` is the index of the first hard budget that refuses.
 *
 * Hence the bound: a plane's use beyond what the store granted it is at
 * most one lease, and the store grants nothing past the amount, so a
 * budget is overshot by at most one lease per control plane.
 */
export function decideSpend(leases: readonly LeaseSnapshot[], need: readonly number[]): SpendDecision {
  for (let i = 0; i < leases.length; i++) {
    const l = leases[i]!;
    if (l.budget.enforce !== 'hard') continue;
    const n = need[i] ?? 0;
    // What it may still spend: the lease it holds, and one more on credit while the store had more to give.
    const room = l.granted - l.used + (l.storeLeft > 0 ? l.leaseSize : 0);
    // A request reserving nothing needs some room left, as one that reserves must fit in it.
    if (n > 0 ? n <= room : room > 0) continue;
    return { ok: false, refusedBy: i };
  }
  return { ok: true };
}

/**
 * How much to ask the store for at a sync: enough to hold a whole lease
 * again, plus any debt run up on credit; 0 when this plane still holds
 * more than half a lease.
 */
export function leaseWanted(s: { granted: number; used: number; leaseSize: number }): number {
  const held = s.granted - s.used;
  if (held >= s.leaseSize / 2) return 0;
  return s.leaseSize - held;
}
