// The price derived from GPU-hours, end to end: a real `llmgw control` with
// gpu_prices, a simulated agent reporting two H100s, a sim replica of a
// model with no token price holding one of them, and chats through the
// client listener. Guards against a GPU-priced model's usage staying free
// (its rows at $0), against its tokens not being counted to the replica that
// served them, and against ctl's spend per model not showing the
// GPU-hours and the measured cost per million tokens; and, in Chromium, the
// dashboard's spend and budgets pages as a viewer and a team-admin see them;
// and a `llmgw gateway` beside the control plane, whose tokens are charged
// and counted to their replica as the control plane's are.
import { mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser } from 'playwright-core';
import { AdminClient } from '../../src/api/index.js';
import { haveChromium, launchChromium, loggedInPage, textOf } from '../support/browser.js';
import { killEnginesOf, startControl, startLlmgw, stopAll } from '../support/processes.js';
import { waitFor } from '../support/wait.js';
import { runCtlCli } from './ctl-support.js';

const JOIN = 'e2e-gpu-cost-join-token-0123456789abcdef';
const ADMIN = 'e2e-gpu-cost-admin-token-0123456789abcdef';

let dir: string;
let api: AdminClient;
let adminUrl: string;
let clientUrl: string;
const stateDirs: string[] = [];
let browser: Browser | undefined;

/** Four chats of model byhour through the client listener at `url`, each answered with 200. */
async function fourChats(url: string): Promise<void> {
  for (let i = 0; i < 4; i++) {
    const res = await fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'byhour', messages: [{ role: 'user', content: `q${i}` }], max_tokens: 8 }),
    });
    expect(res.status).toBe(200);
    await res.arrayBuffer();
  }
}

