// Traffic for the dashboard: a small ring of samples of the router's own
// Prometheus counters and histograms, taken every few seconds, and the rates
// and percentiles computed from the differences between them. Separate from
// the pages because it is the one part with a timer and arithmetic worth
// testing alone; reading the same registry /metrics serves means the
// dashboard and a Prometheus scraping the control plane cannot disagree.
import type { Registry } from 'prom-client';

export const REQUESTS_METRIC = 'llmgw_router_requests_total';
export const TTFT_METRIC = 'llmgw_router_time_to_first_byte_seconds';
export const DURATION_METRIC = 'llmgw_router_request_duration_seconds';

/** Cumulative counts of one histogram: `counts[i]` observations were <= `les[i]` seconds; the last `le` is Infinity. */
export interface HistogramCounts {
  les: number[];
  counts: number[];
}

/** One model's counters at one moment, all cumulative since the control plane started. */
export interface ModelCounters {
  requests: number;
  /** Answered 5xx: the fleet failed. */
  errors: number;
  /** Answered 4xx: refused (auth, limits, bad request). */
  refused: number;
  ttft: HistogramCounts;
  duration: HistogramCounts;
}

export interface TrafficSample {
  atMs: number;
  models: ReadonlyMap<string, ModelCounters>;
}

export interface TrafficSamplerOptions {
  registry: Registry;
  now: () => number;
  /** Between samples, ms. Absent = 5000. */
  intervalMs?: number;
  /** Samples kept; the oldest is dropped. Absent = 180 (15 minutes at 5 s). */
  keep?: number;
}

/** The ring of samples. start() takes one at once and then one per interval; stop() ends the timer. */
export class TrafficSampler {
  private readonly ring: TrafficSample[] = [];
  private timer: NodeJS.Timeout | null = null;
  readonly intervalMs: number;
  private readonly keep: number;

  constructor(private readonly options: TrafficSamplerOptions) {
    this.intervalMs = options.intervalMs ?? 5000;
    this.keep = options.keep ?? 180;
  }

