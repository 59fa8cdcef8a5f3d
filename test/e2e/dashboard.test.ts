// The dashboard in a real browser (Debian's Chromium through playwright-core)
// against a real `llmgw control` with two simulated agents: log in, every
// page shows the numbers the admin API serves, a cordon from the page shows in
// `llmgw ctl nodes -o json`, a node label holding a script tag stays text, a
// form without its CSRF token is refused, and collect goes through its
// confirmation page. A screenshot of the overview lands in test-artifacts/.
//
// Without Chromium at /usr/bin/chromium this file fails under CI (the
// browser is part of CI's image, so its absence is a broken image) and is
// skipped, with a message, on a developer's machine.
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AdminClient, type NodeView } from '../../src/api/index.js';
import { cacheNameOf } from '../../src/protocol/index.js';
import { CHROMIUM, haveChromium, launchChromium, textOf } from '../support/browser.js';
import { killEnginesOf, startControl, startLlmgw, stopAll } from '../support/processes.js';
import { waitFor } from '../support/wait.js';
import { runCtlCli } from './ctl-support.js';

const JOIN = 'e2e-dashboard-join-token-0123456789abcdef';
const ADMIN = 'e2e-dashboard-admin-token-0123456789abcdef';
/** Free text an agent reports as it was typed: model names are restricted to [A-Za-z0-9._:/-], node label values are not. */
const SCRIPT_LABEL = '<script>window.__pwned=1</script><img src=x onerror=window.__pwned=2>';
const ARTIFACTS = fileURLToPath(new URL('../../test-artifacts/', import.meta.url));

if (!haveChromium && !process.env.CI) {
  process.stderr.write(
    `dashboard e2e: skipped, no Chromium at ${CHROMIUM} (apt-get install chromium); under CI this fails instead\n`,
  );
}

let dir: string;
let adminUrl: string;
let clientUrl: string;
let api: AdminClient;
let browser: Browser;
let context: BrowserContext;
let page: Page;
const stateDirs: string[] = [];
let orphanPath: string;