describe('a model priced by the GPU-hours it holds', () => {
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'llmgw-e2e-gpu-cost-'));
    const control = await startControl([
      '--store',
      `sqlite:${join(dir, 'db')}`,
      '--join-token',
      JOIN,
      '--admin-token',
      ADMIN,
      '--api-keys',
      'off',
      '--reconcile-interval',
      '500ms',
      // An H100 at $3,600 an hour is a dollar a second: a few seconds held make a cost no rounding hides.
      '--gpu-prices',
      'H100=3600',
      '--log-level',
      'warn',
    ]);
    api = new AdminClient({ baseUrl: control.urls.admin, token: ADMIN, actor: 'e2e' });
    adminUrl = control.urls.admin;
    clientUrl = control.urls.client;
    const stateDir = join(dir, 'n1');
    stateDirs.push(stateDir);
    // Engine ports 35700-35749, apart from the other e2e files.
    startLlmgw([
      'agent',
      '--control',
      control.urls.agent,
      '--join-token',
      JOIN,
      '--node-id',
      'n1',
      '--state-dir',
      stateDir,
      '--simulate',
      'gpus=2xh100-80gb,ram=64g,disk=/data:1t:local',
      '--heartbeat-interval',
      '300ms',
      '--port-range',
      '35700-35749',
      '--log-level',
      'warn',
    ]);
    await waitFor('the agent to join', async () =>
      (await api.nodes()).some((n) => n.liveness === 'up' && n.gpu_total === 2) ? true : undefined,
    );
    const weights = join(dir, 'weights');
    mkdirSync(weights, { recursive: true });
    await api.addModel({
      name: 'byhour',
      source: `file://${weights}`,
      scaling: { min: 1 },
      profiles: [{ engine: 'sim', gpus: 1 }],
    });
    await waitFor(
      'the replica to be ready',
      async () => ((await api.replicas({ model: 'byhour' })).some((r) => r.state === 'ready') ? true : undefined),
      60_000,
    );
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await stopAll();
    killEnginesOf(stateDirs);
  });

  it("charges its usage the replica's GPU-hours and shows them with the measured cost per million tokens", async () => {
    await fourChats(clientUrl);
    // The meter settles every 5 s and usage is written every 2 s: the charge lands within a few of each.
    const row = await waitFor(
      'the usage to be charged',
      async () => {
        const m = (await api.spend()).models.find((x) => x.model === 'byhour');
        return m && m.cost_usd > 0 && m.gpu_hours > 0 ? m : undefined;
      },
      30_000,
    );
    expect(row.price, 'no token price: the cost is derived').toBeNull();
    expect(row.requests).toBe(4);
    // One GPU held (of two reported): its hours are about the seconds since placement, never both GPUs'.
    expect(row.gpu_cost_usd).toBeCloseTo(row.gpu_hours * 3600, 6);
    expect(row.cost_usd, 'usage is charged no more than the GPU cost').toBeLessThanOrEqual(row.gpu_cost_usd + 1e-9);
    expect(row.measured_usd_per_million).toBeGreaterThan(0);
    // Priced per replica (usage names the replica that answered): the one replica's row comes to hold every token
    // served (the meter settles every 5 s, apart from usage's writes).
    const [replica] = (await api.replicas({ model: 'byhour' })).filter((r) => r.state === 'ready');
    const db = new BetterSqlite3(join(dir, 'db'), { readonly: true });
    try {
      const read = db.prepare('SELECT tokens, cost_usd FROM replica_gpu_cost WHERE replica_id = ?');
      const own = await waitFor(
        "the replica's row to hold every token",
        async () => {
          const r = read.get(replica!.id) as { tokens: number; cost_usd: number } | undefined;
          return r && r.tokens === row.prompt_tokens + row.completion_tokens ? r : undefined;
        },
        30_000,
      );
      expect(own.cost_usd).toBeGreaterThan(0);
    } finally {
      db.close();
    }

    const ctl = await runCtlCli(['usage', '--by', 'model'], {
      env: { LLMGW_ADMIN_URL: adminUrl, LLMGW_ADMIN_TOKEN: ADMIN, NO_COLOR: '1' },
    });
    expect(ctl.code, ctl.stderr).toBe(0);
    // A bordered table: the model's row names it, says its price is derived, and gives a measured dollar figure.
    const line = ctl.stdout.split('\n').find((l) => l.includes('byhour'));
    expect(line, ctl.stdout).toMatch(/from GPU-hours/);
    expect(line, ctl.stdout).toMatch(/\$\d/);
    expect(ctl.stdout).toMatch(/MEASURED PER 1M/);
  });

  it('charges the tokens an `llmgw gateway` process serves beside it, counted to their replica', async () => {
    const before = (await api.spend()).models.find((x) => x.model === 'byhour')!;
    // A gateway on the same store, given the control plane's gpu_prices: without them it neither counts its tokens to
    // the replica nor charges them (docs/gpu-cost.md).
    const gateway = startLlmgw([
      'gateway',
      '--store',
      `sqlite:${join(dir, 'db')}`,
      '--client-addr',
      '127.0.0.1:0',
      '--api-keys',
      'off',
      '--gpu-prices',
      'H100=3600',
      '--log-level',
      'warn',
    ]);
    const gatewayUrl = (await gateway.waitForLog((e) => e.msg === 'llmgw gateway listening', 60_000)).client as string;
    await waitFor('the gateway to route byhour', async () => {
      const res = await fetch(`${gatewayUrl}/v1/models`);
      const list = res.status === 200 ? ((await res.json()) as { data: { id: string }[] }) : null;
      return list?.data.some((m) => m.id === 'byhour') ? true : undefined;
    });
    await fourChats(gatewayUrl);
    // The control plane served nothing since: a cost added to the row now is the gateway's charge for its tokens.
    const after = await waitFor(
      "the gateway's usage to be charged",
      async () => {
        const m = (await api.spend()).models.find((x) => x.model === 'byhour');
        return m && m.requests === before.requests + 4 && m.cost_usd > before.cost_usd ? m : undefined;
      },
      30_000,
    );
    expect(after.completion_tokens).toBeGreaterThan(before.completion_tokens);
    // Its tokens are counted to the replica that served them, beside the control plane's.
    const [replica] = (await api.replicas({ model: 'byhour' })).filter((r) => r.state === 'ready');
    const db = new BetterSqlite3(join(dir, 'db'), { readonly: true });
    try {
      const read = db.prepare('SELECT tokens FROM replica_gpu_cost WHERE replica_id = ?');
      await waitFor(
        "the replica's row to hold the gateway's tokens too",
        async () => {
          const r = read.get(replica!.id) as { tokens: number } | undefined;
          return r && r.tokens === after.prompt_tokens + after.completion_tokens ? r : undefined;
        },
        30_000,
      );
    } finally {
      db.close();
    }
    await gateway.stop();
  }, 90_000);

  it.skipIf(!haveChromium && !process.env.CI)(
    "shows spend and budgets in the dashboard, a team-admin's cut to its team",
    async () => {
      await api.createTeam({ name: 'ml' });
      await api.createTeam({ name: 'web' });
      const mlKey = await api.createKey({ name: 'ml-ci', team: 'ml' });
      await api.createBudget({ scope: 'team', subject: 'ml', unit: 'usd', period: 'month', amount: 250 });
      await api.createBudget({ scope: 'key', subject: mlKey.id, unit: 'tokens', period: 'day', amount: 10_000 });
      await api.createBudget({ scope: 'team', subject: 'web', unit: 'tokens', period: 'day', amount: 1_000 });
      const viewer = await api.createPerson({ name: 'vera', role: 'viewer' });
      const lead = await api.createPerson({ name: 'tom', role: 'team-admin', teams: ['ml'] });
      browser = await launchChromium();

      // A viewer follows the nav to Spend: the GPU-priced model's row with its GPU-hours and measured cost.
      const page = await loggedInPage(browser, adminUrl, viewer.token);
      await page.click('header a[href="/spend"]');
      await page.waitForURL(`${adminUrl}/spend`);
      const row = await textOf(page, '#spend-models tr[data-model="byhour"]');
      expect(row).toContain('from GPU-hours');
      expect(
        Number(await textOf(page, '#spend-models tr[data-model="byhour"] [data-field="gpu-hours"]')),
      ).toBeGreaterThan(0);
      expect(await textOf(page, '#spend-models tr[data-model="byhour"] [data-field="measured"]')).toMatch(/^\$\d/);
      await page.goto(`${adminUrl}/budgets`);
      expect(await page.locator('tr[data-budget]').count()).toBe(3);

      // A team-admin of ml: its team's budget and its key's, used of the limit and the reset; never web's.
      const own = await loggedInPage(browser, adminUrl, lead.token, '/budgets');
      expect(await own.locator('tr[data-budget]').count()).toBe(2);
      expect(await own.content()).not.toContain('team web');
      const used = await textOf(own, 'tr[data-budget]:has-text("team ml") [data-field="used"]');
      expect(used).toBe('$0.00 of $250.00 per month (0%)');
      expect(await textOf(own, 'tr[data-budget]:has-text("team ml") [data-field="resets"]')).toMatch(
        /^\d{4}-\d\d-01T00:00:00\.000Z$/,
      );
      expect(await textOf(own, '#scope-note')).toBe('Shown for your teams only: ml.');
      await own.goto(`${adminUrl}/teams`);
      expect(await own.locator('tr[data-team]').count()).toBe(1);
    },
    60_000,
  );
});
