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
 * what each token it served then costs. The router does not say which
 * replica served a request, so a model's replicas are pooled: each token
 * bears the model's GPU cost over the model's tokens (per replica when a
 * model has one replica, and the same total either way).
 */
export function spreadGpuCost(snapshot: {
  readonly intervalMs: number;
  readonly replicas: readonly HeldReplica[];
  readonly prices: GpuPrices;
  /** Tokens served per model in the interval. */
  readonly tokens: ReadonlyMap<string, number>;
}): Map<string, ModelGpuCost> {
  const hours = Math.max(0, snapshot.intervalMs) / 3_600_000;
  const sums = new Map<string, { gpuHours: number; costUsd: number }>();
  for (const r of snapshot.replicas) {
    if (r.gpus.length === 0) continue;
    const s = sums.get(r.model) ?? { gpuHours: 0, costUsd: 0 };
    for (const gpu of r.gpus) {
      s.gpuHours += hours;
      s.costUsd += hours * (gpuHourlyPrice(snapshot.prices, gpu) ?? 0);
    }
    sums.set(r.model, s);
  }
  const out = new Map<string, ModelGpuCost>();
  for (const [model, s] of sums) {
    const tokens = snapshot.tokens.get(model) ?? 0;
    out.set(model, { ...s, tokens, usdPerToken: tokens > 0 ? s.costUsd / tokens : null });
  }
  // Tokens of a model that held no GPU in the interval (a remote, a CPU engine): measured, at no GPU cost.
  for (const [model, tokens] of snapshot.tokens)
    if (!out.has(model) && tokens > 0) out.set(model, { gpuHours: 0, costUsd: 0, tokens, usdPerToken: 0 });
  return out;
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
