// The GPU meter: every settle interval it reads which replicas hold which
// GPUs and how many tokens each replica served, asks spreadByReplica (pure)
// what that interval cost, charges the usage rows of models without a token
// price each at the rate of the replica that served them, and adds the
// GPU-hours, cost and tokens to the store, per model (model_gpu_cost,
// whence the measured cost per million tokens) and per replica
// (replica_gpu_cost). The I/O edge of gpu-cost.ts, apart from it so the
// arithmetic stays table-tested.
//
// With several processes on one store (control planes on Postgres, `llmgw
// gateway` processes), only the leader adds GPU-hours (every plane sees the
// whole fleet) while each adds the tokens it served; a process cannot know
// the others' tokens of one interval, so there each charges its tokens at
// the replica's measured rate so far (the store's cost over its tokens,
// summed over every process; the model's where the replica has none)
// instead of the interval's own.
//
// Money budgets: each request of such a model was charged an estimate (this
// meter's last rate for its replica, else its model; 0 before any is
// measured) by the budget leases; when an interval is priced the meter
// hands the leases the very rate each usage row was charged, and they
// charge the difference (gpu-owed.ts).
import type { Logger } from 'pino';
import type { UsageEvent, UsageSink } from '../../gateway/ports/index.js';
import type { StoreConnection } from '../store/connection.js';
import { rateOf, spreadByReplica, type GpuPrices, type HeldReplica, type IntervalRates } from './gpu-cost.js';
import type { GpuRateSource, OwedInterval, TrueRate } from './gpu-owed.js';

/** A model's (or a replica's) GPU totals since metering began. */
export interface GpuTotals {
  readonly gpuHours: number;
  readonly costUsd: number;
  readonly tokens: number;
}

/** A replica's GPU totals, with the model it serves. */
export interface ReplicaGpuTotals extends GpuTotals {
  readonly model: string;
}

/** Where GPU totals accrue: the store, or memory for a control plane without one. */
export interface GpuBook {
  add(
    rows: ReadonlyMap<string, GpuTotals>,
    atMs: number,
    replicas?: ReadonlyMap<string, ReplicaGpuTotals>,
  ): Promise<void>;
  totals(): Promise<Map<string, GpuTotals>>;
  /** Per replica id, of these replicas (all when absent); absent method = the book keeps none (rates are the model's). */
  replicaTotals?(ids?: readonly string[]): Promise<Map<string, ReplicaGpuTotals>>;
  /** Drops the rows of replicas not added to since `beforeMs` (gone: a held one is added to every interval). */
  pruneReplicas?(beforeMs: number): Promise<void>;
}

function addInto<K>(into: Map<K, ReplicaGpuTotals>, k: K, r: ReplicaGpuTotals): void {
  const o = into.get(k);
  into.set(
    k,
    o
      ? {
          model: o.model,
          gpuHours: o.gpuHours + r.gpuHours,
          costUsd: o.costUsd + r.costUsd,
          tokens: o.tokens + r.tokens,
        }
      : r,
  );
}

export class MemoryGpuBook implements GpuBook {
  private readonly rows = new Map<string, ReplicaGpuTotals>();
  private readonly replicas = new Map<string, ReplicaGpuTotals>();
  add(
    rows: ReadonlyMap<string, GpuTotals>,
    _atMs?: number,
    replicas?: ReadonlyMap<string, ReplicaGpuTotals>,
  ): Promise<void> {
    for (const [model, r] of rows) addInto(this.rows, model, { ...r, model });
    for (const [id, r] of replicas ?? []) addInto(this.replicas, id, r);
    return Promise.resolve();
  }
  totals(): Promise<Map<string, GpuTotals>> {
    return Promise.resolve(
      new Map([...this.rows].map(([m, r]) => [m, { gpuHours: r.gpuHours, costUsd: r.costUsd, tokens: r.tokens }])),
    );
  }
  replicaTotals(ids?: readonly string[]): Promise<Map<string, ReplicaGpuTotals>> {
    const wanted = ids === undefined ? null : new Set(ids);
    return Promise.resolve(new Map([...this.replicas].filter(([id]) => wanted === null || wanted.has(id))));
  }
}

