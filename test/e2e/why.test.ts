// Questions 1-4 of the operator's truth (issue #23), each situation made
// with real processes on loopback (a control plane, three simulated agents,
// sim engines) and each answer asked three ways: the admin API, `llmgw ctl`
// and the dashboard in a real Chromium. Every answer must name its cause:
// (1) a model no node can run, and one whose engine fails to start;
// (2) a node that runs nothing while its model runs elsewhere;
// (3) what collect will delete, what a node refused (an entry gone when
// it checked) and the node collect could not ask, and why;
// (4) a drain that waits because the only other node is cordoned.
// Engine ports 32100-32299, apart from the other e2e files.
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AdminClient, type NodeDetailView } from '../../src/api/index.js';
import { cacheNameOf } from '../../src/protocol/index.js';
import { CHROMIUM, haveChromium, launchChromium, loggedInPage } from '../support/browser.js';
import { killEnginesOf, type RunningProcess, startControl, startLlmgw, stopAll } from '../support/processes.js';
import { waitFor } from '../support/wait.js';
import { runCtlCli } from './ctl-support.js';

const JOIN = 'e2e-why-join-token-0123456789abcdef';
const ADMIN = 'e2e-why-admin-token-0123456789abcdef';
if (!haveChromium && !process.env.CI)
  process.stderr.write(`why e2e: dashboard checks skipped, no Chromium at ${CHROMIUM}\n`);

let dir: string;
let adminUrl: string;
let api: AdminClient;
let browser: Browser | undefined;
let page: Page | undefined;
const stateDirs: string[] = [];
const agents = new Map<string, RunningProcess>();
const orphans = new Map<string, string>();

/** A complete cache entry for `source` under `cacheDir`, as the agent's fetch leaves one. */
function cacheEntry(cacheDir: string, source: string): string {
  const path = join(cacheDir, cacheNameOf(source)!);
  mkdirSync(join(path, 'files'), { recursive: true });
  writeFileSync(join(path, 'files', 'model.gguf'), Buffer.alloc(4096, 1));
  writeFileSync(join(path, 'manifest.json'), JSON.stringify({ source, files: [] }));
  return path;
}

function ctl(...args: string[]) {
  return runCtlCli(args, { env: { LLMGW_ADMIN_URL: adminUrl, LLMGW_ADMIN_TOKEN: ADMIN, NO_COLOR: '1' } });
}

/** Checks the text of a dashboard page's element, whitespace folded; without Chromium (outside CI) checks nothing. */
async function onPage(path: string, selector: string, check: (text: string) => void): Promise<void> {
  if (!page) return;
  await page.goto(`${adminUrl}${path}`);
  check(((await page.locator(selector).first().textContent()) ?? '').replace(/\s+/g, ' ').trim());
}

