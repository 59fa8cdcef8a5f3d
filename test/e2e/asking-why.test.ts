// Questions 5-8 of the operator's truth (issue #23), each created for real
// and answered by ctl, the admin API and the dashboard in a real browser:
//  (5) which replica served this request and why did it fail: an engine is
//      killed under a request, which the router retries elsewhere; a model
//      no node can hold fails with its cause;
//  (6) where did this node's disk go: wanted weights, an orphan and the
//      rest of a simulated filesystem;
//  (7) what changed and who did it: a cordon by a named operator;
//  (8) will this new model fit, and where: per profile, the node that fits
//      and the one that does not, with the reason.
// One real control plane (SQLite store) and two simulated agents running sim
// engines; engine ports 32300-32399.
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AdminClient, type RequestRecordView } from '../../src/api/index.js';
import { cacheNameOf } from '../../src/protocol/index.js';
import { haveChromium, launchChromium, loggedInPage, textOf as text } from '../support/browser.js';
import { engineRecordOf } from '../support/fleet.js';
import { killEnginesOf, type RunningProcess, startControl, startLlmgw, stopAll } from '../support/processes.js';
import { waitFor } from '../support/wait.js';
import { runCtlCli } from './ctl-support.js';

const JOIN = 'e2e-why2-join-token-0123456789abcdef';
const ADMIN = 'e2e-why2-admin-token-0123456789abcdef';

let dir: string;
let adminUrl: string;
let clientUrl: string;
let api: AdminClient;
let browser: Browser | undefined;
let page: Page | undefined;
const stateDirs: string[] = [];
let orphanPath: string;
let ctlEnv: Record<string, string>;
const agents = new Map<string, RunningProcess>();

