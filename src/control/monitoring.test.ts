// The alert rules and the Grafana dashboard shipped under deploy/ read the
// control plane's own metrics: every llmgw_ name they use must be one the
// control plane registers, so a renamed metric fails here, not silently in
// an operator's Prometheus.
import { readFileSync } from 'node:fs';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { RouterMetrics } from '../gateway/core/metrics.js';
import { registerNodeMetrics } from './inventory/index.js';
import { ReconcilerMetrics } from './reconciler/metrics.js';

const deploy = (path: string) => readFileSync(new URL(`../../deploy/${path}`, import.meta.url), 'utf8');

/** The names a control plane serves on /metrics, with a histogram's series names. */
function registered(): Set<string> {
  const registry = new Registry();
  new RouterMetrics(
    registry,
    () => new Map(),
    () => new Map(),
  );
  new ReconcilerMetrics(registry, () => []);
  registerNodeMetrics(registry, { list: () => [], liveness: () => 'up' });
  const names = new Set<string>();
  for (const m of registry.getMetricsAsArray()) {
    names.add(m.name);
    if (String(m.type) === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) names.add(m.name + suffix);
  }
  return names;
}

function namesIn(exprs: readonly string[]): string[] {
  return [...new Set(exprs.flatMap((e) => [...e.matchAll(/\bllmgw_[a-z_]+/g)].map((m) => m[0])))].sort();
}

describe('deploy/ monitoring files', () => {
  const known = registered();

  it('alert on metrics the control plane serves', () => {
    const rules = (
      parse(deploy('prometheus/llmgw-alerts.yml')) as { groups: { rules: { alert: string; expr: string }[] }[] }
    ).groups.flatMap((g) => g.rules);
    expect(rules.length).toBeGreaterThan(5);
    const used = namesIn(rules.map((r) => r.expr));
    expect(used.length).toBeGreaterThan(5);
    expect(
      used.filter((n) => !known.has(n)),
      'metrics the alert rules use that nothing registers',
    ).toEqual([]);
  });

  it('chart metrics the control plane serves', () => {
    const dashboard = JSON.parse(deploy('grafana/llmgw-dashboard.json')) as {
      panels: { title: string; targets: { expr: string }[] }[];
    };
    const used = namesIn(dashboard.panels.flatMap((p) => p.targets.map((t) => t.expr)));
    expect(used.length).toBeGreaterThan(5);
    expect(
      used.filter((n) => !known.has(n)),
      'metrics the dashboard charts that nothing registers',
    ).toEqual([]);
  });
});