describe('asking why, questions 1-4', () => {
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'llmgw-e2e-why-'));
    const control = await startControl([
      '--store',
      `sqlite:${join(dir, 'db')}`,
      '--join-token',
      JOIN,
      '--admin-token',
      ADMIN,
      '--reconcile-interval',
      '500ms',
      '--log-level',
      'warn',
    ]);
    adminUrl = control.urls.admin;
    api = new AdminClient({ baseUrl: adminUrl, token: ADMIN, actor: 'e2e-why' });
    // n1 and n2 serve the main pool; n3 is the only node the crashing model may use. n1 and n3 each hold a cache entry no model wants.
    let ports = 32100;
    for (const [id, labels] of [
      ['n1', 'pool=main'],
      ['n2', 'pool=main'],
      ['n3', 'pool=crash'],
    ] as const) {
      const stateDir = join(dir, id);
      stateDirs.push(stateDir);
      const cacheDir = join(dir, `${id}-cache`);
      if (id !== 'n2') orphans.set(id, cacheEntry(cacheDir, `hf://org/forgotten-on-${id}`));
      agents.set(
        id,
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
          '--cache-dir',
          cacheDir,
          '--labels',
          labels,
          '--simulate',
          'gpus=0,ram=16g',
          '--heartbeat-interval',
          '300ms',
          '--port-range',
          `${ports}-${ports + 49}`,
          '--log-level',
          'warn',
        ]),
      );
      ports += 50;
    }
    await waitFor('three agents up', async () =>
      (await api.nodes()).filter((n) => n.liveness === 'up').length === 3 ? true : undefined,
    );
    const weights = join(dir, 'weights');
    mkdirSync(weights, { recursive: true });
    await api.addModel({
      name: 'chat',
      source: `file://${weights}`,
      scaling: { min: 1 },
      profiles: [{ name: 'cpu', engine: 'sim', pool: 'pool=main' }],
    });
    await api.addModel(
      {
        name: 'big',
        source: 'hf://org/big',
        scaling: { min: 1 },
        profiles: [{ name: 'h100', engine: 'sim', gpus: 2 }],
      },
      { force: true },
    );
    await api.addModel({
      name: 'crash',
      source: `file://${weights}`,
      scaling: { min: 1 },
      profiles: [{ name: 'bad-flag', engine: 'sim', pool: 'pool=crash', args: ['--bogus-flag'] }],
    });
    await waitFor(
      'chat to be ready',
      async () => ((await api.replicas({ model: 'chat' })).some((r) => r.state === 'ready') ? true : undefined),
      40_000,
    );

    if (haveChromium) {
      browser = await launchChromium();
      page = await loggedInPage(browser, adminUrl, ADMIN);
    } else if (process.env.CI) {
      throw new Error(`no Chromium at ${CHROMIUM}: CI's image must have Debian's chromium package`);
    }
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await stopAll();
    killEnginesOf(stateDirs);
  });

  it('(1) says why a model is not running: no node has GPUs, or its engine fails to start', async () => {
    const big = await waitFor('a placement attempt for big', async () => {
      const why = await api.explain('big');
      return why.profiles?.length ? why : undefined;
    });
    expect(big.placed).toBe(false);
    expect(big.summary?.[0]).toMatch(
      /model big is not running and not placed: no node can run any of its profiles \(3 nodes checked\)/,
    );
    expect(big.profiles).toEqual([expect.objectContaining({ profile: 'h100', nodes_fit: 0, node_count: 3 })]);
    expect(big.profiles?.[0]?.line, 'the cause: the nodes have no GPUs').toMatch(
      /0\/3 nodes fit profile h100: 3 have no GPUs/,
    );
    const r = await ctl('explain', 'big');
    expect(r.code, r.stderr).toBe(3);
    expect(r.stdout).toContain('not placed');
    expect(r.stdout).toContain('0/3 nodes fit profile h100: 3 have no GPUs');
    await onPage('/models/big', '#why', (t) => expect(t).toContain('0/3 nodes fit profile h100: 3 have no GPUs'));

    const crash = await waitFor(
      'crash to have failed once',
      async () => {
        const why = await api.explain('crash');
        return why.not_running?.some((n) => /engine exited with code/.test(n.reason)) ? why : undefined;
      },
      40_000,
    );
    expect(crash.ready_replicas).toBe(0);
    const failing = crash.not_running!.find((n) => /engine exited with code/.test(n.reason))!;
    expect(failing.nodes, 'the only node its pool allows').toEqual(['n3']);
    expect(failing.reason, "the engine's own complaint, from its log").toContain('--bogus-flag');
    expect(failing.reason, 'restarted by its agent, or failed and retried by the control plane').toMatch(
      /^is crash-looping on n3|^failed .*on n3/,
    );
    const c = await waitFor('ctl explain crash to show the error', async () => {
      const out = await ctl('explain', 'crash');
      return /engine exited with code/.test(out.stdout) ? out : undefined;
    });
    expect(c.stdout).toContain('n3');
    await onPage('/models/crash', '#why', (t) => expect(t).toContain('--bogus-flag'));
  });

  it('(2) says why a node is idle: the model it could run has its replica elsewhere', async () => {
    const holder = (await api.replicas({ model: 'chat' })).find((r) => r.state === 'ready')!.shards[0]!.node;
    const idle = holder === 'n1' ? 'n2' : 'n1';
    const detail = await api.node(idle);
    expect(detail.replicas).toEqual([]);
    expect(detail.idle, 'a node running nothing has an idle answer').toBeDefined();
    expect(detail.summary[0]).toBe(`node ${idle} runs no replica:`);
    expect(detail.idle!.reasons[0]).toMatch(
      new RegExp(`already has the replicas it wants on other nodes or wants none: chat on ${holder}`),
    );
    const chat = detail.idle!.models.find((m) => m.model === 'chat')!;
    expect(chat).toMatchObject({ fits: true, replicas: 1, nodes: [holder], min_replicas: 1 });
    const big = detail.idle!.models.find((m) => m.model === 'big')!;
    expect(big.fits).toBe(false);
    expect(big.reason).toMatch(/cannot run here: .*GPU/);
    const crash = detail.idle!.models.find((m) => m.model === 'crash')!;
    expect(crash.reason).toMatch(/cannot run here: .*pool/);
    const r = await ctl('node', idle);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(`chat on ${holder}`);
    expect(r.stdout).toMatch(/│ chat +│ yes +│ 1 +│ n[12] +│ 1 +│ fits \(profile cpu\)/);
    await onPage(`/nodes/${idle}`, '#why', (t) => expect(t).toContain(`chat on ${holder}`));
    expect(await api.node(holder), 'the node that serves is not idle').not.toHaveProperty('idle');
  });

  it('(4) says what a drain waits for: no node can take the replacement while the other is cordoned', async () => {
    const holder = (await api.replicas({ model: 'chat' })).find((r) => r.state === 'ready')!.shards[0]!.node;
    const other = holder === 'n1' ? 'n2' : 'n1';
    await api.setNodeState(other, 'cordon');
    await api.setNodeState(holder, 'drain');
    const blocked = await waitFor('the drain to be blocked', async () => {
      const d = await api.node(holder);
      return d.drain_waits?.some((w) => /none can/.test(w.waits_for)) ? d : undefined;
    });
    const wait = blocked.drain_waits!.find((w) => w.model === 'chat')!;
    expect(wait.waits_for, 'the cause: the only other node of the pool is cordoned').toMatch(
      /a node to take its replacement, and none can: 0\/3 nodes fit profile cpu: .*1 is cordoned/,
    );
    expect(blocked.summary[0]).toBe(`node ${holder} is draining and waits for 1 replica:`);
    const r = await ctl('node', holder);
    expect(r.stdout).toContain('is cordoned');
    expect(r.stdout).toContain('waits for a node to take its replacement');
    await onPage(`/nodes/${holder}`, '#drain-waits', (t) => expect(t).toContain('is cordoned'));

    // Uncordoned, the other node takes the replacement; once it serves, the drain has nothing left to wait for.
    await api.setNodeState(other, 'uncordon');
    const done = await waitFor(
      'the drain to finish',
      async () => {
        const d: NodeDetailView = await api.node(holder);
        return d.drain_waits?.length === 0 ? d : undefined;
      },
      60_000,
    );
    expect(done.summary[0]).toBe(`node ${holder} is drained: no replica is left on it`);
  });

  it('(3) says what collect will delete, and what each node did: removed, or why it could not be asked', async () => {
    const before = await api.orphans();
    expect(before.nodes.map((n) => n.node).sort(), 'what collect will delete, per node').toEqual(['n1', 'n3']);
    expect(before.last_collect, 'nothing collected yet').toEqual([]);

    // An entry n1 reported disappears before collect reaches it: n1 checks again and refuses, saying why.
    // The window is the time between its last report and the collect; a heartbeat inside it means a retry.
    const vanishing = join(dir, 'n1-cache', cacheNameOf('hf://org/vanishing')!);
    await waitFor(
      'a collect on n1 that finds an entry gone',
      async () => {
        cacheEntry(join(dir, 'n1-cache'), 'hf://org/vanishing');
        await waitFor('n1 to report it', async () =>
          (await api.orphans({ node: 'n1' })).nodes[0]?.entries.some((e) => e.path === vanishing) ? true : undefined,
        );
        rmSync(vanishing, { recursive: true, force: true });
        const s = await api.collect({ node: 'n1' });
        return s.nodes[0]?.refused.some((r) => r.path === vanishing) ? s : undefined;
      },
      90_000,
    );
    expect(existsSync(orphans.get('n1')!), "n1's own orphan is removed").toBe(false);

    // n3's agent goes away: its last report still lists the orphan, but nobody answers at its address.
    await agents.get('n3')!.stop('SIGTERM');
    const summary = await api.collect();
    expect(summary).toMatchObject({ removed: 0, unreachable: 1 });
    const after = await api.orphans();
    const byNode = new Map((after.last_collect ?? []).map((n) => [n.node, n]));
    expect(byNode.get('n1')?.actor).toContain('e2e-why');
    // (A retry may also have asked again for n1's first orphan, removed by the try before, from a report not yet refreshed: also "missing".)
    expect(byNode.get('n1')?.refused, 'the cause: the entry was gone when n1 checked').toEqual(
      expect.arrayContaining([
        { path: vanishing, check: 'missing', reason: `${vanishing} does not exist; nothing to remove` },
      ]),
    );
    expect(byNode.get('n3')?.unreachable, 'the cause: the node did not answer').toMatch(/cannot reach the node at .*:/);
    const r = await ctl('weights');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/n3 .*not asked .*cannot reach the node/);
    expect(r.stdout).toMatch(/n1 .*refused \(missing\)/);
    await onPage('/weights', '#last-collect', (t) => {
      expect(t).toContain('cannot reach the node');
      expect(t).toContain('refused (missing)');
    });
  });
});