  start(): void {
    if (this.timer) return;
    void this.sample();
    this.timer = setInterval(() => void this.sample(), this.intervalMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  /** Takes one sample now. A registry that cannot be read leaves a gap rather than a made-up zero. */
  async sample(): Promise<void> {
    let models: Map<string, ModelCounters>;
    try {
      models = await readCounters(this.options.registry);
    } catch {
      return;
    }
    this.ring.push({ atMs: this.options.now(), models });
    while (this.ring.length > this.keep) this.ring.shift();
  }

  samples(): readonly TrafficSample[] {
    return this.ring;
  }
}

interface MetricValue {
  value: number;
  labels: Record<string, string | number | undefined>;
  metricName?: string;
}

async function valuesOf(registry: Registry, name: string): Promise<MetricValue[]> {
  const metric = registry.getSingleMetric(name);
  if (!metric) return [];
  const got = (await metric.get()) as { values: MetricValue[] };
  return got.values;
}

/** The router's counters per model, read from the registry. A model appears once it has had a request. */
export async function readCounters(registry: Registry): Promise<Map<string, ModelCounters>> {
  const models = new Map<string, ModelCounters>();
  const of = (model: string): ModelCounters => {
    let m = models.get(model);
    if (!m) {
      m = { requests: 0, errors: 0, refused: 0, ttft: { les: [], counts: [] }, duration: { les: [], counts: [] } };
      models.set(model, m);
    }
    return m;
  };
  for (const v of await valuesOf(registry, REQUESTS_METRIC)) {
    const model = String(v.labels.model ?? '');
    const status = Number(v.labels.status);
    const m = of(model);
    m.requests += v.value;
    if (status >= 500) m.errors += v.value;
    else if (status >= 400) m.refused += v.value;
  }
  for (const [name, field] of [
    [TTFT_METRIC, 'ttft'],
    [DURATION_METRIC, 'duration'],
  ] as const) {
    for (const v of await valuesOf(registry, name)) {
      if (v.metricName !== `${name}_bucket`) continue;
      const le = v.labels.le === '+Inf' ? Infinity : Number(v.labels.le);
      const h = of(String(v.labels.model ?? ''))[field];
      h.les.push(le);
      h.counts.push(v.value);
    }
  }
  return models;
}

/** One model's traffic over a window. Null = not known (too few samples, or no observations to take a percentile of). */
export interface ModelTraffic {
  model: string;
  requestsPerSecond: number | null;
  errorsPerSecond: number | null;
  refusedPerSecond: number | null;
  /** Since the control plane started. */
  requestsTotal: number;
  errorsTotal: number;
  ttftP50s: number | null;
  ttftP95s: number | null;
  ttftP99s: number | null;
  durationP50s: number | null;
  durationP95s: number | null;
  durationP99s: number | null;
}

export interface SeriesPoint {
  atMs: number;
  /** Null: a gap (no observations in that interval). */
  value: number | null;
}

export interface TrafficView {
  /** The window the rates and percentiles cover, ms; null when fewer than two samples exist. */
  windowMs: number | null;
  intervalMs: number;
  models: ModelTraffic[];
  /** Requests per second per interval, per model. */
  rateSeries: Map<string, SeriesPoint[]>;
  /** 95th percentile time to first byte per interval, seconds, per model. */
  ttftP95Series: Map<string, SeriesPoint[]>;
}

/** Rates and percentiles over the last `windowMs` of samples (pure: the samples are passed in). */
export function trafficView(samples: readonly TrafficSample[], windowMs: number, intervalMs: number): TrafficView {
  const last = samples[samples.length - 1];
  const names = new Set<string>();
  for (const s of samples) for (const name of s.models.keys()) names.add(name);
  const rateSeries = new Map<string, SeriesPoint[]>();
  const ttftP95Series = new Map<string, SeriesPoint[]>();
  if (!last) return { windowMs: null, intervalMs, models: [], rateSeries, ttftP95Series };
  // The oldest sample still inside the window is the baseline.
  const first = samples.find((s) => last.atMs - s.atMs <= windowMs) ?? last;
  const spanS = (last.atMs - first.atMs) / 1000;
  const models: ModelTraffic[] = [];
  for (const name of [...names].sort()) {
    const now = last.models.get(name);
    const then = first.models.get(name);
    const diff = (f: (m: ModelCounters) => number): number | null =>
      spanS > 0 ? ((now ? f(now) : 0) - (then ? f(then) : 0)) / spanS : null;
    const ttft = now ? subtract(now.ttft, then?.ttft) : null;
    const duration = now ? subtract(now.duration, then?.duration) : null;
    models.push({
      model: name,
      requestsPerSecond: diff((m) => m.requests),
      errorsPerSecond: diff((m) => m.errors),
      refusedPerSecond: diff((m) => m.refused),
      requestsTotal: now?.requests ?? 0,
      errorsTotal: now?.errors ?? 0,
      ttftP50s: ttft && spanS > 0 ? quantile(ttft, 0.5) : null,
      ttftP95s: ttft && spanS > 0 ? quantile(ttft, 0.95) : null,
      ttftP99s: ttft && spanS > 0 ? quantile(ttft, 0.99) : null,
      durationP50s: duration && spanS > 0 ? quantile(duration, 0.5) : null,
      durationP95s: duration && spanS > 0 ? quantile(duration, 0.95) : null,
      durationP99s: duration && spanS > 0 ? quantile(duration, 0.99) : null,
    });
    const rates: SeriesPoint[] = [];
    const p95s: SeriesPoint[] = [];
    for (let i = 1; i < samples.length; i++) {
      const a = samples[i - 1]!;
      const b = samples[i]!;
      const dtS = (b.atMs - a.atMs) / 1000;
      if (dtS <= 0) continue;
      const ma = a.models.get(name);
      const mb = b.models.get(name);
      rates.push({ atMs: b.atMs, value: ((mb?.requests ?? 0) - (ma?.requests ?? 0)) / dtS });
      p95s.push({ atMs: b.atMs, value: mb ? quantile(subtract(mb.ttft, ma?.ttft), 0.95) : null });
    }
    rateSeries.set(name, rates);
    ttftP95Series.set(name, p95s);
  }
  return { windowMs: spanS > 0 ? last.atMs - first.atMs : null, intervalMs, models, rateSeries, ttftP95Series };
}

/** Observations between two cumulative readings of one histogram. */
export function subtract(now: HistogramCounts, then: HistogramCounts | undefined): HistogramCounts {
  if (!then || then.les.length !== now.les.length) return now;
  return { les: now.les, counts: now.counts.map((c, i) => c - (then.counts[i] ?? 0)) };
}

/**
 * The q-quantile of a bucketed histogram, interpolated linearly inside the
 * bucket the way Prometheus's histogram_quantile does; null when it holds no
 * observations. A quantile in the +Inf bucket answers the highest finite
 * bound: "at least that", the most the buckets can say.
 */
export function quantile(h: HistogramCounts, q: number): number | null {
  const total = h.counts[h.counts.length - 1] ?? 0;
  if (total <= 0) return null;
  const rank = q * total;
  for (let i = 0; i < h.counts.length; i++) {
    const count = h.counts[i]!;
    if (count < rank) continue;
    const le = h.les[i]!;
    const lower = i === 0 ? 0 : h.les[i - 1]!;
    if (le === Infinity) return lower;
    const below = i === 0 ? 0 : h.counts[i - 1]!;
    const inBucket = count - below;
    return inBucket <= 0 ? le : lower + ((le - lower) * (rank - below)) / inBucket;
  }
  return null;
}