describe.skipIf(!haveChromium && !process.env.CI)('the dashboard in a browser', () => {
  beforeAll(async () => {
    if (!haveChromium) {
      throw new Error(
        `no Chromium at ${CHROMIUM}: CI's image must have Debian's chromium package (apt-get install chromium) for the dashboard's browser test`,
      );
    }
    dir = mkdtempSync(join(tmpdir(), 'llmgw-e2e-dashboard-'));
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
      '--log-level',
      'warn',
    ]);
    adminUrl = control.urls.admin;
    clientUrl = control.urls.client;
    api = new AdminClient({ baseUrl: adminUrl, token: ADMIN, actor: 'e2e' });
    // One cache entry no model wants, on n1: an orphan for the weights page.
    const cacheDir = join(dir, 'n1-cache');
    orphanPath = join(cacheDir, cacheNameOf('hf://org/forgotten')!);
    mkdirSync(join(orphanPath, 'files'), { recursive: true });
    writeFileSync(join(orphanPath, 'files', 'model.gguf'), Buffer.alloc(4096, 1));
    writeFileSync(join(orphanPath, 'manifest.json'), JSON.stringify({ source: 'hf://org/forgotten', files: [] }));
    // Engine ports in 27000-27999, apart from the other e2e files that may run at the same time.
    let ports = 27300;
    for (const id of ['n1', 'n2']) {
      const stateDir = join(dir, id);
      stateDirs.push(stateDir);
      startLlmgw([
        'agent',
        '--control',
        control.urls.agent,
        '--join-token',
        JOIN,
        '--node-id',
        id,
        '--state-dir',
        stateDir,
        ...(id === 'n1'
          ? ['--cache-dir', cacheDir, '--labels', `pool=a,note=${SCRIPT_LABEL}`]
          : ['--labels', 'pool=b']),
        '--simulate',
        'gpus=8xh100-80gb,ram=2048g,disk=/data:3.5t:local',
        '--heartbeat-interval',
        '300ms',
        '--port-range',
        `${ports}-${ports + 49}`,
        '--log-level',
        'warn',
      ]);
      ports += 50;
    }
    await waitFor('both agents to join', async () =>
      (await api.nodes()).filter((n) => n.liveness === 'up' && n.gpu_total === 8).length === 2 ? true : undefined,
    );
    const weights = join(dir, 'weights');
    mkdirSync(weights, { recursive: true });
    await api.addModel({
      name: 'chat',
      source: `file://${weights}`,
      scaling: { min: 1 },
      profiles: [{ engine: 'sim' }],
    });
    // A model no node can hold: the overview's attention list and the model page's explanation.
    await api.addModel(
      { name: 'huge', source: 'hf://org/huge', scaling: { min: 1 }, profiles: [{ engine: 'vllm', gpus: 16 }] },
      { force: true },
    );
    await waitFor(
      'chat to be ready',
      async () => ((await api.replicas({ model: 'chat' })).some((r) => r.state === 'ready') ? true : undefined),
      40_000,
    );
    // A few requests, so the traffic page has something to count.
    for (let i = 0; i < 3; i++) {
      const res = await fetch(`${clientUrl}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'chat', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 }),
      });
      await res.text();
    }

    browser = await launchChromium();
    context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
    page = await context.newPage();
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await stopAll();
    killEnginesOf(stateDirs);
  });

  const text = (selector: string): Promise<string> => textOf(page, selector);

  it('sends a visitor to the login page, says a wrong token is wrong, and logs in with the right one', async () => {
    await page.goto(`${adminUrl}/nodes`);
    expect(new URL(page.url()).pathname).toBe('/login');
    await page.fill('input[name=token]', 'not-the-admin-token');
    await page.click('form[action="/login"] button[type=submit]');
    expect(await text('#login-problem')).toContain('That admin token is wrong');
    expect(await page.content()).not.toContain('not-the-admin-token');
    await page.fill('input[name=token]', ADMIN);
    await page.click('form[action="/login"] button[type=submit]');
    await page.waitForURL(`${adminUrl}/nodes`);
    const cookies = await context.cookies(adminUrl);
    const session = cookies.find((c) => c.name === 'llmgw_session');
    expect(session?.httpOnly, 'the session cookie is HttpOnly').toBe(true);
    expect(session?.sameSite).toBe('Strict');
    expect(session?.value).not.toContain(ADMIN);
  });

  it('shows on the overview what the summary says, and saves a screenshot', async () => {
    await page.goto(`${adminUrl}/`);
    // Replica states move; compare page and API read at nearly the same moment, until they agree.
    await expect
      .poll(
        async () => {
          await page.reload();
          const summary = await api.summary();
          const items = await page.locator('#attention li').allTextContents();
          return (
            JSON.stringify({ nodes: await text('#card-nodes .n'), models: await text('#card-models .n'), items }) ===
            JSON.stringify({
              nodes: String(summary.nodes.total),
              models: String(summary.models.total),
              items: summary.attention,
            })
          );
        },
        { timeout: 15_000 },
      )
      .toBe(true);
    expect(await page.locator('#not-placed').textContent()).toContain('huge');
    expect(await text('#card-gpus .n')).toBe('16/16');
    mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: join(ARTIFACTS, 'dashboard-overview.png'), fullPage: true });
  });

  it('shows each node with the numbers the admin API serves', async () => {
    await page.goto(`${adminUrl}/nodes`);
    const nodes: NodeView[] = await api.nodes();
    for (const n of nodes) {
      const row = `tr[data-node="${n.id}"]`;
      expect(await text(`${row} [data-field=gpus]`), `GPUs of ${n.id}`).toBe(`${n.gpu_free}/${n.gpu_total} free`);
      expect(await text(`${row} [data-field=ram]`), `RAM of ${n.id}`).toBe(
        `${n.memory_free_gb}/${n.memory_gb} GiB free`,
      );
      expect(await text(`${row} [data-field=disk]`), `disk of ${n.id}`).toBe(
        `${n.disk_free_gb}/${n.disk_total_gb} GiB free`,
      );
      expect(await text(`${row} [data-field=state]`)).toBe(n.state);
      expect(await text(`${row} [data-field=agent]`)).toBe(n.agent_version);
      expect(await text(`${row} [data-field=replicas]`)).toBe(String(n.replicas));
    }
    await page.screenshot({ path: join(ARTIFACTS, 'dashboard-nodes.png'), fullPage: true });
  });

  it('shows a node label holding a script tag as text, and runs none of it', async () => {
    await page.goto(`${adminUrl}/nodes/n1`);
    expect(await text('#labels')).toContain(SCRIPT_LABEL);
    expect(await page.evaluate(() => (window as unknown as { __pwned?: number }).__pwned)).toBeUndefined();
    expect(await page.locator('#labels script, #labels img').count()).toBe(0);
  });

  it('shows models and replicas as the API does, and why a model is not placed', async () => {
    await page.goto(`${adminUrl}/models`);
    for (const m of await api.models()) {
      expect(await text(`tr[data-model="${m.name}"] [data-field=replicas]`), `replicas of ${m.name}`).toBe(
        `${m.ready_replicas}/${m.total_replicas}`,
      );
    }
    await page.goto(`${adminUrl}/models/huge`);
    expect(await text('#placement')).toContain('Not placed');
    const explain = await api.explain('huge');
    expect(explain.rejections?.length, 'placement has rejected huge by now').toBeGreaterThan(0);
    expect(await text('#placement')).toContain(explain.rejections![0]!.reason);
    // The placement failure is in the model's events, as the events log records it.
    await waitFor('the placement failure in the events panel', async () => {
      await page.reload();
      return (await text('#events')).includes('placement_failed') ? true : undefined;
    });
    await page.screenshot({ path: join(ARTIFACTS, 'dashboard-model-huge.png'), fullPage: true });
    // The agent reads the sim engine's metrics each second: its idle queue shows once the first sample has arrived.
    await waitFor("the ready replica's engine load", async () =>
      (await api.replicas({ model: 'chat' })).some((r) => r.load) ? true : undefined,
    );
    await page.goto(`${adminUrl}/replicas`);
    for (const r of await api.replicas()) {
      expect(await text(`tr[data-replica="${r.id}"] [data-field=state]`), `state of ${r.id}`).toBe(r.state);
      const queue = r.load ? `${r.load.waiting}/${r.load.running}` : '-';
      expect(
        await text(`tr[data-replica="${r.id}"] [data-field=queue]`),
        `engine queue of ${r.id} (waiting/running)`,
      ).toBe(queue);
      const kv = r.load?.kv_usage === undefined ? '-' : `${Math.round(r.load.kv_usage * 100)}%`;
      expect(await text(`tr[data-replica="${r.id}"] [data-field=kv]`), `KV use of ${r.id}`).toBe(kv);
    }
  });

  it('counts the requests the router answered, as /metrics does', async () => {
    const metrics = await (
      await fetch(`${adminUrl}/metrics`, { headers: { authorization: `Bearer ${ADMIN}` } })
    ).text();
    const counted = metrics
      .split('\n')
      .filter((l) => l.startsWith('llmgw_router_requests_total{') && l.includes('model="chat"'))
      .reduce((s, l) => s + Number(l.split(' ').pop()), 0);
    expect(counted).toBe(3);
    // The sampler reads every 5 s; the page shows the latest sample.
    await expect
      .poll(
        async () => {
          await page.goto(`${adminUrl}/traffic`);
          return (await page.locator('tr[data-model="chat"] [data-field=total]').count())
            ? text('tr[data-model="chat"] [data-field=total]')
            : '';
        },
        { timeout: 15_000 },
      )
      .toBe(String(counted));
    // Usage per endpoint, from the store (written every few seconds): the three chat requests, under endpoint chat.
    await expect
      .poll(
        async () => {
          await page.goto(`${adminUrl}/traffic`);
          return (await page.locator('tr[data-usage="chat:chat"]').count())
            ? `${await text('tr[data-usage="chat:chat"] [data-field=endpoint]')} ${await text('tr[data-usage="chat:chat"] [data-field=requests]')}`
            : '';
        },
        { timeout: 15_000 },
      )
      .toBe('chat 3');
    await page.screenshot({ path: join(ARTIFACTS, 'dashboard-traffic.png'), fullPage: true });
  });

  it('cordons a node from the page, and ctl sees it', async () => {
    await page.goto(`${adminUrl}/nodes`);
    await page.click('button[data-action="cordon:n2"]');
    await page.waitForURL(`${adminUrl}/nodes`);
    expect(await text('tr[data-node="n2"] [data-field=state]')).toBe('cordoned');
    const r = await runCtlCli(['nodes', '-o', 'json'], {
      env: { LLMGW_ADMIN_URL: adminUrl, LLMGW_ADMIN_TOKEN: ADMIN },
    });
    expect(r.code, r.stderr).toBe(0);
    const nodes = JSON.parse(r.stdout) as NodeView[];
    expect(nodes.find((n) => n.id === 'n2')?.state).toBe('cordoned');
    await api.uncordon('n2');
  });

  it('refreshes its panels without a reload', async () => {
    await page.goto(`${adminUrl}/nodes`);
    expect(await text('tr[data-node="n1"] [data-field=state]')).toBe('ready');
    await page.evaluate(() => ((window as unknown as { __sameDocument: boolean }).__sameDocument = true));
    await api.cordon('n1');
    await page.locator('tr[data-node="n1"] [data-field=state]', { hasText: 'cordoned' }).waitFor({ timeout: 15_000 });
    expect(
      await page.evaluate(() => (window as unknown as { __sameDocument?: boolean }).__sameDocument),
      'the page was not reloaded',
    ).toBe(true);
    await api.uncordon('n1');
  });

  it('refuses a POST without the CSRF token with 403, even with the session cookie', async () => {
    const res = await context.request.post(`${adminUrl}/nodes/n1/state`, { form: { state: 'drain' }, maxRedirects: 0 });
    expect(res.status()).toBe(403);
    expect((await api.nodes()).find((n) => n.id === 'n1')?.state).toBe('ready');
  });

  it('collects orphans only after a confirmation page that lists them', async () => {
    await page.goto(`${adminUrl}/weights`);
    expect(await text('#panels')).toContain(orphanPath);
    await page.click('a[href="/weights/collect?node=n1"]');
    expect(await text('#panels')).toContain(orphanPath);
    expect((await api.orphans()).nodes).not.toEqual([]);
    await page.click('#confirm-collect');
    expect(await text('#collect-summary')).toContain('removed 1');
    // The orphan list is the agents' last report: the next heartbeat no longer has it.
    await waitFor(
      'n1 to stop reporting the collected entry',
      async () => ((await api.orphans()).nodes.length === 0 ? true : undefined),
      10_000,
    );
    await page.goto(`${adminUrl}/weights`);
    expect(await page.locator('#orphans-n1').count(), 'no longer listed as an orphan').toBe(0);
    // What the node did stays on the page: the last collect, with its path.
    expect(await text('#last-collect')).toContain(`n1`);
    expect(await text('#last-collect')).toContain(`removed${orphanPath}`);
  });
});
