// Signing in through a real OpenID Provider (the oidc-provider package, on
// loopback in this process) with a real `llmgw control` and Chromium: the
// dashboard's authorization code flow with PKCE, a person whose groups claim
// maps to `viewer` shown on every page, refused (403, naming the permission)
// when pressing anything that changes the fleet, and `llmgw ctl login`'s
// path: a token from the dashboard's token page, pasted into ctl, which
// then reads but may not drain. Guards against a sign-in that lands with
// the wrong role (or the admin's), and against a viewer's session or token
// that can change things.
import { spawn } from 'node:child_process';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AdminClient } from '../../src/api/index.js';
import { CHROMIUM, haveChromium, launchChromium, textOf } from '../support/browser.js';
import { startSsoFleet, type SsoFleet } from '../support/oidc.js';
import { stopAll } from '../support/processes.js';
import { CTL_ARGV, runCtlCli } from './ctl-support.js';

const PERSON = 'vera@example.com';

let sso: SsoFleet;
let adminToken: string;
let issuer: string;
let adminUrl: string;
let browser: Browser;

/** ctl with a line on its stdin, as a person pastes a token. */
function ctlWithStdin(args: string[], stdin: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...CTL_ARGV, ...args], {
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '' },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (s: string) => (stdout += s));
    child.stderr.setEncoding('utf8').on('data', (s: string) => (stderr += s));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(`${stdin}\n`);
  });
}

describe.skipIf(!haveChromium && !process.env.CI)('signing in through an OpenID Provider', () => {
  beforeAll(async () => {
    if (!haveChromium) throw new Error(`no Chromium at ${CHROMIUM}: CI's image must have Debian's chromium package`);
    // Every account is in the viewers' group.
    sso = await startSsoFleet({
      name: 'sso',
      person: PERSON,
      groups: ['llmgw-viewers', 'unrelated'],
      groupRoles: 'llmgw-admins=admin,llmgw-viewers=viewer',
    });
    ({ issuer, adminUrl, admin: adminToken } = sso);
    browser = await launchChromium();
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await stopAll();
    await sso?.close();
  });

  it('signs a viewer in, shows them on the page, and refuses every change they press', async () => {
    const context = await browser.newContext();
    // Only loopback: the provider's development pages link a web font.
    await context.route(
      (url) => url.hostname !== '127.0.0.1',
      (route) => route.abort(),
    );
    const page = await context.newPage();
    await page.goto(`${adminUrl}/login`);
    await page.click('#sso');
    await page.waitForURL((u) => u.href.startsWith(issuer));
    await page.fill('input[name=login]', 'vera');
    await page.fill('input[name=password]', 'any');
    await page.click('button[type=submit]');
    // The provider asks for consent once.
    await page.click('button[type=submit]');
    await page.waitForURL(`${adminUrl}/`);
    expect(await textOf(page, '#signed-in-as')).toBe(`${PERSON} (viewer)`);

    const api = new AdminClient({ baseUrl: adminUrl, token: adminToken });
    const { people } = await api.people();
    expect(people.map((p) => [p.name, p.role, p.source])).toEqual([[PERSON, 'viewer', 'oidc']]);

    // A viewer's press, sent as the dashboard's own form with the session's CSRF token.
    for (const [action, fields, permission] of [
      ['/nodes/n1/state', { state: 'drain' }, 'nodes.write'],
      ['/weights/collect', {}, 'weights.collect'],
    ] as const) {
      const answer = await page.evaluate(
        async ({ action, fields }) => {
          const csrf = (document.querySelector('input[name=csrf]') as HTMLInputElement).value;
          const res = await fetch(action, {
            method: 'POST',
            headers: { 'content-type': 'application/x-www-form-urlencoded' },
            body: new URLSearchParams({ csrf, ...(fields as Record<string, string>) }).toString(),
          });
          return { status: res.status, text: await res.text() };
        },
        { action, fields },
      );
      expect(answer.status, action).toBe(403);
      expect(answer.text).toContain(`permission &quot;${permission}&quot;`);
    }
    const audit = await api.audit({ actor: `person:${PERSON}` });
    expect(audit.entries.map((e) => e.action)).toEqual(['person.sign_in']);
    await context.close();
  });

  it('gives ctl login a token of the person, which reads but may not drain', async () => {
    const context = await browser.newContext();
    await context.route(
      (url) => url.hostname !== '127.0.0.1',
      (route) => route.abort(),
    );
    const page = await context.newPage();
    await page.goto(`${adminUrl}/login?next=${encodeURIComponent('/login/token')}`);
    await page.click('#sso');
    await page.waitForURL((u) => u.href.startsWith(issuer));
    await page.fill('input[name=login]', 'vera');
    await page.fill('input[name=password]', 'any');
    await page.click('button[type=submit]');
    await page.click('button[type=submit]');
    await page.waitForURL(`${adminUrl}/login/token`);
    await page.click('#make-token');
    const token = await textOf(page, '#token');
    expect(token).toMatch(/^llmgw-p-/);
    await context.close();

    const login = await ctlWithStdin(['--admin-url', adminUrl, 'login'], token);
    expect(login.stderr).toContain(`${adminUrl}/login/token`);
    expect(login.code, login.stderr).toBe(0);
    expect(login.stdout).toContain(`signed in as ${PERSON} (role viewer)`);
    expect(login.stdout).toContain(`export LLMGW_ADMIN_TOKEN=${token}`);

    const env = { LLMGW_ADMIN_URL: adminUrl, LLMGW_ADMIN_TOKEN: token };
    const nodes = await runCtlCli(['nodes'], { env });
    expect(nodes.code, nodes.stderr).toBe(0);
    const drain = await runCtlCli(['drain', 'n1'], { env });
    expect(drain.code).toBe(1);
    expect(drain.stderr).toContain('permission "nodes.write"');
  });
});
