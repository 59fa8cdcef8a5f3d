// Budgets enforced from leases: the BudgetGate the gateway asks on every
// request, answering from memory. Each control plane takes a lease of N
// tokens or dollars per budget from the store, spends it locally, and
// renews it in the background (a sync every interval, and one kicked off as
// soon as less than half a lease is left); a lease left when the period ends
// or the plane closes goes back. A request that finds its lease dry while
// the store may still have room waits, bounded, for a renewal of that lease
// (one in flight per budget, shared by every waiter) rather than being
// refused as if the budget were spent; one that finds the store spent while
// requests running here hold room it would fit in waits, as bounded, for
// them to give back what they held past their use. The decision itself is
// decideAdmission, pure; the leases and holds are lease.ts.
import type { Logger } from 'pino';
import { Counter, Gauge, type Registry } from 'prom-client';
import type { ApiKeyRecord, BudgetDecision, BudgetGate } from '../../gateway/ports/index.js';
import type { EventSink } from '../events/index.js';
import type { BudgetBook } from './book.js';
import { budgetWords, decideAdmission, periodOf, renewalWanted, type SpendOutcome } from './budgets.js';
import { GpuOwed, type GpuRateSource, type OwedInterval } from './gpu-owed.js';
import { Hold, Lease, type HoldPricing } from './lease.js';

export interface Prices {
  /** US dollars for these tokens of `model`; undefined = it has no price (money budgets count it as free). */
  cost(model: string, promptTokens: number, completionTokens: number): number | undefined;
}

export interface BudgetLeasesOptions {
  book: BudgetBook;
  prices: Prices;
  now: () => number;
  logger: Logger;
  events?: EventSink;
  registry?: Registry;
  /** A lease as a fraction of the budget's amount (also the most a plane may overshoot by). Default 0.02. */
  leaseFraction?: number;
  /** How often every budget is synced with the store, ms; 0 = never on a timer (call sync()). Default 1000. */
  syncIntervalMs?: number;
  /**
   * How long a request whose lease ran dry (the store having had room) waits
   * for the lease's renewal before it is refused as unsettled (503), ms;
   * 0 = it does not wait (refused at once, the renewal still started).
   * Default BUDGET_RENEW_WAIT_MS.
   */
  renewWaitMs?: number;
}

/** budget_renew_wait's default: a sync on a healthy store takes milliseconds, on a busy SQLite file a few hundred. */
export const BUDGET_RENEW_WAIT_MS = 500;

const NO_BUDGET: BudgetDecision = { ok: true, hold: null };

export class BudgetLeases implements BudgetGate, HoldPricing {
  private leases = new Map<string, Lease>();
  private byKey = new Map<string, Lease[]>();
  private byTeam = new Map<string, Lease[]>();
  /** A key's own leases and its team's in one list, made once per key (and team) rather than on every request. */
  private both = new Map<string, { team: string; leases: Lease[] }>();
  private readonly leaseFraction: number;
  private timer: NodeJS.Timeout | null = null;
  private syncing: Promise<void> = Promise.resolve();
  private kicked = false;
  private failing = false;
  private readonly refused?: Counter<'budget'>;
  private readonly unsettled?: Counter<'budget'>;
  private readonly renewWaitMs: number;
  /** The GPU meter's rates, for models without a token price (gpu-owed.ts); null = no meter: such models are free. */
  private gpuRates: GpuRateSource | null = null;
  private readonly owed = new GpuOwed<Lease>();

