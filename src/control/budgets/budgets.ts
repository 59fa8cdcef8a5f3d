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
  /** Of `used`, what requests still running here hold: room again once they settle, less what they spend; absent = 0. */
  readonly reserved?: number;
  /** What the store had left to lease at this plane's last sync; ≤ 0 = nothing more is coming. */
  readonly storeLeft: number;
  /** How much a lease is: also the most this plane may spend beyond what it holds, on credit while the store has more. */
  readonly leaseSize: number;
  /** True: not synced with the store this period yet, so storeLeft is unknown (not 0); absent = synced. */
  readonly unsynced?: boolean;
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
  for (let i = 0; i < leases.length; i++) if (!fits(leases[i]!, need[i] ?? 0)) return { ok: false, refusedBy: i };
  return { ok: true };
}

/** Whether a request needing `n` fits what this plane may still spend of one budget (a soft one always fits). */
function fits(l: LeaseSnapshot, n: number): boolean {
  if (l.budget.enforce !== 'hard') return true;
  // What it may still spend: the lease it holds, and one more on credit while the store had more to give.
  const room = l.granted - l.used + (l.storeLeft > 0 ? l.leaseSize : 0);
  // A request reserving nothing needs some room left, as one that reserves must fit in it.
  return n > 0 ? n <= room : room > 0;
}

/**
 * What admission does with a request, from the same snapshot: admit it;
 * refuse it as exceeded, when a budget it does not fit is known spent
 * (synced, and the store had nothing left to lease) and would not fit even
 * were every request running here to spend nothing of what it holds; when
 * every budget it does not fit is dry here only (the store had room at the
 * last sync, or was never asked this period), renew those leases and
 * decide again once the renewal is back; or, when a budget's store is
 * spent but requests running here hold room the request would fit in
 * (holds are upper bounds, and most come back in part), drain: wait for a
 * hold of those leases to settle and decide again. `renew` and `drain`
 * list them, `refusedBy` is the first, named if the wait ends first.
 */
export type SpendOutcome =
  | { readonly kind: 'admit' }
  | { readonly kind: 'exceeded'; readonly refusedBy: number }
  | { readonly kind: 'renew'; readonly refusedBy: number; readonly renew: readonly number[] }
  | { readonly kind: 'drain'; readonly refusedBy: number; readonly drain: readonly number[] };

/** Every lease has room: one shared outcome, as this is every admitted request's. */
const ADMIT: SpendOutcome = Object.freeze({ kind: 'admit' });

export function decideAdmission(leases: readonly LeaseSnapshot[], need: readonly number[]): SpendOutcome {
  let renew: number[] | null = null;
  let drain: number[] | null = null;
  for (let i = 0; i < leases.length; i++) {
    const l = leases[i]!;
    const n = need[i] ?? 0;
    if (fits(l, n)) continue;
    if (l.unsynced || l.storeLeft > 0) (renew ??= []).push(i);
    // Spent as far as the store can tell: only what requests running here hold can come back.
    else if (fitsDrained(l, n)) (drain ??= []).push(i);
    else return { kind: 'exceeded', refusedBy: i };
  }
  // A renewal first: it may grant room, and no hold need come back.
  if (renew !== null) return { kind: 'renew', refusedBy: renew[0]!, renew };
  return drain === null ? ADMIT : { kind: 'drain', refusedBy: drain[0]!, drain };
}

/** Whether `n` would fit a hard budget's lease, with no credit, once every request running here gave back its hold. */
function fitsDrained(l: LeaseSnapshot, n: number): boolean {
  const reserved = l.reserved ?? 0;
  if (reserved <= 0) return false;
  const room = l.granted - (l.used - reserved);
  return n > 0 ? n <= room : room > 0;
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

/**
 * The new lease a sync asks for, its debt already committed: `held` is
 * what the plane holds then (≥ 0) and `waiting` what requests waiting on
 * this renewal need in all (0 = none wait). Nothing while more than half a
 * lease is held and none wait; else enough to hold a whole lease besides
 * what the waiters need, so that a request bigger than a lease is not
 * refused while the store has room for it. Taking more never loosens the
 * bound: the store grants only what is left of the amount.
 */
export function renewalWanted(s: { held: number; leaseSize: number; waiting: number }): number {
  if (s.waiting <= 0 && s.held >= s.leaseSize / 2) return 0;
  return Math.max(0, s.leaseSize + Math.max(0, s.waiting) - s.held);
}
