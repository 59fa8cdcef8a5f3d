// The GPU meter: every settle interval it reads which replicas hold which
// GPUs and how many tokens each model served, asks spreadGpuCost (pure) what
// that interval cost, charges the usage rows of models without a token
// price, and adds the model's GPU-hours, cost and tokens to the store's
// model_gpu_cost, whence the measured cost per million tokens. The I/O edge
// of gpu-cost.ts, apart from it so the arithmetic stays table-tested.
//
// With several control planes on one store, only the leader adds GPU-hours
// (every plane sees the whole fleet) while each adds the tokens it served;
// a plane cannot know the others' tokens of one interval, so there each
// charges its tokens at the model's measured rate so far (the store's cost
// over its tokens) instead of the interval's own.
import type { Logger } from 'pino';
import type { UsageEvent, UsageSink } from '../../gateway/ports/index.js';
import type { StoreConnection } from '../store/connection.js';
import { spreadGpuCost, type GpuPrices, type HeldReplica } from './gpu-cost.js';

/** A model's GPU totals since metering began. */
export interface GpuTotals {
  readonly gpuHours: number;
  readonly costUsd: number;
  readonly tokens: number;
}

/** Where GPU totals accrue: the store, or memory for a control plane without one. */
export interface GpuBook {
  add(rows: ReadonlyMap<string, GpuTotals>, atMs: number): Promise<void>;
  totals(): Promise<Map<string, GpuTotals>>;
}

export class MemoryGpuBook implements GpuBook {
  private readonly rows = new Map<string, GpuTotals>();
  add(rows: ReadonlyMap<string, GpuTotals>): Promise<void> {
    for (const [model, r] of rows) {
      const o = this.rows.get(model) ?? { gpuHours: 0, costUsd: 0, tokens: 0 };
      this.rows.set(model, {
        gpuHours: o.gpuHours + r.gpuHours,
        costUsd: o.costUsd + r.costUsd,
        tokens: o.tokens + r.tokens,
      });
    }
    return Promise.resolve();
  }
  totals(): Promise<Map<string, GpuTotals>> {
    return Promise.resolve(new Map(this.rows));
  }
}

export class StoredGpuBook implements GpuBook {
  constructor(private readonly store: StoreConnection) {}

  async add(rows: ReadonlyMap<string, GpuTotals>, atMs: number): Promise<void> {
    if (rows.size === 0) return;
    await this.store.db.transaction().execute(async (tx) => {
      for (const [model, r] of rows)
        await tx
          .insertInto('model_gpu_cost')
          .values({ model, gpu_hours: r.gpuHours, cost_usd: r.costUsd, tokens: r.tokens, updated_at: atMs })
          .onConflict((oc) =>
            oc.column('model').doUpdateSet((eb) => ({
              gpu_hours: eb('model_gpu_cost.gpu_hours', '+', r.gpuHours),
              cost_usd: eb('model_gpu_cost.cost_usd', '+', r.costUsd),
              tokens: eb('model_gpu_cost.tokens', '+', r.tokens),
              updated_at: atMs,
            })),
          )
          .execute();
    });
  }

  async totals(): Promise<Map<string, GpuTotals>> {
    const rows = await this.store.db.selectFrom('model_gpu_cost').selectAll().execute();
    return new Map(
      rows.map((r) => [
        r.model,
        { gpuHours: Number(r.gpu_hours), costUsd: Number(r.cost_usd), tokens: Number(r.tokens) },
      ]),
    );
  }
}

export interface GpuMeterOptions {
  prices: GpuPrices;
  /** Every replica holding GPUs now, with the GPUs its agents report. */
  replicas: () => readonly HeldReplica[];
  /** Whether the catalog prices this model per token (then its usage rows are not charged here). */
  tokenPriced: (model: string) => boolean;
  /** Adds US dollars to a usage row; absent = usage is not kept (no store). */
  charge?: (keyId: string, model: string, endpoint: string, usd: number) => void;
  book: GpuBook;
  now: () => number;
  logger: Logger;
  /** Several control planes share the store: only the leader adds GPU-hours, and rates are the measured ones. */
  cluster?: { leads: () => boolean };
  /** The settle interval, ms; 0 = never on a timer (call settle()). Default 5000. */
  intervalMs?: number;
}

export class GpuMeter {
  /** Tokens per usage row since the last settle: key, model, endpoint. */
  private served = new Map<string, { keyId: string; model: string; endpoint: string; tokens: number }>();
  private lastMs: number;
  private timer: NodeJS.Timeout | null = null;
  private settling: Promise<void> = Promise.resolve();

  constructor(private readonly o: GpuMeterOptions) {
    this.lastMs = o.now();
    const interval = o.intervalMs ?? 5000;
    if (interval > 0) {
      this.timer = setInterval(() => void this.settle(), interval);
      this.timer.unref();
    }
  }

  /** The usage sink the gateway records to: `inner` as before, and the tokens counted here. */
  wrap(inner: UsageSink): UsageSink {
    return {
      record: (e: UsageEvent) => {
        inner.record(e);
        this.observe(e);
      },
    };
  }

  observe(e: UsageEvent): void {
    const tokens = e.promptTokens + e.completionTokens;
    if (tokens <= 0) return;
    const k = `${e.keyId}\0${e.model}\0${e.endpoint}`;
    const row = this.served.get(k);
    if (row) row.tokens += tokens;
    else this.served.set(k, { keyId: e.keyId, model: e.model, endpoint: e.endpoint, tokens });
  }

  /** Closes the interval that ends now; calls never overlap. */
  settle(): Promise<void> {
    this.settling = this.settling.then(() =>
      this.settleOnce().catch((err: unknown) =>
        this.o.logger.warn({ err: (err as Error).message }, 'cannot settle GPU-hours; the next interval tries again'),
      ),
    );
    return this.settling;
  }

  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.settle();
  }

  totals(): Promise<Map<string, GpuTotals>> {
    return this.o.book.totals();
  }

  private async settleOnce(): Promise<void> {
    const now = this.o.now();
    const intervalMs = now - this.lastMs;
    const served = this.served;
    this.served = new Map();
    this.lastMs = now;
    const tokens = new Map<string, number>();
    for (const r of served.values()) tokens.set(r.model, (tokens.get(r.model) ?? 0) + r.tokens);
    const counts = !this.o.cluster || this.o.cluster.leads();
    const spread = spreadGpuCost({
      intervalMs,
      replicas: counts ? this.o.replicas() : [],
      prices: this.o.prices,
      tokens,
    });
    const rows = new Map<string, GpuTotals>();
    for (const [model, c] of spread) rows.set(model, { gpuHours: c.gpuHours, costUsd: c.costUsd, tokens: c.tokens });
    try {
      await this.o.book.add(rows, now);
    } catch (err) {
      // The store is away: the interval's tokens come back so the next settle charges them; its GPU-hours are lost.
      for (const r of served.values()) this.observe({ ...r, promptTokens: r.tokens, completionTokens: 0, status: 200 });
      throw err;
    }
    const charge = this.o.charge;
    if (!charge) return;
    const measured = this.o.cluster ? await this.o.book.totals() : null;
    for (const r of served.values()) {
      if (this.o.tokenPriced(r.model)) continue;
      let rate: number | null | undefined;
      if (measured) {
        const t = measured.get(r.model);
        rate = t && t.tokens > 0 ? t.costUsd / t.tokens : null;
      } else rate = spread.get(r.model)?.usdPerToken;
      if (rate) charge(r.keyId, r.model, r.endpoint, r.tokens * rate);
    }
  }
}
