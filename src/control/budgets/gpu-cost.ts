// What a model's tokens cost when the catalog gives it no token price: the
// GPU-hours its replicas hold, at the operator's price per GPU class per
// hour (gpu_prices), spread over the tokens those replicas served in the
// same settle interval. Pure over a snapshot (replicas with their GPUs, the
// tokens served per model, the interval's length) so every rule here is
// table-tested without a clock or a store; gpu-meter.ts takes the snapshot.

/** A GPU as its agent reported it: either name may be absent. */
export interface GpuSeen {
  /** As nvidia-smi prints it, e.g. "NVIDIA H100 80GB HBM3". */
  readonly name?: string | undefined;
  /** Placement's class, e.g. "h100-80gb". */
  readonly class?: string | undefined;
}

/** US dollars per GPU-hour, keyed by what an operator writes ("H100", "h100-80gb", "NVIDIA A10G"). */
export type GpuPrices = ReadonlyMap<string, number>;

/**
 * The hourly price of one GPU: the key equal to its class (case aside), else
 * the longest key found inside its name or class (so `H100` prices "NVIDIA
 * H100 80GB HBM3", and `H100 NVL` beats it for an NVL). Undefined = no key
 * matches (its hours are counted, at no cost).
 */
export function gpuHourlyPrice(prices: GpuPrices, gpu: GpuSeen): number | undefined {
  const cls = gpu.class?.toLowerCase();
  const name = gpu.name?.toLowerCase();
  let best: { len: number; price: number } | undefined;
  for (const [key, price] of prices) {
    const k = key.toLowerCase();
    if (k.length === 0) continue;
    if (cls !== undefined && k === cls) return price;
    if ((name?.includes(k) || cls?.includes(k)) && (best === undefined || k.length > best.len))
      best = { len: k.length, price };
  }
  return best?.price;
}

/** One replica that held GPUs through the interval. */
export interface HeldReplica {
  readonly model: string;
  /** The replica's id, as usage names it; absent = none known (its cost is pooled with the model's idle replicas'). */
  readonly id?: string;
  /** Every GPU of every shard; empty = a CPU replica (no GPU-hours). */
  readonly gpus: readonly GpuSeen[];
}

/** One model's share of an interval. */
export interface ModelGpuCost {
  readonly gpuHours: number;
  /** At gpu_prices; GPUs of no priced class add hours, not dollars. */
  readonly costUsd: number;
  /** Tokens (prompt and completion) its replicas served in the interval. */
  readonly tokens: number;
  /** The interval's cost spread over its tokens; null = it served none (the cost is kept, charged to nobody). */
  readonly usdPerToken: number | null;
}

/**
 * Every model's GPU-hours and cost over an interval of `intervalMs`, and
 * what each token it served then costs, its replicas pooled (the model's
 * view: what the store's totals add up). spreadByReplica prices each
 * replica's tokens apart.
 */
export function spreadGpuCost(snapshot: {
  readonly intervalMs: number;
  readonly replicas: readonly HeldReplica[];
  readonly prices: GpuPrices;
  /** Tokens served per model in the interval. */
  readonly tokens: ReadonlyMap<string, number>;
}): Map<string, ModelGpuCost> {
  const served = [...snapshot.tokens].map(([model, tokens]) => ({ model, tokens }));
  const pooled = snapshot.replicas.map((r) => ({ model: r.model, gpus: r.gpus }));
  return new Map(spreadByReplica({ ...snapshot, replicas: pooled, served }).models);
}

/** Tokens served in an interval by one model, through the replica named (absent = no replica named). */
export interface ServedTokens {
  readonly model: string;
  readonly replicaId?: string | undefined;
  readonly tokens: number;
}

/** An interval priced: each model's totals, and the rate of each replica's tokens. */
export interface IntervalRates {
  readonly models: ReadonlyMap<string, ModelGpuCost>;
  /** US dollars per token a replica served, for each replica that held GPUs and served tokens. */
  readonly replicas: ReadonlyMap<string, number>;
  /** Per model: US dollars per token of its tokens that named no such replica; null = the model had none. */
  readonly unnamed: ReadonlyMap<string, number | null>;
  /** Each held replica with an id and GPUs: its model, GPU-hours and cost in the interval. */
  readonly held: ReadonlyMap<string, { readonly model: string; readonly gpuHours: number; readonly costUsd: number }>;
}

