// The dashboard through a whole control plane with app.inject: login and the
// session cookie, CSRF on every form, actions landing exactly as through the
// admin API (same audit record, with the dashboard as the actor), escaping of
// whatever an agent or operator typed, and unknown values never shown as 0.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { compileControlOptions } from '../config/index.js';
import { ControlPlane } from '../control-plane.js';

const TOKEN = 'admin-token-for-dashboard-tests-0123456789';
const JOIN = 'join-token-for-dashboard-tests-0123456789';
const planes: ControlPlane[] = [];
afterEach(async () => {
  await Promise.all(planes.splice(0).map((p) => p.close()));
});

async function plane(over: Record<string, unknown> = {}): Promise<ControlPlane> {
  const dir = mkdtempSync(join(tmpdir(), 'llmgw-dashboard-'));
  const config = compileControlOptions({
    store: `sqlite:${join(dir, 'db')}`,
    admin_token: TOKEN,
    join_token: JOIN,
    ...over,
  });
  const p = await ControlPlane.create(config, { logger: pino({ level: 'silent' }) });
  planes.push(p);
  return p;
}

async function addNode(
  p: ControlPlane,
  id: string,
  options: { gpus?: number; labels?: Record<string, string>; report?: boolean } = {},
): Promise<void> {
  await p.inventory.join({
    id,
    hostname: `${id}.example`,
    mgmtAddr: null,
    labels: options.labels ?? {},
    agentVersion: '0.1.0',
    protocolVersion: 1,
  });
  if (options.report === false) return;
  p.inventory.heartbeat(p.inventory.get(id)!, {
    report: {
      gpus: Array.from({ length: options.gpus ?? 2 }, (_, index) => ({
        index,
        class: 'h100-80gb',
        problems: index === 1 ? ['XID 79: fell off the bus'] : [],
      })),
      engines: [{ name: 'vllm' }],
      memory_total_bytes: 64 * 2 ** 30,
    },
  });
}

interface Browser {
  cookie: string;
  csrf: string;
}

async function login(p: ControlPlane): Promise<Browser> {
  const res = await p.adminApp.inject({
    method: 'POST',
    url: '/login',
    payload: `token=${encodeURIComponent(TOKEN)}`,
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
  });
  expect(res.statusCode, res.body).toBe(303);
  const setCookie = String(res.headers['set-cookie']);
  const cookie = setCookie.split(';')[0]!;
  const page = await p.adminApp.inject({ method: 'GET', url: '/', headers: { cookie } });
  const csrf = /name="csrf" value="([^"]+)"/.exec(page.body)?.[1];
  expect(csrf, 'the overview carries a CSRF token in its logout form').toBeTruthy();
  return { cookie, csrf: csrf! };
}

const form = (fields: Record<string, string>) => new URLSearchParams(fields).toString();
const formHeaders = (b: Browser, extra: Record<string, string> = {}) => ({
  cookie: b.cookie,
  'content-type': 'application/x-www-form-urlencoded',
  ...extra,
});