export class StoredGpuBook implements GpuBook {
  constructor(private readonly store: StoreConnection) {}

  async add(
    rows: ReadonlyMap<string, GpuTotals>,
    atMs: number,
    replicas: ReadonlyMap<string, ReplicaGpuTotals> = new Map(),
  ): Promise<void> {
    if (rows.size === 0 && replicas.size === 0) return;
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
      for (const [id, r] of replicas)
        await tx
          .insertInto('replica_gpu_cost')
          .values({
            replica_id: id,
            model: r.model,
            gpu_hours: r.gpuHours,
            cost_usd: r.costUsd,
            tokens: r.tokens,
            updated_at: atMs,
          })
          .onConflict((oc) =>
            oc.column('replica_id').doUpdateSet((eb) => ({
              gpu_hours: eb('replica_gpu_cost.gpu_hours', '+', r.gpuHours),
              cost_usd: eb('replica_gpu_cost.cost_usd', '+', r.costUsd),
              tokens: eb('replica_gpu_cost.tokens', '+', r.tokens),
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

  async pruneReplicas(beforeMs: number): Promise<void> {
    await this.store.db.deleteFrom('replica_gpu_cost').where('updated_at', '<', beforeMs).execute();
  }

  async replicaTotals(ids?: readonly string[]): Promise<Map<string, ReplicaGpuTotals>> {
    if (ids !== undefined && ids.length === 0) return new Map();
    let query = this.store.db.selectFrom('replica_gpu_cost').selectAll();
    // Only those an interval charges: the table keeps a row for every replica ever metered.
    if (ids !== undefined) query = query.where('replica_id', 'in', [...ids]);
    const rows = await query.execute();
    return new Map(
      rows.map((r) => [
        r.replica_id,
        { model: r.model, gpuHours: Number(r.gpu_hours), costUsd: Number(r.cost_usd), tokens: Number(r.tokens) },
      ]),
    );
  }
}

/** A replica's estimate is dropped after this long without tokens (it is likely gone); the model's stands in, ms. */
const ESTIMATE_KEPT_MS = 3_600_000;
/** A replica's row is dropped this long after anything was last added to it: it is gone, ms. */
const REPLICA_ROW_KEPT_MS = 24 * 3_600_000;
/** How often the leader drops such rows, ms. */
const PRUNE_EVERY_MS = 3_600_000;
/** watchOthers: how long rates stay measured after another process last added tokens, ms. */
const SHARED_KEPT_MS = 3_600_000;

export interface GpuMeterOptions {
  prices: GpuPrices;
  /** Every replica holding GPUs now, with the GPUs its agents report. */
  replicas: () => readonly HeldReplica[];
  /** Whether the catalog prices this model per token (then its usage rows are not charged here). */
  tokenPriced: (model: string) => boolean;
  /** Adds US dollars to a usage row; absent = usage is not kept (no store). */
  charge?: (keyId: string, model: string, endpoint: string, usd: number) => void;
  /** Money budgets, charged this meter's estimates and trued up at each interval; absent = none. */
  budgets?: { useGpuRates(rates: GpuRateSource): void; takeGpuOwed(): OwedInterval };
  book: GpuBook;
  now: () => number;
  logger: Logger;
  /** Several processes share the store: only the leader adds GPU-hours, and rates are the measured ones. */
  cluster?: { leads: () => boolean };
  /**
   * A lone control plane on a store `llmgw gateway` processes may share:
   * it reads the store's token totals after each interval, and while
   * others add tokens too (seen within the last hour) it charges measured
   * rates as a cluster does, since its interval no longer holds every token
   * its replicas served. Absent or false = it never looks.
   */
  watchOthers?: boolean;
  /** The settle interval, ms; 0 = never on a timer (call settle()). Default 5000. */
  intervalMs?: number;
}

interface Served {
  keyId: string;
  model: string;
  endpoint: string;
  replicaId: string | undefined;
  tokens: number;
}

export class GpuMeter implements GpuRateSource {
  /** Tokens per usage row and replica since the last settle. */
  private served = new Map<string, Served>();
  private lastMs: number;
  private timer: NodeJS.Timeout | null = null;
  private settling: Promise<void> = Promise.resolve();
  /** The last rate each replica's tokens were charged, and when; for the budgets' estimates. */
  private readonly replicaRates = new Map<string, { usdPerToken: number; atMs: number }>();
  /** The last measured rate of each model's tokens. */
  private readonly modelRates = new Map<string, number>();
  /** watchOthers: each model's tokens in the store after this meter's last add (or at its start); null = not read yet. */
  private seenTokens: Map<string, number> | null = null;
  /** watchOthers: the read of the store's tokens as the meter starts, awaited before the first interval is priced. */
  private readonly started: Promise<void>;
  /** watchOthers: until when rates are the measured ones, another process having added tokens; epoch ms. */
  private sharedUntilMs = 0;
  /** When the leader last dropped gone replicas' rows; epoch ms. */
  private lastPruneMs = 0;

  constructor(private readonly o: GpuMeterOptions) {
    this.lastMs = o.now();
    // Read now, not at the first settle: a gateway adding tokens during the first interval is then seen in it, and
    // the plane does not charge its own tokens that interval's whole cost while the gateway charges its own too.
    this.started = o.watchOthers ? this.readStart() : Promise.resolve();
    o.budgets?.useGpuRates(this);
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
    const k = `${e.keyId}\0${e.model}\0${e.endpoint}\0${e.replicaId ?? ''}`;
    const row = this.served.get(k);
    if (row) row.tokens += tokens;
    else this.served.set(k, { keyId: e.keyId, model: e.model, endpoint: e.endpoint, replicaId: e.replicaId, tokens });
  }

  /** US dollars per token a request is estimated at: its replica's last rate, else its model's; 0 = none measured. */
  estimate(model: string, replicaId?: string): number {
    const r = replicaId === undefined ? undefined : this.replicaRates.get(replicaId);
    return r?.usdPerToken ?? this.modelRates.get(model) ?? 0;
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

  private async readStart(): Promise<void> {
    try {
      const totals = await this.o.book.totals();
      this.seenTokens ??= tokensOf(totals);
    } catch {
      // The store is away: the first settle's read takes its place, as before there was a start read.
    }
  }

  private async settleOnce(): Promise<void> {
    await this.started;
    const now = this.o.now();
    const intervalMs = now - this.lastMs;
    const served = [...this.served.values()];
    this.served = new Map();
    // Taken with the tokens, at one instant: the estimates of exactly these tokens are trued up below.
    const owed = this.o.budgets?.takeGpuOwed() ?? null;
    this.lastMs = now;
    const counts = !this.o.cluster || this.o.cluster.leads();
    const spread = spreadByReplica({
      intervalMs,
      replicas: counts ? this.o.replicas() : [],
      prices: this.o.prices,
      served,
    });
    const rows = new Map<string, GpuTotals>();
    for (const [model, c] of spread.models)
      rows.set(model, { gpuHours: c.gpuHours, costUsd: c.costUsd, tokens: c.tokens });
    try {
      await this.o.book.add(rows, now, replicaRows(spread, served));
    } catch (err) {
      // The store is away: the interval's tokens and estimates come back so the next settle charges them; its GPU-hours are lost.
      for (const r of served)
        this.observe({
          keyId: r.keyId,
          model: r.model,
          endpoint: r.endpoint,
          ...(r.replicaId === undefined ? {} : { replicaId: r.replicaId }),
          promptTokens: r.tokens,
          completionTokens: 0,
          status: 200,
        });
      owed?.putBack();
      throw err;
    }
    if (counts && now - this.lastPruneMs >= PRUNE_EVERY_MS) {
      this.lastPruneMs = now;
      await this.o.book.pruneReplicas?.(now - REPLICA_ROW_KEPT_MS);
    }
    if (this.o.watchOthers) await this.watch(rows, now);
    const rate = this.o.cluster || now < this.sharedUntilMs ? await this.measured(served) : intervalRate(spread);
    const charge = this.o.charge;
    for (const r of served) {
      if (this.o.tokenPriced(r.model)) continue;
      const usdPerToken = rate.of(r.model, r.replicaId);
      if (usdPerToken && charge) charge(r.keyId, r.model, r.endpoint, r.tokens * usdPerToken);
      if (usdPerToken !== null && r.replicaId !== undefined)
        this.replicaRates.set(r.replicaId, { usdPerToken, atMs: now });
    }
    // The same rate as each usage row: over time a budget's spend is what the rows' cost_usd says.
    owed?.trueUp(rate.of);
    for (const [model, usdPerToken] of rate.models) this.modelRates.set(model, usdPerToken);
    for (const [id, r] of this.replicaRates) if (now - r.atMs > ESTIMATE_KEPT_MS) this.replicaRates.delete(id);
  }

  /** Whether the store's tokens grew by more than this meter added since its last look: another process adds too. */
  private async watch(added: ReadonlyMap<string, GpuTotals>, now: number): Promise<void> {
    const totals = await this.o.book.totals();
    const seen = this.seenTokens;
    this.seenTokens = tokensOf(totals);
    if (seen === null) return;
    for (const [model, t] of totals)
      if (t.tokens > (seen.get(model) ?? 0) + (added.get(model)?.tokens ?? 0)) {
        if (now >= this.sharedUntilMs)
          this.o.logger.info(
            { model },
            'another process adds tokens to this store: GPU cost is charged at measured rates while it does',
          );
        this.sharedUntilMs = now + SHARED_KEPT_MS;
        return;
      }
  }

  /** Rates from the store's totals: the replica's where it has GPU-hours and tokens, else its model's. */
  private async measured(served: readonly Served[]): Promise<{ of: TrueRate; models: Map<string, number> }> {
    const models = new Map<string, number>();
    for (const [model, t] of await this.o.book.totals()) if (t.tokens > 0) models.set(model, t.costUsd / t.tokens);
    const ids = [...new Set(served.flatMap((r) => (r.replicaId === undefined ? [] : [r.replicaId])))];
    const replicas = (await this.o.book.replicaTotals?.(ids)) ?? new Map<string, ReplicaGpuTotals>();
    return {
      of: (model, replicaId) => {
        const r = replicaId === undefined ? undefined : replicas.get(replicaId);
        if (r && r.model === model && r.gpuHours > 0 && r.tokens > 0) return r.costUsd / r.tokens;
        return models.get(model) ?? null;
      },
      models,
    };
  }
}

/** Each model's tokens in GPU totals. */
function tokensOf(totals: ReadonlyMap<string, GpuTotals>): Map<string, number> {
  return new Map([...totals].map(([m, t]) => [m, t.tokens]));
}

/** Rates from the interval alone: each replica's cost over its own tokens (spreadByReplica's rules). */
function intervalRate(spread: IntervalRates): { of: TrueRate; models: Map<string, number> } {
  const models = new Map<string, number>();
  for (const [model, c] of spread.models) if (c.usdPerToken !== null) models.set(model, c.usdPerToken);
  return { of: (model, replicaId) => rateOf(spread, model, replicaId), models };
}

/** What the interval adds to each replica's totals: the GPU-hours it held (leader only) and the tokens it served here. */
function replicaRows(spread: IntervalRates, served: readonly Served[]): Map<string, ReplicaGpuTotals> {
  const out = new Map<string, ReplicaGpuTotals>();
  for (const [id, h] of spread.held)
    out.set(id, { model: h.model, gpuHours: h.gpuHours, costUsd: h.costUsd, tokens: 0 });
  for (const r of served)
    if (r.replicaId !== undefined)
      addInto(out, r.replicaId, { model: r.model, gpuHours: 0, costUsd: 0, tokens: r.tokens });
  return out;
}