  constructor(private readonly o: BudgetLeasesOptions) {
    this.leaseFraction = o.leaseFraction ?? 0.02;
    this.renewWaitMs = o.renewWaitMs ?? BUDGET_RENEW_WAIT_MS;
    const interval = o.syncIntervalMs ?? 1000;
    if (interval > 0) {
      this.timer = setInterval(() => void this.sync(), interval);
      this.timer.unref();
    }
    if (o.registry) {
      this.refused = new Counter({
        name: 'llmgw_budget_refused_total',
        help: 'Requests refused with 429 by a hard budget, per budget id',
        labelNames: ['budget'],
        registers: [o.registry],
      });
      this.unsettled = new Counter({
        name: 'llmgw_budget_unsettled_total',
        help: 'Requests refused with 503 because their lease of a hard budget ran dry and neither the store renewed it nor requests running here gave back what they held within budget_renew_wait, per budget id; the budget was not known to be spent',
        labelNames: ['budget'],
        registers: [o.registry],
      });
      // Read through `self` at each scrape: reload() replaces the map, and a map captured here would stay the empty first one.
      // eslint-disable-next-line @typescript-eslint/no-this-alias
      const self = this;
      new Gauge({
        name: 'llmgw_budget_used_ratio',
        help: "What each budget's current period spent over its amount (the store's sum, plus this plane's unreported use); 1 = spent",
        labelNames: ['budget', 'scope', 'subject', 'enforce'],
        registers: [o.registry],
        collect() {
          this.reset();
          for (const l of self.leases.values())
            this.set(
              { budget: l.budget.id, scope: l.budget.scope, subject: l.budget.subject, enforce: l.budget.enforce },
              (l.storeSpent + l.spent - l.reportedSpent) / l.budget.amount,
            );
        },
      });
    }
  }

  /** Reads the budgets again (made, changed or deleted here or on another plane), keeping the leases of those that stay. */
  async reload(): Promise<void> {
    const budgets = await this.o.book.list();
    const now = this.o.now();
    const next = new Map<string, Lease>();
    for (const b of budgets) {
      const size = Math.max(b.amount * this.leaseFraction, Number.MIN_VALUE);
      const old = this.leases.get(b.id);
      if (old && old.budget.period === b.period) {
        old.budget = b;
        old.leaseSize = size;
        next.set(b.id, old);
      } else {
        const p = periodOf(b.period, now);
        next.set(b.id, new Lease(b, p.startMs, p.endMs, size));
      }
    }
    const byKey = new Map<string, Lease[]>();
    const byTeam = new Map<string, Lease[]>();
    for (const l of next.values()) {
      const index = l.budget.scope === 'key' ? byKey : byTeam;
      const list = index.get(l.budget.subject) ?? [];
      list.push(l);
      index.set(l.budget.subject, list);
    }
    this.leases = next;
    this.byKey = byKey;
    this.byTeam = byTeam;
    this.both = new Map();
    await this.sync();
  }

  cost(model: string, promptTokens: number, completionTokens: number): number | undefined {
    return this.o.prices.cost(model, promptTokens, completionTokens);
  }

  /** From now on a model without a token price is charged the meter's estimate, trued up through takeGpuOwed. */
  useGpuRates(rates: GpuRateSource): void {
    this.gpuRates = rates;
  }

  /** The estimates charged since the last call, for the meter to true up once it has priced the interval. */
  takeGpuOwed(): OwedInterval {
    return this.owed.take();
  }

  /** What money budgets are charged: the token price, else the GPU meter's estimate (a replica's when named). */
  spendCost(model: string, promptTokens: number, completionTokens: number, replicaId?: string): number | undefined {
    const priced = this.o.prices.cost(model, promptTokens, completionTokens);
    if (priced !== undefined || this.gpuRates === null) return priced;
    return (promptTokens + completionTokens) * this.gpuRates.estimate(model, replicaId);
  }

  /** An estimate charged to `lease`, written down for the true-up when the model's price is its GPU-hours. */
  owe(lease: Lease, model: string, replicaId: string | undefined, tokens: number, usd: number): void {
    if (this.gpuRates !== null && this.o.prices.cost(model, 0, 0) === undefined)
      this.owed.add(lease, model, replicaId, tokens, usd);
  }