async function chat(model: string): Promise<{ status: number; id: string; body: string }> {
  const res = await fetch(`${clientUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 }),
  });
  return { status: res.status, id: res.headers.get('x-request-id') ?? '', body: await res.text() };
}

function cacheEntry(cacheDir: string, source: string, bytes: number): string {
  const path = join(cacheDir, cacheNameOf(source)!);
  mkdirSync(join(path, 'files'), { recursive: true });
  writeFileSync(join(path, 'files', 'model.gguf'), Buffer.alloc(bytes, 7));
  writeFileSync(join(path, 'manifest.json'), JSON.stringify({ source, files: [] }));
  return path;
}

/** Logs the browser in once; every page after that rides the session. */
async function browserPage(): Promise<Page> {
  if (page) return page;
  browser = await launchChromium();
  page = await loggedInPage(browser, adminUrl, ADMIN);
  return page;
}

describe('asking why: requests, disks, audit, plans', () => {
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'llmgw-e2e-why2-'));
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
    ctlEnv = { LLMGW_ADMIN_URL: adminUrl, LLMGW_ADMIN_TOKEN: ADMIN };

    // n1's cache, on a simulated filesystem at the temporary directory's root: one entry a model wants, one none does.
    const cacheDir = join(dir, 'n1-cache');
    cacheEntry(cacheDir, 'hf://org/kept', 8192);
    orphanPath = cacheEntry(cacheDir, 'hf://org/forgotten', 4096);
    const root = `/${tmpdir().split('/')[1]}`;
    let ports = 32300;
    for (const [id, extra] of [
      [
        'n1',
        ['--cache-dir', cacheDir, '--simulate', `gpus=8xh100-80gb,ram=256g,disk=${root}:100g/200g:local,engines=vllm`],
      ],
      ['n2', ['--simulate', 'gpus=2xl40s-48gb,ram=256g,disk=/data:1t:local,engines=vllm']],
    ] as const) {
      const stateDir = join(dir, id);
      stateDirs.push(stateDir);
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
          ...extra,
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
    await waitFor('both agents to join', async () =>
      (await api.nodes()).filter((n) => n.liveness === 'up').length === 2 ? true : undefined,
    );
    const weights = join(dir, 'weights');
    mkdirSync(weights, { recursive: true });
    // Two sim replicas of chat, one per node (spread), so a request whose replica dies is retried on the other.
    await api.addModel({
      name: 'chat',
      source: `file://${weights}`,
      scaling: { min: 2, max: 2 },
      profiles: [{ engine: 'sim' }],
    });
    await api.addModel({ name: 'kept', source: 'hf://org/kept', scaling: { min: 0 }, profiles: [{ engine: 'sim' }] });
    // Wanted (min 1) but too big for any node: placement rejects it, so a request for it fails at once with that cause.
    await api.addModel(
      { name: 'huge', source: 'hf://org/huge', scaling: { min: 1 }, profiles: [{ engine: 'vllm', gpus: 16 }] },
      { force: true },
    );
    await waitFor(
      'both chat replicas ready',
      async () =>
        (await api.replicas({ model: 'chat' })).filter((r) => r.state === 'ready').length === 2 ? true : undefined,
      60_000,
    );
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await stopAll();
    killEnginesOf(stateDirs);
  });

  it('(5) names the replica and node that served a request, and the cause of a failed attempt and a failed request', async () => {
    const ok = await chat('chat');
    expect(ok.status, ok.body).toBe(200);
    const served = await api.request(ok.id);
    const replicas = await api.replicas({ model: 'chat' });
    const replica = replicas.find((r) => r.id === served.replica);
    expect(replica, `the request log names a replica of chat: ${JSON.stringify(served)}`).toBeDefined();
    expect(served.nodes).toEqual([replica!.shards[0]!.node]);
    expect(served.outcome).toBe('ok');

    // Kill one replica's engine with its agent paused, so the control plane still routes to it for a moment:
    // the requests that pick it fail to connect and are retried on the other replica.
    const victim = replicas[0]!;
    const agent = agents.get(victim.shards[0]!.node)!;
    const record = engineRecordOf(stateDirs, victim.id) as { pid: number; pgid?: number };
    let retried: RequestRecordView | undefined;
    agent.child.kill('SIGSTOP');
    try {
      process.kill(-(record.pgid ?? record.pid), 'SIGKILL');
      for (let i = 0; i < 40 && !retried; i++) {
        const r = await chat('chat');
        const rec = await api.request(r.id);
        if (rec.attempts.length > 1) retried = rec;
      }
    } finally {
      agent.child.kill('SIGCONT');
    }
    expect(
      retried,
      `some request picked the dead replica first and was retried; the last ones: ${JSON.stringify((await api.requests({ limit: 3 })).requests)}`,
    ).toBeDefined();
    expect(retried!.attempts[0]).toMatchObject({
      replica: victim.id,
      outcome: 'failed',
      nodes: [victim.shards[0]!.node],
    });
    expect(retried!.attempts[0]!.reason, 'the failed attempt says why').toMatch(/refused|ECONNREFUSED|reset|closed/i);
    expect(retried!.replica, 'the other replica answered').not.toBe(victim.id);
    expect(retried!.status).toBe(200);

    await waitFor('placement to reject huge', async () =>
      (await api.explain('huge')).rejections?.length ? true : undefined,
    );
    const failed = await chat('huge');
    expect(failed.status).toBe(503);
    const why = await api.request(failed.id);
    expect(why).toMatchObject({ outcome: 'no_replica', status: 503, attempts: [] });
    expect(why.cause).toContain('model `huge` has 0 ready replicas: none can be placed');
    expect(why.cause, 'the cause names the failed check').toContain('needs 16 GPUs');

    const r = await runCtlCli(['request', failed.id], { env: ctlEnv });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('no_replica');
    expect(r.stdout).toContain('has 0 ready replicas');
    const list = await runCtlCli(['requests', '--failed'], { env: ctlEnv });
    expect(list.stdout).toContain(failed.id);
    // Replayed: a client that sends another request's x-request-id does not hide that request.
    const reused = await fetch(`${clientUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-request-id': failed.id },
      body: JSON.stringify({ model: 'chat', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 }),
    });
    expect(reused.status).toBe(200);
    expect(await api.request(failed.id), 'the newest answers by id, and says it is not alone').toMatchObject({
      outcome: 'ok',
      same_id: 1,
    });
    expect(
      (await api.requests({ id: failed.id })).requests.map((x) => x.outcome),
      'both listed, newest first',
    ).toEqual(['ok', 'no_replica']);
    const both = await runCtlCli(['request', failed.id], { env: ctlEnv });
    expect(both.stdout).toContain('1 earlier request(s) in the log carried this id too');
    const missing = await runCtlCli(['request', 'no-such-id'], { env: ctlEnv });
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('has no request "no-such-id" in its log');

    if (!haveChromium) return;
    const p = await browserPage();
    await p.goto(`${adminUrl}/requests/${encodeURIComponent(retried!.id)}`);
    expect(await text(p, '#request [data-field=replica]')).toContain(`replica ${retried!.replica}`);
    expect(await text(p, '[data-attempt="1"]')).toContain('failed');
    await p.goto(`${adminUrl}/requests?failed=true`);
    expect(await text(p, `tr[data-request="${failed.id}"] [data-field=cause]`)).toContain('has 0 ready replicas');
  });

  it("(6) splits a node's disk into weights a model wants, orphans and other files", async () => {
    const view = await waitFor('n1 to report its cache', async () => {
      const v = await api.nodeDisks('n1');
      return v.disks[0]?.weights.some((w) => w.path === orphanPath) &&
        v.disks[0].weights.some((w) => w.models.includes('kept'))
        ? v
        : undefined;
    });
    const d = view.disks[0]!;
    expect(d).toMatchObject({ used_bytes: 100 * 2 ** 30, total_bytes: 200 * 2 ** 30 });
    expect(d.weights.find((w) => w.path === orphanPath)?.models, 'no model wants the orphan').toEqual([]);
    expect(
      d.weights.find((w) => w.source === 'hf://org/kept')?.models,
      `n1's weights: ${JSON.stringify(d.weights)}`,
    ).toEqual(['kept']);
    // chat's weights are used in place where a chat replica runs on n1: they count as wanted, by chat.
    for (const w of d.weights)
      if (w.path !== orphanPath) expect(w.models.length, `${w.path} is wanted by a model`).toBeGreaterThan(0);
    expect(d.orphan_bytes).toBeGreaterThanOrEqual(4096);
    expect(d.wanted_bytes).toBeGreaterThanOrEqual(8192);
    expect(d.other_bytes).toBe(d.used_bytes! - d.wanted_bytes - d.orphan_bytes);
    expect(view.summary[0]).toContain('weights of kept');
    expect(view.summary[0]).toContain('1 cache entry no model wants');

    const r = await runCtlCli(['disk', 'n1'], { env: ctlEnv });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('no model wants');
    expect(r.stdout).toContain(orphanPath);
    expect((await runCtlCli(['disk', 'nope'], { env: ctlEnv })).stderr).toContain('no node "nope"');

    if (!haveChromium) return;
    const p = await browserPage();
    await p.goto(`${adminUrl}/nodes/n1`);
    await p.click('#disk-link');
    expect(await text(p, '#disk-summary')).toContain('1 cache entry no model wants');
    expect(await text(p, `tr[data-path="${orphanPath}"] [data-field=models]`)).toBe('no model (orphan)');
  });

  it('(7) says who cordoned a node, when, and what it was before', async () => {
    const cordon = await runCtlCli(['--actor', 'alice@laptop', 'cordon', 'n2'], { env: ctlEnv });
    expect(cordon.code, cordon.stderr).toBe(0);
    const audit = await api.audit({ actor: 'alice@laptop' });
    expect(audit.entries.map((e) => e.summary)).toEqual(['cordoned node n2 (was ready)']);
    expect(audit.entries[0]).toMatchObject({
      actor: 'admin-token',
      actor_label: 'alice@laptop',
      action: 'node.state',
      target: 'n2',
      detail: { from: 'ready', to: 'cordoned' },
    });

    const r = await runCtlCli(['audit', '--since', '1h', '--action', 'node.'], { env: ctlEnv });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('alice@laptop');
    expect(r.stdout).toContain('cordoned node n2 (was ready)');
    const models = await runCtlCli(['audit', '--action', 'model.add'], { env: ctlEnv });
    expect(models.stdout).toContain('added model huge');

    if (haveChromium) {
      const p = await browserPage();
      await p.goto(`${adminUrl}/audit?actor=alice%40laptop`);
      expect(await text(p, '#audit [data-field=summary]')).toBe('cordoned node n2 (was ready)');
      expect(await text(p, '#audit [data-field=who]')).toBe('admin-token (alice@laptop)');
    }
    await api.uncordon('n2');
  });

  it('(8) says per profile which node a new model fits and why the other does not', async () => {
    const file = join(dir, 'big.yaml');
    writeFileSync(
      file,
      'name: big\nsource: hf://org/big\nscaling: {min: 1}\nprofiles:\n  - {name: h100, engine: vllm, gpus: 4, gpu_classes: [h100-80gb]}\n',
    );
    const planned = await runCtlCli(['plan', file], { env: ctlEnv });
    expect(planned.code, planned.stderr).toBe(0);
    expect(planned.stdout).toContain('1/1 replica(s) would be placed');
    expect(planned.stdout).toContain('profile h100 (vllm): 1 node(s) fit: n1');
    expect(planned.stdout).toMatch(/n2: needs 4 GPUs of class h100-80gb/);
    expect(
      (await api.models()).map((m) => m.name),
      'a plan adds nothing',
    ).not.toContain('big');

    const tooBig = join(dir, 'too-big.json');
    writeFileSync(
      tooBig,
      JSON.stringify({
        name: 'too-big',
        source: 'hf://org/x',
        scaling: { min: 1 },
        profiles: [{ engine: 'vllm', gpus: 16 }],
      }),
    );
    const no = await runCtlCli(['plan', tooBig], { env: ctlEnv });
    expect(no.code, 'exit 3: it would not be placed').toBe(3);
    expect(no.stdout).toContain('0/1 replica(s) would be placed');
    expect(no.stdout).toMatch(/n1: needs 16 GPUs/);

    if (!haveChromium) return;
    const p = await browserPage();
    await p.goto(`${adminUrl}/models/plan`);
    await p.fill(
      'textarea[name=definition]',
      'name: big\nsource: hf://org/big\nscaling: {min: 1}\nprofiles:\n  - {name: h100, engine: vllm, gpus: 4, gpu_classes: [h100-80gb]}\n',
    );
    await p.click('#plan-submit');
    expect(await text(p, '#plan-big [data-field=verdict]')).toBe('1/1 replica(s) would be placed');
    expect(await text(p, '#plan-big tr[data-node="n1"] [data-field=why]')).toBe('fits');
    expect(await text(p, '#plan-big tr[data-node="n2"] [data-field=why]')).toContain('needs 4 GPUs of class h100-80gb');
  });
});
