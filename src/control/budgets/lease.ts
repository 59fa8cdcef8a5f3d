// One budget's lease on a control plane, and one request's hold on the
// leases that apply to it: the state BudgetLeases (leases.ts) admits from
// and syncs with the store, and what a request gives back when it ends.
// Apart from leases.ts, which decides and syncs, because a hold's
// settlement is the one place a lease's room comes back between syncs, and
// requests waiting for that room (a budget whose store is spent while
// requests running here hold more than they will use) wait on it here.
import type { BudgetHold } from '../../gateway/ports/index.js';
import type { BudgetRecord, LeaseSnapshot } from './budgets.js';

/** One budget's lease on this plane in its current period; mutated in place so holds settle into whichever period is current. */
export class Lease implements LeaseSnapshot {
  granted = 0;
  spent = 0;
  /** What requests running here hold of it: each its most (max_tokens and its prompt's upper bound); 0 = none run. */
  reserved = 0;
  reportedSpent = 0;
  storeLeft = 0;
  storeSpent = 0;
  storeCommitted = 0;
  /** Synced at least once this period: until then storeLeft is unknown and the first sync is due at once. */
  synced = false;
  /** What requests waiting for this lease's renewal need in all; 0 = none waits. */
  waiting = 0;
  /** The last sync of this lease, queued or running: its syncs never overlap (each reads, then moves, its counts). */
  chain: Promise<void> = Promise.resolve();
  /** The renewal requests wait for; null = none in flight. */
  renewal: Promise<boolean> | null = null;
  /** Wakes the requests waiting for a hold to come back; null = none waits. */
  private settled: { promise: Promise<void>; wake: () => void } | null = null;
  constructor(
    public budget: BudgetRecord,
    public periodStartMs: number,
    public periodEndMs: number,
    public leaseSize: number,
  ) {}
  get used(): number {
    return this.spent + this.reserved;
  }
  get unsynced(): boolean {
    return !this.synced;
  }

  /** Resolves once a hold on this lease is next settled or released: room may have come back. */
  nextSettle(): Promise<void> {
    if (this.settled === null) {
      let wake!: () => void;
      const promise = new Promise<void>((resolve) => (wake = resolve));
      this.settled = { promise, wake };
    }
    return this.settled.promise;
  }

  /** A hold on this lease came back: wake whoever waits for room. */
  gaveBack(): void {
    const s = this.settled;
    if (s === null) return;
    this.settled = null;
    s.wake();
  }
}

/** What a hold needs of the plane that made it: money budgets' prices and the GPU true-up's bookkeeping. */
export interface HoldPricing {
  spendCost(model: string, promptTokens: number, completionTokens: number, replicaId?: string): number | undefined;
  owe(lease: Lease, model: string, replicaId: string | undefined, tokens: number, usd: number): void;
}

/**
 * One request's reservation against each budget that applies to it; settled
 * once. Settling charges the true usage and frees the whole hold, so what
 * the request held past its usage is room in the lease again.
 */
export class Hold implements BudgetHold {
  private done = false;
  constructor(
    private readonly leases: HoldPricing,
    private readonly held: readonly Lease[],
    private readonly need: readonly number[],
  ) {}

  settle(model: string, promptTokens: number, completionTokens: number, replicaId?: string): void {
    if (this.done) return;
    this.done = true;
    const tokens = promptTokens + completionTokens;
    let usd: number | null = null;
    for (let i = 0; i < this.held.length; i++) {
      const l = this.held[i]!;
      l.reserved -= this.need[i]!;
      if (l.budget.unit === 'tokens') l.spent += tokens;
      else {
        usd ??= this.leases.spendCost(model, promptTokens, completionTokens, replicaId) ?? 0;
        l.spent += usd;
        this.leases.owe(l, model, replicaId, tokens, usd);
      }
      l.gaveBack();
    }
  }

  release(): void {
    if (this.done) return;
    this.done = true;
    for (let i = 0; i < this.held.length; i++) {
      const l = this.held[i]!;
      l.reserved -= this.need[i]!;
      l.gaveBack();
    }
  }
}
