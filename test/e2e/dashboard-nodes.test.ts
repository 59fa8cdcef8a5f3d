// The dashboard's node list as a page of a larger fleet, in a real browser
// (Debian's Chromium through playwright-core) against a real `llmgw
// control`: 12 nodes join over the agent API (real HTTP, as an agent joins;
// no engines are needed to list them), some cordoned, in two racks. The list
// shows a page with "of how many" and a next page; the filter form (state,
// label, search) puts the filter in the URL and the rows follow it, the same
// nodes the admin API's filtered list serves; a bad value in the URL is
// refused with what to fix.
//
// Without Chromium at /usr/bin/chromium it fails under CI and is skipped,
// with a message, on a developer's machine, as test/e2e/dashboard.test.ts.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AdminClient } from '../../src/api/index.js';
import { CHROMIUM, haveChromium, launchChromium, loggedInPage } from '../support/browser.js';
import { startControl, stopAll } from '../support/processes.js';

const JOIN = 'e2e-dashboard-nodes-join-token-0123456789';
const ADMIN = 'e2e-dashboard-nodes-admin-token-0123456789';
const NODES = Array.from({ length: 12 }, (_, i) => `gpu-${String(i).padStart(2, '0')}`);
const CORDONED = ['gpu-02', 'gpu-05', 'gpu-07'];

if (!haveChromium && !process.env.CI) {
  process.stderr.write(
    `dashboard node list e2e: skipped, no Chromium at ${CHROMIUM} (apt-get install chromium); under CI this fails instead\n`,
  );
}

let adminUrl: string;
let api: AdminClient;
let browser: Browser;
let page: Page;

const rows = async (): Promise<string[]> =>
  page.locator('#nodes tbody tr').evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-node') ?? ''));
const shown = async (): Promise<string> =>
  ((await page.locator('#node-page [data-field=shown]').textContent()) ?? '').trim();

describe.skipIf(!haveChromium && !process.env.CI)("the dashboard's node list in a browser", () => {
  beforeAll(async () => {
    if (!haveChromium) throw new Error(`no Chromium at ${CHROMIUM}: CI's image must have Debian's chromium package`);
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-e2e-dashboard-nodes-'));
    const control = await startControl([
      '--store',
      `sqlite:${join(dir, 'db')}`,
      '--join-token',
      JOIN,
      '--admin-token',
      ADMIN,
      '--api-keys',
      'off',
      '--log-level',
      'warn',
    ]);
    adminUrl = control.urls.admin;
    api = new AdminClient({ baseUrl: adminUrl, token: ADMIN, actor: 'e2e' });
    for (const [i, id] of NODES.entries()) {
      const res = await fetch(`${control.urls.agent}/agent/v1/join`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          join_token: JOIN,
          node_id: id,
          hostname: `host-${id}.dc1`,
          labels: { rack: i < 6 ? 'r1' : 'r2' },
        }),
      });
      expect(res.status, await res.text()).toBe(200);
    }
    for (const id of CORDONED) await api.cordon(id);
    browser = await launchChromium();
    page = await loggedInPage(browser, adminUrl, ADMIN, '/nodes');
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await stopAll();
  });

  it('shows a page with how many of how many, and goes on to the next page and back to the first', async () => {
    await page.goto(`${adminUrl}/nodes?limit=5`);
    expect(await rows()).toEqual(NODES.slice(0, 5));
    expect(await shown()).toBe('Showing 5 of 12 nodes.');
    await page.click('#next-page');
    await page.waitForURL((u) => u.searchParams.get('after') === 'gpu-04');
    expect(await rows()).toEqual(NODES.slice(5, 10));
    await page.click('#next-page');
    await page.waitForURL((u) => u.searchParams.get('after') === 'gpu-09');
    expect(await rows()).toEqual(NODES.slice(10));
    expect(await page.locator('#next-page').count(), 'the last page has no next').toBe(0);
    await page.click('#first-page');
    await page.waitForURL((u) => !u.searchParams.has('after'));
    expect(await rows()).toEqual(NODES.slice(0, 5));
  });

  it('filters by state, label and search from the form, carries the filter in the URL, and lists what the API lists', async () => {
    await page.goto(`${adminUrl}/nodes`);
    expect(await rows(), 'a fleet smaller than a page is shown whole').toEqual(NODES);
    await page.selectOption('#node-filter select[name=state]', 'cordoned');
    await page.click('#node-filter button[type=submit]');
    await page.waitForURL((u) => u.searchParams.get('state') === 'cordoned');
    expect(await rows()).toEqual(CORDONED);
    expect(await shown()).toBe('Showing 3 of 3 nodes that match.');
    expect(
      await page.locator('#node-filter select[name=state]').inputValue(),
      'the form shows the filter it made',
    ).toBe('cordoned');

    await page.fill('#node-filter input[name=label]', 'rack=r2');
    await page.click('#node-filter button[type=submit]');
    await page.waitForURL((u) => u.searchParams.get('label') === 'rack=r2');
    const url = new URL(page.url());
    expect([url.searchParams.get('state'), url.searchParams.get('label')]).toEqual(['cordoned', 'rack=r2']);
    const apiPage = await api.nodesPage({ state: ['cordoned'], labels: ['rack=r2'] });
    expect(await rows(), "the same nodes as the admin API's filtered list").toEqual(apiPage.nodes.map((n) => n.id));
    expect(await rows()).toEqual(['gpu-07']);

    await page.goto(`${adminUrl}/nodes`);
    await page.fill('#node-filter input[name=q]', 'HOST-GPU-1');
    await page.click('#node-filter button[type=submit]');
    await page.waitForURL((u) => u.searchParams.get('q') === 'HOST-GPU-1');
    expect(await rows(), 'the search matches hostnames, any case').toEqual(['gpu-10', 'gpu-11']);

    // A link to a filtered list shows the same list to whoever opens it.
    await page.goto(`${adminUrl}/nodes?state=ready&label=rack%3Dr1&limit=2`);
    expect(await rows()).toEqual(['gpu-00', 'gpu-01']);
    expect(await shown()).toBe('Showing 2 of 4 nodes that match.');
  });

  it('says no node matches an empty filter, and refuses a bad value with what to fix', async () => {
    await page.goto(`${adminUrl}/nodes?q=nothing-like-this`);
    expect(await page.locator('#panels').textContent()).toContain('No node matches this filter.');
    const res = await page.goto(`${adminUrl}/nodes?state=asleep`);
    expect(res?.status()).toBe(400);
    expect(await page.locator('main').textContent()).toContain('state: unknown state "asleep"');
  });
});
