// Traffic arithmetic: percentiles from buckets the way Prometheus computes
// them, rates from differences between samples, and "unknown" (null) rather
// than 0 wherever there is nothing to compute from.
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { RouterMetrics } from '../../gateway/core/metrics.js';
import { quantile, readCounters, type TrafficSample, trafficView } from './traffic.js';

describe('traffic: percentiles', () => {
  it('interpolates inside the bucket, like histogram_quantile', () => {
    // 10 observations <= 0.1 s, 10 more <= 0.2 s.
    const h = { les: [0.1, 0.2, Infinity], counts: [10, 20, 20] };
    expect(quantile(h, 0.5)).toBeCloseTo(0.1);
    expect(quantile(h, 0.75)).toBeCloseTo(0.15);
  });

  it('answers null, not 0, for a histogram with no observations', () => {
    expect(quantile({ les: [0.1, Infinity], counts: [0, 0] }, 0.95)).toBeNull();
    expect(quantile({ les: [], counts: [] }, 0.5)).toBeNull();
  });

  it('answers the highest finite bound for a quantile in the +Inf bucket', () => {
    expect(quantile({ les: [0.1, 120, Infinity], counts: [0, 0, 5] }, 0.5)).toBe(120);
  });
});

describe('traffic: samples of the router metrics', () => {
  it('reads requests, errors and histograms per model from the registry', async () => {
    const registry = new Registry();
    const m = new RouterMetrics(registry);
    m.countRequest('a', 200, 'k1');
    m.countRequest('a', 200, 'k2');
    m.countRequest('a', 503, 'k1');
    m.countRequest('a', 429, 'k1');
    m.forModel('a').ttft.observe(0.3);
    const got = await readCounters(registry);
    const a = got.get('a')!;
    expect(a.requests).toBe(4);
    expect(a.errors).toBe(1);
    expect(a.refused).toBe(1);
    expect(a.ttft.counts[a.ttft.counts.length - 1]).toBe(1);
    expect(a.ttft.les[a.ttft.les.length - 1]).toBe(Infinity);
  });

  it('computes rates over the window from the first and last samples, and unknown with one sample', () => {
    const h = (n: number) => ({ les: [0.1, 1, Infinity], counts: [n, n, n] });
    const at = (atMs: number, requests: number): TrafficSample => ({
      atMs,
      models: new Map([['a', { requests, errors: 0, refused: 0, ttft: h(requests), duration: h(requests) }]]),
    });
    const one = trafficView([at(0, 5)], 60_000, 5000);
    expect(one.windowMs).toBeNull();
    expect(one.models[0]!.requestsPerSecond).toBeNull();
    expect(one.models[0]!.ttftP95s).toBeNull();
    expect(one.models[0]!.requestsTotal).toBe(5);

    const view = trafficView([at(0, 0), at(5000, 10), at(10_000, 30)], 60_000, 5000);
    expect(view.windowMs).toBe(10_000);
    expect(view.models[0]!.requestsPerSecond).toBe(3);
    expect(view.rateSeries.get('a')!.map((p) => p.value)).toEqual([2, 4]);
    // Only samples inside the window count: the last 5 s saw 20 requests.
    expect(trafficView([at(0, 0), at(5000, 10), at(10_000, 30)], 5000, 5000).models[0]!.requestsPerSecond).toBe(4);
  });
});
