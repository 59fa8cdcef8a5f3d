// A real Prometheus (Debian's package) scrapes `llmgw up` the way
// docs/operations.md tells an operator to set it up: the admin listener's
// /metrics with the admin token as a bearer token, and the shipped alert
// rules loaded. Guards the monitoring files against drifting from what a
// running llmgw serves: the metric-name check in src/control/monitoring
// .test.ts reads a registry in process, while this reads what Prometheus
// itself scraped and evaluated. Skipped without Debian's prometheus package
// on a developer's machine; under CI (.ci/run installs it) a failure.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { type DemoUp, startDemoUp } from '../support/demo-up.js';
import { freePort } from '../support/processes.js';
import { waitFor } from '../support/wait.js';

const PROMETHEUS = '/usr/bin/prometheus';
const RULES = fileURLToPath(new URL('../../deploy/prometheus/llmgw-alerts.yml', import.meta.url));

/** The alert names the shipped rules file defines. */
function shippedAlerts(): string[] {
  return [...readFileSync(RULES, 'utf8').matchAll(/- alert: (\w+)/g)].map((m) => m[1]!).sort();
}

interface QueryAnswer {
  status: string;
  data: { result: { metric: Record<string, string>; value: [number, string] }[] };
}

describe.skipIf(!existsSync(PROMETHEUS) && !process.env.CI)("Debian's Prometheus scraping llmgw up", () => {
  let demo: DemoUp;
  let dir: string;
  let prometheus: ChildProcess;
  let url: string;
  const printed: string[] = [];

  beforeAll(async () => {
    if (!existsSync(PROMETHEUS))
      throw new Error(`CI is set but ${PROMETHEUS} is missing: .ci/run installs Debian's prometheus package`);
    demo = await startDemoUp('prometheus');
    dir = mkdtempSync(join(tmpdir(), 'llmgw-prometheus-'));
    const config = {
      global: { scrape_interval: '1s', evaluation_interval: '1s' },
      rule_files: [RULES],
      scrape_configs: [
        {
          job_name: 'llmgw',
          metrics_path: '/metrics',
          // As docs/operations.md says: the admin token, read from the file `llmgw up` keeps it in.
          authorization: { credentials_file: demo.adminTokenFile },
          static_configs: [{ targets: [new URL(demo.admin).host] }],
        },
      ],
    };
    writeFileSync(join(dir, 'prometheus.yml'), stringify(config));
    const port = await freePort();
    url = `http://127.0.0.1:${port}`;
    prometheus = spawn(
      PROMETHEUS,
      [
        `--config.file=${join(dir, 'prometheus.yml')}`,
        `--storage.tsdb.path=${join(dir, 'data')}`,
        `--web.listen-address=127.0.0.1:${port}`,
        '--log.level=warn',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    for (const stream of [prometheus.stdout!, prometheus.stderr!])
      stream.on('data', (chunk: Buffer) => printed.push(chunk.toString('utf8')));
  }, 240_000);

  afterAll(async () => {
    if (prometheus?.pid !== undefined && prometheus.exitCode === null) {
      const exited = new Promise((resolve) => prometheus.once('exit', resolve));
      prometheus.kill('SIGTERM');
      await exited;
    }
    await demo?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  async function query(promql: string): Promise<QueryAnswer['data']['result']> {
    const res = await fetch(`${url}/api/v1/query?query=${encodeURIComponent(promql)}`);
    const body = (await res.json()) as QueryAnswer;
    if (body.status !== 'success') throw new Error(`Prometheus answered ${res.status}: ${JSON.stringify(body)}`);
    return body.data.result;
  }

  it("scrapes /metrics with the admin token, and holds llmgw's own series after a request", async () => {
    const up = await waitFor(
      () => `Prometheus to scrape llmgw up; it printed: ${printed.join('')}`,
      async () => {
        const result = await query('up{job="llmgw"}');
        return result.length === 1 && result[0]!.value[1] === '1' ? result[0] : undefined;
      },
      60_000,
    );
    expect(up.metric.instance).toBe(new URL(demo.admin).host);

    const reply = await fetch(`${demo.client}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${demo.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'demo', messages: [{ role: 'user', content: 'Hello' }], max_tokens: 4 }),
    });
    expect(reply.status).toBe(200);
    await reply.arrayBuffer();
    const counted = await waitFor(
      'the request in llmgw_router_requests_total',
      async () => {
        const result = await query('sum(llmgw_router_requests_total{model="demo", status="200"})');
        return result.length === 1 && Number(result[0]!.value[1]) >= 1 ? Number(result[0]!.value[1]) : undefined;
      },
      30_000,
    );
    expect(counted).toBeGreaterThanOrEqual(1);
    const ready = await query('sum(llmgw_replicas{model="demo", state="ready"})');
    expect(
      ready.map((r) => r.value[1]),
      'the demo replica, ready, as the control plane counts it',
    ).toEqual(['1']);
  });

  it('loads the shipped alert rules and evaluates each on the scraped series without an error', async () => {
    const rules = await waitFor(
      'every rule evaluated',
      async () => {
        const res = await fetch(`${url}/api/v1/rules?type=alert`);
        const body = (await res.json()) as {
          data: { groups: { rules: { name: string; health: string; lastError?: string; state: string }[] }[] };
        };
        const all = body.data.groups.flatMap((g) => g.rules);
        return all.length > 0 && all.every((r) => r.health !== 'unknown') ? all : undefined;
      },
      30_000,
    );
    expect(rules.map((r) => r.name).sort()).toEqual(shippedAlerts());
    expect(
      rules.filter((r) => r.health !== 'ok').map((r) => `${r.name}: ${r.lastError}`),
      'rules Prometheus could not evaluate',
    ).toEqual([]);
    expect(
      rules.filter((r) => r.state === 'firing').map((r) => r.name),
      'nothing fires on a healthy demo',
    ).toEqual([]);
  }, 60_000);
});
