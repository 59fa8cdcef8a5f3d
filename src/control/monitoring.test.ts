// The alert rules and the Grafana dashboard shipped under deploy/ read the
// control plane's own metrics: every llmgw_ name they use must be one the
// control plane registers, so a renamed metric fails here, not silently in
// an operator's Prometheus. And the alert rules fire when they should and
// stay silent when they should not, by Prometheus's own evaluator (promtool,
// from Debian's prometheus package, which .ci/run installs).
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Registry } from 'prom-client';
import { afterAll, describe, expect, it } from 'vitest';
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

/** Where promtool is, or null: then the rule tests skip on a developer's machine and fail under CI. */
function promtool(): string | null {
  const found = spawnSync('sh', ['-c', 'command -v promtool'], { encoding: 'utf8' });
  return found.status === 0 ? found.stdout.trim() : null;
}

const PROMTOOL = promtool();
const RULES = new URL('../../deploy/prometheus/', import.meta.url).pathname;

describe.skipIf(PROMTOOL === null && !process.env.CI)('deploy/ alert rules, by promtool', () => {
  const dir = mkdtempSync(join(tmpdir(), 'llmgw-promtool-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  /** promtool's rule tests over `rules` (the shipped file's text by default), with what it printed. */
  function testRules(rules = readFileSync(join(RULES, 'llmgw-alerts.yml'), 'utf8')): {
    status: number | null;
    out: string;
  } {
    if (PROMTOOL === null)
      throw new Error("CI is set but promtool is not installed: .ci/run installs Debian's prometheus package");
    writeFileSync(join(dir, 'llmgw-alerts.yml'), rules);
    copyFileSync(join(RULES, 'llmgw-alerts.test.yml'), join(dir, 'llmgw-alerts.test.yml'));
    const run = spawnSync(PROMTOOL, ['test', 'rules', join(dir, 'llmgw-alerts.test.yml')], { encoding: 'utf8' });
    return { status: run.status, out: `${run.stdout}${run.stderr}` };
  }

  it('fire each alert on the series that should, with its labels and annotations, and none on the others', () => {
    const run = testRules();
    expect(run.status, run.out).toBe(0);
    expect(run.out).toContain('SUCCESS');
  });

  it('cover every alert the rules file ships', () => {
    const alerts = (
      parse(readFileSync(join(RULES, 'llmgw-alerts.yml'), 'utf8')) as { groups: { rules: { alert: string }[] }[] }
    ).groups.flatMap((g) => g.rules.map((r) => r.alert));
    const tests = (
      parse(readFileSync(join(RULES, 'llmgw-alerts.test.yml'), 'utf8')) as {
        tests: { alert_rule_test: { alertname: string; exp_alerts: unknown[] }[] }[];
      }
    ).tests.flatMap((t) => t.alert_rule_test);
    const firing = new Set(tests.filter((t) => t.exp_alerts.length > 0).map((t) => t.alertname));
    expect(
      alerts.filter((a) => !firing.has(a)),
      'alerts no test sees fire',
    ).toEqual([]);
  });

  it('fail when a threshold moves: the tests can tell', () => {
    const shipped = readFileSync(join(RULES, 'llmgw-alerts.yml'), 'utf8');
    const moved = shipped.replace(
      '/ sum by (model) (rate(llmgw_router_requests_total[5m])) > 0.05',
      '/ sum by (model) (rate(llmgw_router_requests_total[5m])) > 0.5',
    );
    expect(moved, 'the threshold the mutation moves is in the file').not.toBe(shipped);
    const run = testRules(moved);
    expect(run.status, run.out).not.toBe(0);
    expect(run.out).toMatch(/LlmgwServerErrors/);
  });
});