/**
 * Every replica's GPU cost over the interval, spread over the tokens that
 * replica served: one on an H100 and one on an A10 of the same model price
 * their tokens apart. The rules, each a row in gpu-cost.test.ts:
 * - a replica that served tokens: its cost over its tokens;
 * - a replica that served none (idle, or its tokens named no replica): its
 *   cost is pooled per model and spread over the model's tokens that named
 *   no replica that held GPUs (a remote's, a replica released before the
 *   interval closed, a record from before replicas were named); a model
 *   with no such tokens keeps that cost in its totals (the measured cost per
 *   million rises), charged to nobody: the rule for an idle model;
 * - tokens of a model that held no GPU (remote, CPU engine) cost nothing.
 * A model's costUsd is the sum over its replicas either way; what its
 * tokens are charged is that sum less any idle cost charged to nobody.
 */
export function spreadByReplica(snapshot: {
  readonly intervalMs: number;
  readonly replicas: readonly HeldReplica[];
  readonly prices: GpuPrices;
  readonly served: readonly ServedTokens[];
}): IntervalRates {
  const hours = Math.max(0, snapshot.intervalMs) / 3_600_000;
  const sums = new Map<string, { gpuHours: number; costUsd: number; tokens: number; idleUsd: number; named: number }>();
  const sumOf = (model: string) => {
    let s = sums.get(model);
    if (!s) sums.set(model, (s = { gpuHours: 0, costUsd: 0, tokens: 0, idleUsd: 0, named: 0 }));
    return s;
  };
  const byId = new Map<string, { model: string; tokens: number }>();
  for (const r of snapshot.replicas) if (r.id !== undefined) byId.set(r.id, { model: r.model, tokens: 0 });
  for (const t of snapshot.served) {
    if (t.tokens <= 0) continue;
    sumOf(t.model).tokens += t.tokens;
    const r = t.replicaId === undefined ? undefined : byId.get(t.replicaId);
    if (r && r.model === t.model) r.tokens += t.tokens;
  }
  const replicas = new Map<string, number>();
  const held = new Map<string, { model: string; gpuHours: number; costUsd: number }>();
  for (const r of snapshot.replicas) {
    if (r.gpus.length === 0) continue;
    const s = sumOf(r.model);
    let cost = 0;
    for (const gpu of r.gpus) cost += hours * (gpuHourlyPrice(snapshot.prices, gpu) ?? 0);
    s.gpuHours += hours * r.gpus.length;
    s.costUsd += cost;
    if (r.id !== undefined) held.set(r.id, { model: r.model, gpuHours: hours * r.gpus.length, costUsd: cost });
    const named = r.id === undefined ? 0 : (byId.get(r.id)?.tokens ?? 0);
    if (named > 0) {
      replicas.set(r.id!, cost / named);
      s.named += named;
    } else s.idleUsd += cost;
  }
  const models = new Map<string, ModelGpuCost>();
  const unnamed = new Map<string, number | null>();
  for (const [model, s] of sums) {
    models.set(model, {
      gpuHours: s.gpuHours,
      costUsd: s.costUsd,
      tokens: s.tokens,
      usdPerToken: s.tokens > 0 ? s.costUsd / s.tokens : null,
    });
    const rest = s.tokens - s.named;
    unnamed.set(model, rest > 0 ? s.idleUsd / rest : null);
  }
  return { models, replicas, unnamed, held };
}

/** What a token of `model` served by `replicaId` cost in the interval; null = nothing to charge it. */
export function rateOf(rates: IntervalRates, model: string, replicaId?: string): number | null {
  const r = replicaId === undefined ? undefined : rates.replicas.get(replicaId);
  return r ?? rates.unnamed.get(model) ?? null;
}

/**
 * gpu_prices as an operator writes it: a map (`{H100: 2.5}` in the file),
 * or `class=price` pairs, a list or comma-separated (env, flag). Throws a
 * sentence naming the bad entry.
 */
export function parseGpuPrices(
  raw: Record<string, number | string> | string | readonly string[] | undefined,
): GpuPrices {
  const out = new Map<string, number>();
  const put = (key: string, value: number | string, shown: string) => {
    const k = key.trim();
    const n = typeof value === 'number' ? value : Number(String(value).trim());
    if (k.length === 0 || !Number.isFinite(n) || n < 0 || (typeof value === 'string' && value.trim() === ''))
      throw new Error(`gpu_prices: "${shown}" is not a GPU class and US dollars per hour, 0 or more (e.g. H100=2.5)`);
    out.set(k, n);
  };
  if (raw === undefined) return out;
  if (typeof raw === 'string' || Array.isArray(raw)) {
    const entries = (typeof raw === 'string' ? raw.split(',') : (raw as readonly string[]))
      .map((e) => e.trim())
      .filter((e) => e.length > 0);
    for (const e of entries) {
      const at = e.lastIndexOf('=');
      if (at < 0) put('', '', e);
      else put(e.slice(0, at), e.slice(at + 1), e);
    }
    return out;
  }
  for (const [k, v] of Object.entries(raw as Record<string, number | string>)) put(k, v, `${k}: ${String(v)}`);
  return out;
}
