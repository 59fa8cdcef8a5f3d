// The dashboard tests' browser: Debian's Chromium driven by playwright-core,
// launched with the flags that keep it off the network and off a GPU, and a
// page logged in to the admin listener. Apart from processes.ts so a test
// that drives no browser does not load playwright.
import { existsSync } from 'node:fs';
import { type Browser, chromium, type Page } from 'playwright-core';

export const CHROMIUM = '/usr/bin/chromium';
/** False on a machine without Debian's chromium package: the tests skip there, and fail under CI. */
export const haveChromium = existsSync(CHROMIUM);

export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}

/** A new page logged in with the admin token; `next` is the path the login lands on (absent = the overview). */
export async function loggedInPage(browser: Browser, adminUrl: string, token: string, next = '/'): Promise<Page> {
  const page = await (await browser.newContext({ viewport: { width: 1400, height: 900 } })).newPage();
  await page.goto(`${adminUrl}/login${next === '/' ? '' : `?next=${encodeURIComponent(next)}`}`);
  await page.fill('input[name=token]', token);
  await page.click('form[action="/login"] button[type=submit]');
  await page.waitForURL(`${adminUrl}${next}`);
  return page;
}

/** The text of the first element `selector` matches, its whitespace collapsed; '' when it has none. */
export async function textOf(page: Page, selector: string): Promise<string> {
  return ((await page.locator(selector).first().textContent()) ?? '').replace(/\s+/g, ' ').trim();
}