  admit(
    key: ApiKeyRecord,
    model: string,
    promptTokens: number,
    completionTokens: number,
  ): BudgetDecision | Promise<BudgetDecision> {
    const own = this.byKey.get(key.id);
    const team = key.team === undefined ? undefined : this.byTeam.get(key.team);
    if (!own && !team) return NO_BUDGET;
    const leases = own && team ? this.ownAndTeam(key.id, key.team!, own, team) : (own ?? team)!;
    const tokens = promptTokens + completionTokens;
    let usd: number | null = null;
    // A loop, not map(): no closure per request, and the price is looked up once, only if a money budget applies.
    const need = new Array<number>(leases.length);
    for (let i = 0; i < leases.length; i++)
      need[i] =
        leases[i]!.budget.unit === 'tokens'
          ? tokens
          : (usd ??= this.spendCost(model, promptTokens, completionTokens) ?? 0);
    const o = decideAdmission(leases, need);
    if (o.kind === 'admit') return this.hold(leases, need);
    if (o.kind === 'exceeded') return this.exceeded(leases[o.refusedBy]!);
    if (this.renewWaitMs <= 0) {
      if (o.kind === 'renew') for (const i of o.renew) void this.renew(leases[i]!);
      return this.unsettledBy(leases[o.refusedBy]!);
    }
    return this.awaitRoom(leases, need, o);
  }

  private hold(leases: readonly Lease[], need: readonly number[]): BudgetDecision {
    let low = false;
    for (let i = 0; i < leases.length; i++) {
      const l = leases[i]!;
      l.reserved += need[i]!;
      if (l.granted - l.used < l.leaseSize / 2) low = true;
    }
    // Renew before the lease runs out: a sync now, off this request's path.
    if (low) this.kick();
    return { ok: true, hold: new Hold(this, leases, need) };
  }

  private exceeded(l: Lease): BudgetDecision {
    this.refused?.inc({ budget: l.budget.id });
    return {
      ok: false,
      budget: budgetWords(l.budget),
      resetAtMs: l.periodEndMs,
      retryAfterS: Math.max(1, Math.ceil((l.periodEndMs - this.o.now()) / 1000)),
    };
  }

  private unsettledBy(l: Lease): BudgetDecision {
    this.unsettled?.inc({ budget: l.budget.id });
    // A second: a renewal under way lands within about that on a store that answers at all.
    return { ok: false, unsettled: true, budget: budgetWords(l.budget), resetAtMs: l.periodEndMs, retryAfterS: 1 };
  }

  /**
   * A request that found a lease dry: renew it (and any other it does not
   * fit), or, the store being spent, wait for a request running here to
   * give back what it held past its use; then decide again, until admitted,
   * refused as spent, or the wait is over (unsettled). While it waits, its
   * need counts in the renewal's ask, so a request bigger than a lease gets
   * room too.
   */
  private async awaitRoom(
    leases: readonly Lease[],
    need: readonly number[],
    first: SpendOutcome & { kind: 'renew' | 'drain' },
  ): Promise<BudgetDecision> {
    let o: SpendOutcome = first;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'late'>((resolve) => {
      timer = setTimeout(() => resolve('late'), this.renewWaitMs);
    });
    for (let i = 0; i < leases.length; i++) leases[i]!.waiting += need[i]!;
    try {
      while (o.kind === 'renew' || o.kind === 'drain') {
        const step =
          o.kind === 'renew'
            ? Promise.all(o.renew.map((i) => this.renew(leases[i]!))).then((all) => all.every(Boolean))
            : Promise.race(o.drain.map((i) => leases[i]!.nextSettle())).then(() => true);
        const done = await Promise.race([step, late]);
        if (done !== true) return this.unsettledBy(leases[o.refusedBy]!);
        o = decideAdmission(leases, need);
      }
    } finally {
      clearTimeout(timer);
      for (let i = 0; i < leases.length; i++) leases[i]!.waiting -= need[i]!;
    }
    return o.kind === 'admit' ? this.hold(leases, need) : this.exceeded(leases[o.refusedBy]!);
  }

  /** The lease's renewal every waiter shares: true once it is back, false if the store failed it. */
  private renew(l: Lease): Promise<boolean> {
    l.renewal ??= this.serial(l, () => this.syncLease(l, false))
      .then(
        () => true,
        (err: unknown) => {
          this.storeFailed(err);
          return false;
        },
      )
      .finally(() => {
        l.renewal = null;
      });
    return l.renewal;
  }