describe('dashboard: login and sessions', () => {
  it('sends a visitor without a session to the login page, remembering where they were going', async () => {
    const p = await plane();
    const root = await p.adminApp.inject({ method: 'GET', url: '/' });
    expect(root.statusCode).toBe(303);
    expect(root.headers.location).toBe('/login');
    const nodes = await p.adminApp.inject({ method: 'GET', url: '/nodes' });
    expect(nodes.headers.location).toBe('/login?next=%2Fnodes');
    const loginPage = await p.adminApp.inject({ method: 'GET', url: '/login?next=%2Fnodes' });
    expect(loginPage.statusCode).toBe(200);
    expect(loginPage.body).toContain('name="next" value="/nodes"');
  });

  it('says a wrong token is wrong without echoing it, and sets no cookie', async () => {
    const p = await plane();
    const typed = 'not-the-token-but-a-near-miss';
    const res = await p.adminApp.inject({
      method: 'POST',
      url: '/login',
      payload: form({ token: typed }),
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    expect(res.statusCode).toBe(401);
    expect(res.body).toContain('That admin token is wrong');
    expect(res.body, 'the login page must not echo what was typed').not.toContain(typed);
    expect(res.headers['set-cookie']).toBeUndefined();
  });

  it('stops answering login attempts from an address after ten wrong tokens', async () => {
    const p = await plane();
    const attempt = () =>
      p.adminApp.inject({
        method: 'POST',
        url: '/login',
        payload: form({ token: 'guess' }),
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
      });
    for (let i = 0; i < 10; i++) expect((await attempt()).statusCode).toBe(401);
    const refused = await attempt();
    expect(refused.statusCode).toBe(429);
    expect(refused.headers['retry-after']).toBeDefined();
    const right = await p.adminApp.inject({
      method: 'POST',
      url: '/login',
      payload: form({ token: TOKEN }),
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    expect(
      right.statusCode,
      'even the right token waits: otherwise the limit would tell a guesser when it guessed right',
    ).toBe(429);
  });

  it('needs no login on a control plane without an admin token (loopback only)', async () => {
    const p = await plane({ admin_token: undefined });
    const res = await p.adminApp.inject({ method: 'GET', url: '/' });
    expect(res.statusCode).toBe(200);
    expect(String(res.headers['set-cookie'])).toMatch(/^llmgw_session=/);
  });

  it('sets an HttpOnly SameSite=Strict cookie holding a random id, never the token', async () => {
    const p = await plane();
    const res = await p.adminApp.inject({
      method: 'POST',
      url: '/login',
      payload: form({ token: TOKEN, next: '/models' }),
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    expect(res.statusCode).toBe(303);
    expect(res.headers.location).toBe('/models');
    const cookie = String(res.headers['set-cookie']);
    expect(cookie).toMatch(/^llmgw_session=[A-Za-z0-9_-]{40,}; /);
    expect(cookie).toContain('HttpOnly');
    expect(cookie).toContain('SameSite=Strict');
    expect(cookie).not.toContain(TOKEN);
    expect(cookie).not.toContain(Buffer.from(TOKEN).toString('base64'));
  });

  it('never redirects after login to another site', async () => {
    const p = await plane();
    for (const next of ['//evil.example/', 'https://evil.example/', '/\\evil.example']) {
      const res = await p.adminApp.inject({
        method: 'POST',
        url: '/login',
        payload: form({ token: TOKEN, next }),
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
      });
      expect(res.headers.location, `next=${next}`).toBe('/');
    }
  });

  it('logs out: the cookie is cleared and the session no longer opens pages', async () => {
    const p = await plane();
    const b = await login(p);
    const out = await p.adminApp.inject({
      method: 'POST',
      url: '/logout',
      payload: form({ csrf: b.csrf }),
      headers: formHeaders(b),
    });
    expect(out.statusCode).toBe(303);
    expect(String(out.headers['set-cookie'])).toContain('Max-Age=0');
    const after = await p.adminApp.inject({ method: 'GET', url: '/', headers: { cookie: b.cookie } });
    expect(after.statusCode).toBe(303);
  });

  it('refuses a login posted from another site', async () => {
    const p = await plane();
    const res = await p.adminApp.inject({
      method: 'POST',
      url: '/login',
      payload: form({ token: TOKEN }),
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        origin: 'https://evil.example',
        'sec-fetch-site': 'cross-site',
      },
    });
    expect(res.statusCode).toBe(403);
    expect(res.headers['set-cookie']).toBeUndefined();
  });

  it('leaves the admin API as it was: JSON, bearer token, no cookie accepted', async () => {
    const p = await plane();
    const b = await login(p);
    const res = await p.adminApp.inject({ method: 'GET', url: '/api/v1/nodes', headers: { cookie: b.cookie } });
    expect(res.statusCode).toBe(401);
    expect(res.json()).toHaveProperty('error');
  });
});

describe('dashboard: actions', () => {
  it('cordons a node through the admin API path, with the dashboard as the audit actor', async () => {
    const p = await plane();
    await addNode(p, 'n1');
    const b = await login(p);
    const res = await p.adminApp.inject({
      method: 'POST',
      url: '/nodes/n1/state',
      payload: form({ csrf: b.csrf, state: 'cordon', back: '/nodes' }),
      headers: formHeaders(b),
    });
    expect(res.statusCode, res.body).toBe(303);
    expect(res.headers.location).toBe('/nodes');
    const api = await p.adminApp.inject({
      method: 'GET',
      url: '/api/v1/nodes',
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(api.json<{ id: string; state: string }[]>().find((n) => n.id === 'n1')?.state).toBe('cordoned');
    const audit = await p.store!.audit.list({ target: 'n1' });
    const record = audit.find((a) => a.action === 'node.state');
    expect(record?.actor, 'the audit record names the session that proved itself, never its cookie').toMatch(
      /^dashboard:[0-9a-f]{12}$/,
    );
    expect(record?.actorLabel, 'and the address it logged in from, as a label').toMatch(/^dashboard:/);
  });

  it('refuses a form without the CSRF token, with a wrong one, or from another origin (403), and changes nothing', async () => {
    const p = await plane();
    await addNode(p, 'n1');
    const b = await login(p);
    const attempts: Array<[string, Record<string, string>, Record<string, string>]> = [
      ['no token', { state: 'drain' }, {}],
      ['a wrong token', { state: 'drain', csrf: 'x'.repeat(43) }, {}],
      ['another origin', { state: 'drain', csrf: b.csrf }, { origin: 'https://evil.example' }],
      ['a cross-site fetch', { state: 'drain', csrf: b.csrf }, { 'sec-fetch-site': 'cross-site' }],
    ];
    for (const [what, fields, headers] of attempts) {
      const res = await p.adminApp.inject({
        method: 'POST',
        url: '/nodes/n1/state',
        payload: form(fields),
        headers: formHeaders(b, headers),
      });
      expect(res.statusCode, `a form with ${what}`).toBe(403);
    }
    expect(p.inventory.get('n1')?.adminState).toBe('ready');
    const noSession = await p.adminApp.inject({
      method: 'POST',
      url: '/nodes/n1/state',
      payload: form({ state: 'drain', csrf: b.csrf }),
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    expect(noSession.statusCode).toBe(403);
  });

  it('accepts a same-origin form with the token', async () => {
    const p = await plane();
    await addNode(p, 'n1');
    const b = await login(p);
    const res = await p.adminApp.inject({
      method: 'POST',
      url: '/nodes/n1/state',
      payload: form({ state: 'drain', csrf: b.csrf }),
      headers: formHeaders(b, { origin: 'http://localhost:80', host: 'localhost:80', 'sec-fetch-site': 'same-origin' }),
    });
    expect(res.statusCode, res.body).toBe(303);
    expect(p.inventory.get('n1')?.adminState).toBe('draining');
  });

  it('answers an unknown node with a page that says so', async () => {
    const p = await plane();
    const b = await login(p);
    const res = await p.adminApp.inject({
      method: 'POST',
      url: '/nodes/nope/state',
      payload: form({ state: 'cordon', csrf: b.csrf }),
      headers: formHeaders(b),
    });
    expect(res.statusCode).toBe(404);
    expect(res.headers['content-type']).toContain('text/html');
    expect(res.body).toContain('no node &quot;nope&quot;');
  });

  it("keeps the admin listener's body limit for forms", async () => {
    const p = await plane();
    const b = await login(p);
    const res = await p.adminApp.inject({
      method: 'POST',
      url: '/nodes/n1/state',
      payload: form({ csrf: b.csrf, state: 'x'.repeat(2 << 20) }),
      headers: formHeaders(b),
    });
    expect(res.statusCode).toBe(413);
  });

  it('puts collect behind a confirmation page and refuses it without CSRF', async () => {
    const p = await plane();
    const b = await login(p);
    const confirm = await p.adminApp.inject({ method: 'GET', url: '/weights/collect', headers: { cookie: b.cookie } });
    expect(confirm.statusCode).toBe(200);
    expect(confirm.body).toContain('Nothing to collect');
    const refused = await p.adminApp.inject({
      method: 'POST',
      url: '/weights/collect',
      payload: form({}),
      headers: formHeaders(b),
    });
    expect(refused.statusCode).toBe(403);
    const done = await p.adminApp.inject({
      method: 'POST',
      url: '/weights/collect',
      payload: form({ csrf: b.csrf }),
      headers: formHeaders(b),
    });
    expect(done.statusCode).toBe(200);
    expect(done.body).toContain('Asked to remove 0');
  });
});

describe('dashboard: pages', () => {
  it('renders every page with the numbers the admin API serves', async () => {
    const p = await plane();
    await addNode(p, 'n1', { gpus: 4 });
    const b = await login(p);
    const other = await p.adminApp.inject({
      method: 'POST',
      url: '/api/v1/models?force=true',
      headers: { authorization: `Bearer ${TOKEN}` },
      payload: {
        name: 'other',
        source: 'hf://org/other',
        scaling: { min: 0 },
        profiles: [{ engine: 'vllm', gpus: 1 }],
      },
    });
    expect(other.statusCode, other.body).toBe(200);
    const add = await p.adminApp.inject({
      method: 'POST',
      url: '/api/v1/models?force=true',
      headers: { authorization: `Bearer ${TOKEN}` },
      payload: {
        name: 'demo',
        aliases: ['d'],
        source: 'hf://org/demo',
        fallbacks: ['other'],
        profiles: [{ engine: 'vllm', gpus: 1 }],
      },
    });
    expect(add.statusCode, add.body).toBe(200);
    await p.reconciler.pass();
    for (const url of [
      '/',
      '/nodes',
      '/nodes/n1',
      '/models',
      '/models/demo',
      '/models/d',
      '/replicas',
      '/traffic',
      '/weights',
    ]) {
      const res = await p.adminApp.inject({ method: 'GET', url, headers: { cookie: b.cookie } });
      expect(res.statusCode, `${url}: ${res.body.slice(0, 300)}`).toBe(200);
      expect(res.body.startsWith('<!doctype html>'), url).toBe(true);
    }
    const nodes = await p.adminApp.inject({ method: 'GET', url: '/nodes', headers: { cookie: b.cookie } });
    // 4 GPUs, one unhealthy, one taken by the replica: 2 free.
    const api = (
      await p.adminApp.inject({ method: 'GET', url: '/api/v1/nodes', headers: { authorization: `Bearer ${TOKEN}` } })
    ).json<{ gpu_free: number; gpu_total: number }[]>();
    expect(nodes.body).toContain(`${api[0]!.gpu_free}/${api[0]!.gpu_total} free`);
    expect(nodes.body).toContain('gpu 1: XID 79: fell off the bus');
    const model = await p.adminApp.inject({ method: 'GET', url: '/models/demo', headers: { cookie: b.cookie } });
    expect(model.body).toContain('id="events"');
    expect(model.body, 'what a vLLM model serves, from the engine table').toContain(
      '<td data-field="endpoints">chat, completions, embeddings, rerank, score, transcriptions, tokenize</td>',
    );
    const traffic = await p.adminApp.inject({ method: 'GET', url: '/traffic', headers: { cookie: b.cookie } });
    expect(traffic.body, 'usage per endpoint, kept in the store: none counted yet').toContain(
      'No request has been counted yet',
    );
    // The model page lists the model's own events from the control plane's log, as GET /api/v1/events serves them.
    const events = (
      await p.adminApp.inject({
        method: 'GET',
        url: '/api/v1/events?model=demo',
        headers: { authorization: `Bearer ${TOKEN}` },
      })
    ).json<{ events: { message: string }[] }>().events;
    if (events.length === 0) expect(model.body).toContain('No events recorded.');
    for (const e of events)
      expect(model.body).toContain(e.message.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;'));
    const models = (
      await p.adminApp.inject({ method: 'GET', url: '/api/v1/models', headers: { authorization: `Bearer ${TOKEN}` } })
    ).json<{ ready_replicas: number; total_replicas: number }[]>();
    const demo = models.find((m) => (m as { name?: string }).name === 'demo')!;
    expect(model.body).toContain(`${demo.ready_replicas}/${demo.total_replicas}`);
  });

  it('escapes what agents and operators typed: a node label holding a script tag', async () => {
    const p = await plane();
    await addNode(p, 'n1', { labels: { note: '<script>alert("pwned")</script>' } });
    const b = await login(p);
    const res = await p.adminApp.inject({ method: 'GET', url: '/nodes/n1', headers: { cookie: b.cookie } });
    expect(res.statusCode).toBe(200);
    expect(res.body).not.toContain('<script>alert');
    expect(res.body).toContain('&lt;script>alert(&quot;pwned&quot;)&lt;/script>');
  });

  it('shows what a node has not reported as unknown, never as 0', async () => {
    const p = await plane();
    await addNode(p, 'quiet', { report: false });
    const b = await login(p);
    const res = await p.adminApp.inject({ method: 'GET', url: '/nodes', headers: { cookie: b.cookie } });
    const row = /<tr data-node="quiet">[\s\S]*?<\/tr>/.exec(res.body)?.[0] ?? '';
    expect(row).toContain('none reported');
    expect(/data-field="ram">[^<]*<span class="unknown"[^>]*>unknown</.test(row), row).toBe(true);
    expect(row).not.toMatch(/0 GiB/);
  });

  it('serves only the panels for ?partial=1, and a nonce that lets only its own script run', async () => {
    const p = await plane();
    const b = await login(p);
    const full = await p.adminApp.inject({ method: 'GET', url: '/', headers: { cookie: b.cookie } });
    const nonce = /script-src 'nonce-([^']+)'/.exec(String(full.headers['content-security-policy']))?.[1];
    expect(nonce).toBeTruthy();
    expect(full.body).toContain(`<script nonce="${nonce}">`);
    expect(full.body).toContain('<noscript><meta http-equiv="refresh"');
    const partial = await p.adminApp.inject({ method: 'GET', url: '/?partial=1', headers: { cookie: b.cookie } });
    expect(partial.statusCode).toBe(200);
    expect(partial.body).not.toContain('<html');
    expect(partial.body).toContain('Needs attention');
  });

  it('finds a model whose name has a slash in it', async () => {
    const p = await plane();
    const b = await login(p);
    const add = await p.adminApp.inject({
      method: 'POST',
      url: '/api/v1/models?force=true',
      headers: { authorization: `Bearer ${TOKEN}` },
      payload: { name: 'org/chat', source: 'hf://org/chat', scaling: { min: 0 }, profiles: [{ engine: 'sim' }] },
    });
    expect(add.statusCode, add.body).toBe(200);
    const models = await p.adminApp.inject({ method: 'GET', url: '/models', headers: { cookie: b.cookie } });
    expect(models.body).toContain('href="/models/org%2Fchat"');
    const res = await p.adminApp.inject({ method: 'GET', url: '/models/org%2Fchat', headers: { cookie: b.cookie } });
    expect(res.statusCode, res.body.slice(-400)).toBe(200);
    expect(res.body).toContain('Model org/chat');
  });

  it('answers an unknown model with 404 and escapes the name that was asked for', async () => {
    const p = await plane();
    const b = await login(p);
    const res = await p.adminApp.inject({
      method: 'GET',
      url: `/models/${encodeURIComponent('<b>x</b>')}`,
      headers: { cookie: b.cookie },
    });
    expect(res.statusCode).toBe(404);
    expect(res.body).toContain('&lt;b>x&lt;/b>');
  });
});
