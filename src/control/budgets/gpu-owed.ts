// What money budgets owe for a model priced by GPU-hours. Its tokens' cost is
// known only when the GPU meter prices the interval they were served in, but
// a budget must be charged when the request ends (leases.ts spends from
// memory, on the request's path): so each request is charged an estimate,
// its replica's (else its model's) last measured cost per token, 0 before
// the first interval is priced, and the tokens and estimate are written down
// here per budget lease, replica and model. When the meter prices the
// interval it hands the true rate back, and each lease is charged the
// difference, up or down: over time a budget's spend equals what the usage
// rows' cost_usd says. Apart from leases.ts because it is the one thing
// there that waits for the meter; pure bookkeeping, table-tested.

/** A lease as far as a true-up touches it: what it spent. */
export interface Spending {
  spent: number;
}

/** The meter's last measured US dollars per token: the replica's, else the model's; 0 = nothing measured yet. */
export interface GpuRateSource {
  estimate(model: string, replicaId?: string): number;
}

/** What a true-up charges a token of `model` served by `replicaId`: the usage row's rate; null = nothing. */
export type TrueRate = (model: string, replicaId?: string) => number | null;

/** One interval's estimates, taken: trued up once the meter knows the interval's rates. */
export interface OwedInterval {
  trueUp(rate: TrueRate): void;
  /** The interval could not be priced (the store was away): its estimates wait for the next one. */
  putBack(): void;
}

interface Owed<L> {
  readonly lease: L;
  readonly model: string;
  readonly replicaId: string | undefined;
  tokens: number;
  estimatedUsd: number;
}

/** The estimates charged since the meter's last interval, per lease, model and replica. */
export class GpuOwed<L extends Spending> {
  private rows = new Map<L, Map<string, Owed<L>>>();

  /** A request's tokens charged to `lease` at an estimate of `estimatedUsd`. */
  add(lease: L, model: string, replicaId: string | undefined, tokens: number, estimatedUsd: number): void {
    if (tokens <= 0 && estimatedUsd === 0) return;
    let byLease = this.rows.get(lease);
    if (!byLease) this.rows.set(lease, (byLease = new Map()));
    const k = `${model}\0${replicaId ?? ''}`;
    const o = byLease.get(k);
    if (o) {
      o.tokens += tokens;
      o.estimatedUsd += estimatedUsd;
    } else byLease.set(k, { lease, model, replicaId, tokens, estimatedUsd });
  }

  /** Everything written down so far, for the interval the meter is closing; what comes later waits for the next. */
  take(): OwedInterval {
    const rows = this.rows;
    this.rows = new Map();
    return {
      trueUp: (rate) => trueUp(rows, rate),
      putBack: () => {
        for (const byLease of rows.values())
          for (const o of byLease.values()) this.add(o.lease, o.model, o.replicaId, o.tokens, o.estimatedUsd);
      },
    };
  }
}

/** Charges each lease the true cost of its tokens less the estimate it was charged: negative when it was overcharged. */
function trueUp<L extends Spending>(rows: Map<L, Map<string, Owed<L>>>, rate: TrueRate): void {
  for (const byLease of rows.values())
    for (const o of byLease.values()) o.lease.spent += o.tokens * (rate(o.model, o.replicaId) ?? 0) - o.estimatedUsd;
}
