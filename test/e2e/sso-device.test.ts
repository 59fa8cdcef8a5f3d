// `llmgw ctl login` through the device authorization grant, against a real
// OpenID Provider (oidc-provider on loopback, its deviceFlow on) and a real
// `llmgw control`: ctl prints the verification URL and the user code,
// Chromium approves the code as the person would, and ctl, polling the
// control plane, gets a person token whose `ctl whoami` names the person
// with the role their groups map to. Guards against a device sign-in that
// lands with the wrong role (or none), and against a token given to a
// caller who never approved the code.
import { spawn } from 'node:child_process';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AdminClient } from '../../src/api/index.js';
import { CHROMIUM, haveChromium, launchChromium } from '../support/browser.js';
import { startSsoFleet, type SsoFleet } from '../support/oidc.js';
import { stopAll } from '../support/processes.js';
import { waitFor } from '../support/wait.js';
import { CTL_ARGV, runCtlCli } from './ctl-support.js';

const PERSON = 'otto@example.com';

let sso: SsoFleet;
let adminToken: string;
let issuer: string;
let adminUrl: string;
let browser: Browser;

describe.skipIf(!haveChromium && !process.env.CI)('ctl login through the device flow', () => {
  beforeAll(async () => {
    if (!haveChromium) throw new Error(`no Chromium at ${CHROMIUM}: CI's image must have Debian's chromium package`);
    // Every account is an operator of the fleet.
    sso = await startSsoFleet({
      name: 'device',
      person: PERSON,
      groups: ['sre'],
      groupRoles: 'sre=operator,staff=viewer',
      deviceFlow: true,
    });
    ({ issuer, adminUrl, admin: adminToken } = sso);
    browser = await launchChromium();
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await stopAll();
    await sso?.close();
  });

  it('prints a code, takes the approval in a browser, and hands ctl a token of the person', async () => {
    const info = await new AdminClient({ baseUrl: adminUrl, token: null }).loginInfo();
    expect(info.device_authorization).toBe(true);

    // A handle nobody was given gets nothing.
    const guess = await fetch(`${adminUrl}/api/v1/login/device/not-a-handle`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{}',
    });
    expect(guess.status).toBe(404);

    const child = spawn(process.execPath, [...CTL_ARGV, '--admin-url', adminUrl, 'login'], {
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (s: string) => (stdout += s));
    child.stderr.setEncoding('utf8').on('data', (s: string) => (stderr += s));
    const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
    try {
      const complete = await waitFor(
        'ctl to print the verification URL',
        async () => /\(or open (\S+), which has it filled in\)/.exec(stderr)?.[1],
      );
      expect(stderr).toMatch(new RegExp(`open ${issuer}/device\\S* in a browser and enter the code \\S+`));

      const context = await browser.newContext();
      // Only loopback: the provider's development pages link a web font.
      await context.route(
        (url) => url.hostname !== '127.0.0.1',
        (route) => route.abort(),
      );
      const page = await context.newPage();
      await page.goto(complete);
      await page.click('button[autofocus]');
      await page.fill('input[name=login]', 'otto');
      await page.fill('input[name=password]', 'any');
      await page.click('button[type=submit]');
      // The provider asks for consent once.
      await page.click('button[type=submit]');
      await page.waitForLoadState();
      await context.close();

      const code = await Promise.race([
        exited,
        new Promise<'slow'>((resolve) => setTimeout(() => resolve('slow'), 60_000).unref()),
      ]);
      expect(code, `stdout:\n${stdout}\nstderr:\n${stderr}`).toBe(0);
    } finally {
      child.kill();
    }
    expect(stdout).toContain(`signed in as ${PERSON} (role operator)`);
    const token = /export LLMGW_ADMIN_TOKEN=(\S+)/.exec(stdout)?.[1];
    expect(token).toMatch(/^llmgw-p-/);

    const whoami = await runCtlCli(['-o', 'json', 'whoami'], {
      env: { LLMGW_ADMIN_URL: adminUrl, LLMGW_ADMIN_TOKEN: token! },
    });
    expect(whoami.code, whoami.stderr).toBe(0);
    expect(JSON.parse(whoami.stdout)).toMatchObject({ person: PERSON, role: 'operator' });
    const api = new AdminClient({ baseUrl: adminUrl, token: adminToken });
    const { people } = await api.people();
    expect(people.map((p) => [p.name, p.role, p.source])).toEqual([[PERSON, 'operator', 'oidc']]);
  }, 120_000);
});