  /** Runs `f` after the lease's last sync, queued or running, so that two never overlap. */
  private serial(l: Lease, f: () => Promise<void>): Promise<void> {
    const run = l.chain.then(f);
    l.chain = run.catch(() => undefined);
    return run;
  }

  private ownAndTeam(keyId: string, team: string, own: Lease[], teams: Lease[]): Lease[] {
    const cached = this.both.get(keyId);
    if (cached && cached.team === team) return cached.leases;
    const leases = [...own, ...teams];
    this.both.set(keyId, { team, leases });
    return leases;
  }

  /** Syncs every budget with the store now; calls never overlap. */
  sync(): Promise<void> {
    this.syncing = this.syncing.then(() => this.syncOnce());
    return this.syncing;
  }

  /** Hands every lease back (what was spent reported), for a plane that stops. */
  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.syncing;
    for (const l of this.leases.values()) await this.serial(l, () => this.syncLease(l, true)).catch(() => undefined);
  }

  private kick(): void {
    if (this.kicked) return;
    this.kicked = true;
    setImmediate(() => {
      this.kicked = false;
      void this.sync();
    });
  }

  private async syncOnce(): Promise<void> {
    try {
      for (const l of this.leases.values()) await this.serial(l, () => this.syncLease(l, false));
      if (this.failing) this.o.logger.info('budgets are in step with the store again');
      this.failing = false;
    } catch (err) {
      this.storeFailed(err);
    }
  }

  private storeFailed(err: unknown): void {
    if (!this.failing)
      this.o.logger.warn(
        { err: (err as Error).message },
        'cannot sync budgets with the store; each control plane spends what it holds, and one lease on credit, then refuses with 503 LLMGW_BUDGET_UNSETTLED until it returns',
      );
    this.failing = true;
  }

  private async syncLease(l: Lease, closing: boolean): Promise<void> {
    const now = this.o.now();
    if (now >= l.periodEndMs) {
      // The period is over: report what it spent, hand back what is left, and start the next one from nothing.
      await this.o.book.sync({
        budgetId: l.budget.id,
        periodStartMs: l.periodStartMs,
        amount: l.budget.amount,
        spentDelta: l.spent - l.reportedSpent,
        debt: 0,
        want: 0,
        giveBack: Math.max(0, l.granted - l.spent),
      });
      const p = periodOf(l.budget.period, now);
      Object.assign(l, { periodStartMs: p.startMs, periodEndMs: p.endMs, granted: 0, spent: 0, reportedSpent: 0 });
      Object.assign(l, { storeLeft: 0, storeSpent: 0, storeCommitted: 0, synced: false });
    }
    const spent = l.spent;
    const used = l.used;
    const spentDelta = spent - l.reportedSpent;
    const debt = Math.max(0, used - l.granted);
    const held = l.granted + debt - used;
    const want = closing ? 0 : renewalWanted({ held, leaseSize: l.leaseSize, waiting: l.waiting });
    const giveBack = closing ? Math.max(0, l.granted - used) : 0;
    if (l.synced && spentDelta === 0 && debt === 0 && want === 0 && giveBack === 0) return;
    const r = await this.o.book.sync({
      budgetId: l.budget.id,
      periodStartMs: l.periodStartMs,
      amount: l.budget.amount,
      spentDelta,
      debt,
      want,
      giveBack,
    });
    l.granted += debt + r.grant - giveBack;
    l.reportedSpent += spentDelta;
    l.storeLeft = l.budget.amount - r.committed;
    l.storeSpent = r.spent;
    l.storeCommitted = r.committed;
    l.synced = true;
    const threshold = l.budget.alertAt * l.budget.amount;
    // This sync moved the store's sum across the threshold: exactly one plane sees that, syncs being serial per row.
    if (r.spent - spentDelta < threshold && r.spent >= threshold) {
      this.o.events?.record({
        kind: 'budget_alert',
        message: `${budgetWords(l.budget)} has spent ${Math.round((r.spent / l.budget.amount) * 100)}% of its amount this ${l.budget.period}${l.budget.enforce === 'hard' ? '; requests past it are refused with 429' : ''}`,
      });
    }
  }
}
