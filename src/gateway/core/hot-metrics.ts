// Prometheus metrics that every request updates, made cheap to update.
// prom-client's labelled child still builds and hashes a label object on
// each observe, and finds the bucket by a number turned into a property
// name: about a microsecond each, and the gateway updates a counter and
// three histograms per request (some 5% of its CPU on whole answers).
// Here a series is a plain object the caller keeps: an observe is a short
// loop over the bounds and three additions. prom-client still writes the
// text: a registry reads these by get(), as it reads its own metrics, so
// /metrics shows the same names, labels and values.
import type { Metric, Registry } from 'prom-client';

type Labels = Readonly<Record<string, string>>;

/** One labelled series of a histogram: keep it and observe on it. */
export class HistogramSeries {
  /** Observations per bucket, not cumulative; the last counts those above every bound (+Inf only). */
  private readonly counts: Float64Array;
  private sum = 0;
  private count = 0;

  constructor(
    readonly labels: Labels,
    private readonly bounds: readonly number[],
  ) {
    this.counts = new Float64Array(bounds.length + 1);
  }

  observe(value: number): void {
    // prom-client refuses what is not a number; a duration always is, so such a value is dropped rather than thrown.
    if (!Number.isFinite(value)) return;
    const b = this.bounds;
    let i = 0;
    while (i < b.length && value > b[i]!) i++;
    this.counts[i]!++;
    this.sum += value;
    this.count++;
  }

  zero(): void {
    this.counts.fill(0);
    this.sum = 0;
    this.count = 0;
  }

  /** prom-client's values for this series: cumulative buckets (`le` first, as its own), then +Inf, sum and count. */
  values(name: string): MetricValue[] {
    const out: MetricValue[] = [];
    const shared = this.labels;
    let acc = 0;
    for (let i = 0; i < this.bounds.length; i++) {
      acc += this.counts[i]!;
      out.push({ labels: { le: this.bounds[i]! }, sharedLabels: shared, value: acc, metricName: `${name}_bucket` });
    }
    out.push({ labels: { le: '+Inf' }, sharedLabels: shared, value: this.count, metricName: `${name}_bucket` });
    out.push({ labels: this.labels, value: this.sum, metricName: `${name}_sum` });
    out.push({ labels: this.labels, value: this.count, metricName: `${name}_count` });
    return out;
  }
}

/** One labelled series of a counter: keep it and inc() it. */
export class CounterSeries {
  value = 0;

  constructor(readonly labels: Labels) {}

  inc(by = 1): void {
    this.value += by;
  }

  zero(): void {
    this.value = 0;
  }
}

interface MetricValue {
  labels: Record<string, string | number>;
  /** Printed after `labels`, as prom-client prints a histogram's own labels after `le`. */
  sharedLabels?: Labels;
  value: number;
  metricName?: string;
}

interface HotMetricObject<T extends 'histogram' | 'counter'> {
  name: string;
  help: string;
  type: T;
  aggregator: 'sum';
  values: MetricValue[];
}

interface HotConfig<L extends string> {
  readonly name: string;
  readonly help: string;
  /** Absent = one series without labels. */
  readonly labelNames?: readonly L[];
  readonly registers: readonly Registry[];
}

/** What the registries read: prom-client's metric interface, minus what only its own metrics need. */
abstract class HotMetric<L extends string, S extends { readonly labels: Labels; zero(): void }> {
  readonly name: string;
  readonly help: string;
  readonly aggregator = 'sum' as const;
  /** Prometheus' type, as prom-client's metrics carry it (readers of a registry's metrics look at it). */
  abstract readonly type: 'histogram' | 'counter';
  protected readonly labelNames: readonly L[];
  protected readonly all = new Map<string, S>();

  constructor(config: HotConfig<L>) {
    this.name = config.name;
    this.help = config.help;
    this.labelNames = config.labelNames ?? [];
    // A registry reads any metric by its get(), but its types name only prom-client's own classes.
    for (const r of config.registers) r.registerMetric(this as unknown as Metric);
  }

  /** The series of these label values, made on first use; a caller on a hot path keeps it. */
  series(values: Readonly<Record<L, string>>): S {
    let key = '';
    for (const n of this.labelNames) key += `${values[n]}\u0000`;
    let s = this.all.get(key);
    if (!s) {
      const labels: Record<string, string> = {};
      for (const n of this.labelNames) labels[n] = values[n];
      s = this.make(labels);
      this.all.set(key, s);
    }
    return s;
  }

  /**
   * Every series back to zero (prom-client's reset() forgets them instead):
   * callers keep their series, so a series forgotten here would go on
   * counting where no scrape sees it.
   */
  reset(): void {
    for (const s of this.all.values()) s.zero();
  }

  protected abstract make(labels: Labels): S;
}

export class HotHistogram<L extends string = never> extends HotMetric<L, HistogramSeries> {
  readonly type = 'histogram' as const;
  private readonly bounds: readonly number[];

  constructor(config: HotConfig<L> & { readonly buckets: readonly number[] }) {
    super(config);
    this.bounds = [...config.buckets].sort((a, b) => a - b);
  }

  protected make(labels: Labels): HistogramSeries {
    return new HistogramSeries(labels, this.bounds);
  }

  /** What a registry prints: the series' labels apart (`sharedLabels`), so that `le` comes first, as prom-client's. */
  async getForPromString(): Promise<HotMetricObject<'histogram'>> {
    const values: MetricValue[] = [];
    for (const s of this.all.values()) values.push(...s.values(this.name));
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }

  /** What a registry hands a reader (getMetricsAsJSON, getSingleMetric): every label in `labels`, as prom-client's. */
  async get(): Promise<HotMetricObject<'histogram'>> {
    const o = await this.getForPromString();
    return {
      ...o,
      values: o.values.map(({ sharedLabels, ...v }) => ({ ...v, labels: { ...v.labels, ...sharedLabels } })),
    };
  }
}

export class HotCounter<L extends string = never> extends HotMetric<L, CounterSeries> {
  readonly type = 'counter' as const;
  protected make(labels: Labels): CounterSeries {
    return new CounterSeries(labels);
  }

  async get(): Promise<HotMetricObject<'counter'>> {
    const values: MetricValue[] = [];
    for (const s of this.all.values()) values.push({ labels: s.labels, value: s.value });
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }
}
