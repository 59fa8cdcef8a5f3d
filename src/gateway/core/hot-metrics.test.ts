import { describe, expect, it } from 'vitest';
import { Counter, Histogram, Registry } from 'prom-client';
import { HotCounter, HotHistogram } from './hot-metrics.js';

const BUCKETS = [0.001, 0.01, 0.1, 1];
const VALUES = [0.0005, 0.001, 0.002, 0.05, 0.1, 0.5, 3, 1e9];

describe('hot metrics', () => {
  it("write the same /metrics text as prom-client's histogram for the same observations", async () => {
    const theirs = new Registry();
    const ours = new Registry();
    const config = { name: 'x_seconds', help: 'How long x took.', labelNames: ['model'] as const, buckets: BUCKETS };
    const h = new Histogram({ ...config, labelNames: ['model'], registers: [theirs] });
    const hot = new HotHistogram<'model'>({ ...config, registers: [ours] });
    for (const model of ['a', 'b "quoted"']) {
      const series = hot.series({ model });
      for (const v of VALUES) {
        h.observe({ model }, v);
        series.observe(v);
      }
    }
    expect(await ours.metrics()).toBe(await theirs.metrics());
    expect(await ours.metrics()).toContain('x_seconds_bucket{le="0.01",model="a"} 3');
    // As a reader of the registry (the dashboard's traffic) gets them: every label together.
    const withoutExemplars = (o: unknown) =>
      JSON.parse(JSON.stringify(o, (k, v) => (k === 'exemplar' ? undefined : v)));
    expect(withoutExemplars(await ours.getMetricsAsJSON())).toEqual(withoutExemplars(await theirs.getMetricsAsJSON()));
  });

  it('write the same text for an unlabelled histogram and a counter', async () => {
    const theirs = new Registry();
    const ours = new Registry();
    const h = new Histogram({ name: 'o_seconds', help: 'o', buckets: BUCKETS, registers: [theirs] });
    const hot = new HotHistogram({ name: 'o_seconds', help: 'o', buckets: BUCKETS, registers: [ours] }).series({});
    const labelNames = ['model', 'status'] as const;
    const c = new Counter({ name: 'n_total', help: 'n', labelNames: [...labelNames], registers: [theirs] });
    const hotC = new HotCounter<'model' | 'status'>({ name: 'n_total', help: 'n', labelNames, registers: [ours] });
    for (const v of VALUES) {
      h.observe(v);
      hot.observe(v);
      c.inc({ model: 'm', status: v > 1 ? '500' : '200' });
      hotC.series({ model: 'm', status: v > 1 ? '500' : '200' }).inc();
    }
    expect(await ours.metrics()).toBe(await theirs.metrics());
    expect(await ours.metrics()).toContain('n_total{model="m",status="200"} 6');
  });

  it('keeps one series per label values; a reset zeroes them, and what they count after shows', async () => {
    const ours = new Registry();
    const hot = new HotCounter<'model'>({ name: 'r_total', help: 'r', labelNames: ['model'], registers: [ours] });
    const kept = hot.series({ model: 'a' });
    expect(hot.series({ model: 'a' })).toBe(kept);
    kept.inc();
    kept.inc();
    ours.resetMetrics();
    expect(await ours.metrics()).toContain('r_total{model="a"} 0');
    // The caller still holds the series it had: its counts reach /metrics.
    kept.inc();
    expect(await ours.metrics()).toContain('r_total{model="a"} 1');
  });
});
