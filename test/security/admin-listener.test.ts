// Attack replays against a real `llmgw control` process over real HTTP on
// loopback: the admin listener denies by default however a path is spelt,
// answers only to its own names, refuses cross-site writes, keeps /metrics
// behind the token, cuts stalled bodies, records who acted, and keeps its
// SQLite file to its own user. Each test names the attack it replays and
// checks that nothing changed, not only that the answer was a refusal.
import { chmodSync, existsSync, mkdirSync, mkdtempSync, statSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPrng } from '../../src/control/placement/synthetic.js';
import { ADMIN, JOIN, startSimAgent } from '../support/fleet.js';
import { type RunningProcess, type ControlUrls, startControl, stopAll } from '../support/processes.js';
import { type RawAnswer, rawExchange } from '../support/raw-http.js';
import { waitFor } from '../support/wait.js';

afterAll(stopAll);

/** Sends bytes exactly as given and reads the answer until the server closes; status 0 = closed with no answer. */
function raw(url: string, request: string): Promise<RawAnswer> {
  return rawExchange(url, request);
}

/** A whole HTTP/1.1 request as text; `Connection: close` so the answer ends with the connection. */
function requestText(
  method: string,
  target: string,
  host: string,
  headers: Record<string, string> = {},
  body = '',
): string {
  const lines = [`${method} ${target} HTTP/1.1`, `Host: ${host}`, 'Connection: close'];
  for (const [k, v] of Object.entries(headers)) lines.push(`${k}: ${v}`);
  if (body || method === 'POST') lines.push(`Content-Length: ${Buffer.byteLength(body)}`);
  return `${lines.join('\r\n')}\r\n\r\n${body}`;
}

const auth = { authorization: `Bearer ${ADMIN}` };

async function keyCount(admin: string): Promise<number> {
  const res = await fetch(`${admin}/api/v1/keys`, { headers: auth });
  expect(res.status, 'the real token still lists keys').toBe(200);
  return ((await res.json()) as { keys: unknown[] }).keys.length;
}

/** One random spelling of a path: escapes (single and double), case, doubled slashes, dot segments, `;` parameters, absolute form. */
function mangle(path: string, rnd: () => number): string {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)]!;
  let out = '';
  for (const ch of path) {
    const r = rnd();
    if (ch !== '/' && r < 0.15) out += `%${ch.charCodeAt(0).toString(16).padStart(2, '0')}`;
    else if (ch !== '/' && r < 0.2) out += `%25${ch.charCodeAt(0).toString(16).padStart(2, '0')}`;
    else if (ch === '/' && r < 0.1) out += '%2F';
    else if (ch === '/' && r < 0.2) out += '//';
    else if (ch === '/' && r < 0.3) out += '/./';
    else if (ch === '/' && r < 0.35) out += '/x/../';
    else if (r < 0.45) out += ch.toUpperCase();
    else out += ch;
  }
  if (rnd() < 0.2) out += pick(['/', ';x', '?a=b', '/.', '%20', '%00', '#f']);
  if (rnd() < 0.15) out = `${pick(['http://x', 'http://127.0.0.1', 'HTTP://localhost:1'])}${out}`;
  return out;
}

describe('admin listener with an admin token', () => {
  let dir: string;
  let control: RunningProcess & { urls: ControlUrls };
  let admin: string;
  let host: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'llmgw-sec-admin-'));
    control = await startControl([
      '--store',
      `sqlite:${join(dir, 'state', 'llmgw.db')}`,
      '--admin-token',
      ADMIN,
      '--join-token',
      JOIN,
      '--client-headers-timeout',
      '1s',
      '--idle-body-timeout',
      '1s',
      '--log-level',
      'info',
    ]);
    admin = control.urls.admin;
    host = new URL(admin).host;
  });

  // Attack: the token check looked at the raw URL's /api/ prefix, so `POST /%61pi/v1/keys` with no
  // token made a working API key, and an absolute-form target read the key list.
  const spellings: [string, string][] = [
    ['POST', '/%61pi/v1/keys'],
    ['POST', '/api/v1/%6Beys'],
    ['POST', '/%2561pi/v1/keys'],
    ['POST', '/api%2Fv1%2Fkeys'],
    ['POST', 'http://x/api/v1/keys'],
    ['POST', 'http://127.0.0.1/api/v1/keys'],
    ['GET', 'http://x/api/v1/keys'],
    ['POST', '//api/v1/keys'],
    ['POST', '/api//v1//keys'],
    ['POST', '/x/../api/v1/keys'],
    ['POST', '/api/./v1/keys'],
    ['POST', '/%2e%2e/api/v1/keys'],
    ['POST', '/API/v1/keys'],
    ['POST', '/Api/V1/Keys'],
    ['POST', '/api/v1/keys/'],
    ['POST', '/api/v1/keys;x'],
    ['POST', '/api/v1/keys?x=1'],
    ['POST', '/api/v1/keys%20'],
    ['GET', '/api/v1/keys'],
    ['HEAD', '/api/v1/keys'],
    ['OPTIONS', '/api/v1/keys'],
    ['OPTIONS', '*'],
    ['DELETE', '/api/v1/keys/key_x'],
    ['POST', '/api/v1/weights/collect'],
    ['GET', '/metrics'],
    ['GET', '/%6Detrics'],
  ];

  it('refuses every spelling of a protected path without the token, and makes no key', async () => {
    const before = await keyCount(admin);
    expect(
      (
        await raw(
          admin,
          requestText(
            'POST',
            '/api/v1/keys',
            host,
            { 'content-type': 'application/json', ...auth },
            '{"name":"control"}',
          ),
        )
      ).status,
      'the plain path with the token works',
    ).toBe(201);
    const after = before + 1;
    const answers: string[] = [];
    for (const [method, target] of spellings) {
      const res = await raw(
        admin,
        requestText(
          method,
          target,
          host,
          { 'content-type': 'application/json' },
          method === 'POST' ? '{"name":"x"}' : '',
        ),
      );
      answers.push(`${method} ${target} -> ${res.status}`);
      expect(
        res.status,
        `${method} ${target} must be refused: ${res.head.split('\r\n')[0]} ${res.body.slice(0, 200)}`,
      ).not.toBe(0);
      // 421: an absolute-form target naming another authority (`http://x/...`) is refused by the Host check.
      expect([400, 401, 404, 421], `${method} ${target} answered ${res.status}: ${res.body.slice(0, 200)}`).toContain(
        res.status,
      );
    }
    expect(await keyCount(admin), `no spelling made a key: ${answers.join(', ')}`).toBe(after);
  });

  // Attack: any spelling the table above missed. A seeded fuzz over request targets against a protected POST.
  it('never answers 2xx to a fuzzed spelling of POST /api/v1/keys without the token', async () => {
    const before = await keyCount(admin);
    // Seeded (mulberry32), so a failing fuzz case can be replayed from its seed.
    const rnd = createPrng(17);
    for (let i = 0; i < 250; i++) {
      const target = mangle('/api/v1/keys', rnd);
      const res = await raw(
        admin,
        requestText('POST', target, host, { 'content-type': 'application/json' }, '{"name":"fuzz"}'),
      );
      expect(res.status >= 200 && res.status < 300, `case ${i} (seed 17): POST ${target} answered ${res.status}`).toBe(
        false,
      );
    }
    expect(await keyCount(admin), 'no fuzzed target made a key').toBe(before);
  });

  // Attack: /metrics told anyone who reached the admin listener the fleet's models, rates and replicas.
  it('asks the admin token for /metrics', async () => {
    expect((await fetch(`${admin}/metrics`)).status).toBe(401);
    const authed = await fetch(`${admin}/metrics`, { headers: auth });
    expect(authed.status).toBe(200);
    expect(await authed.text()).toMatch(/llmgw_reconciler_passes_total/);
  });

  // Attack: a stalled request body held an admin or agent connection open for good (> 80 s seen on /agent/v1/join).
  it('cuts a stalled body with 408 on the admin and agent listeners, while a long-polling agent stays up', async () => {
    startSimAgent(control.urls.agent, join(dir, 'agent'), 'n1', { first: 24100, count: 10 });
    const up = async () => {
      const nodes = (await (await fetch(`${admin}/api/v1/nodes`, { headers: auth })).json()) as {
        id: string;
        liveness: string;
      }[];
      return nodes.find((n) => n.id === 'n1' && n.liveness === 'up') ? true : undefined;
    };
    await waitFor('n1 joined and up', up);
    const stalled = (url: string, path: string, headers: Record<string, string>) =>
      raw(
        url,
        `POST ${path} HTTP/1.1\r\nHost: ${new URL(url).host}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n${Object.entries(
          headers,
        )
          .map(([k, v]) => `${k}: ${v}\r\n`)
          .join('')}\r\n{"node_id":`,
      );
    // The limit is 1 s of headers plus 1 s of body; 20 s is only the test's patience.
    const [join_, models] = await Promise.all([
      stalled(control.urls.agent, '/agent/v1/join', { authorization: `Bearer ${JOIN}` }),
      stalled(admin, '/api/v1/models', auth),
    ]);
    expect(join_.status, `the agent listener's answer: ${join_.head}`).toBe(408);
    expect(models.status, `the admin listener's answer: ${models.head}`).toBe(408);
    expect(JSON.parse(models.body)).toEqual({
      error: 'the request (its headers or its body) took too long to arrive; the connection is closed',
    });
    // Heartbeats wait on the server (long polls) far longer than 2 s: a wait for the answer is no stall.
    await waitFor('n1 still up after the cut', up);
    const nodes = (await (await fetch(`${admin}/api/v1/nodes`, { headers: auth })).json()) as { id: string }[];
    expect(
      nodes.map((n) => n.id),
      'the stalled join made no node',
    ).toEqual(['n1']);
  });

  // Attack: idle keep-alive connections held open for Fastify's 72 s each, so a client could pile them up.
  it('closes an idle keep-alive connection on the admin listener', async () => {
    const { hostname, port } = new URL(admin);
    const socket = connect({ host: hostname, port: Number(port) });
    socket.on('error', () => {});
    let answered = '';
    socket.setEncoding('utf8').on('data', (chunk: string) => (answered += chunk));
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    socket.write(`GET /api/v1/summary HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${ADMIN}\r\n\r\n`);
    // 10 s is the listener's idle limit; 40 s only the test's patience.
    let timer: NodeJS.Timeout | undefined;
    const patience = new Promise<'still open'>((resolve) => (timer = setTimeout(() => resolve('still open'), 40_000)));
    const outcome = await Promise.race([closed.then(() => 'closed' as const), patience]);
    clearTimeout(timer);
    socket.destroy();
    expect(answered, 'the request on it was answered first').toMatch(/^HTTP\/1\.1 200 /);
    expect(outcome, 'the server closed the idle connection').toBe('closed');
  });

  // Attack: X-Llmgw-Actor let a caller name themselves anyone in the audit log.
  it('records the identity the request proved, with X-Llmgw-Actor only as a label', async () => {
    const res = await fetch(`${admin}/api/v1/keys`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json', 'x-llmgw-actor': 'the-ceo' },
      body: JSON.stringify({ name: 'audited' }),
    });
    expect(res.status).toBe(201);
    const { id } = (await res.json()) as { id: string };
    // The key's audit row is written after the answer: read the store until it is there.
    const row = await waitFor('the key.create audit row', async () => {
      const db = new BetterSqlite3(join(dir, 'state', 'llmgw.db'), { readonly: true });
      try {
        return db
          .prepare('select actor, actor_label from audit_log where target = ? and action = ?')
          .get(id, 'key.create') as { actor: string; actor_label: string } | undefined;
      } finally {
        db.close();
      }
    });
    expect(row).toEqual({ actor: 'admin-token', actor_label: 'the-ceo' });
  });

  // Attack: the SQLite file (node tokens, key hashes) was created 0644 in a 0755 directory.
  it('creates the store directory 0700 and its files 0600', () => {
    expect(statSync(join(dir, 'state')).mode & 0o777, 'the directory').toBe(0o700);
    for (const f of ['llmgw.db', 'llmgw.db-wal', 'llmgw.db-shm']) {
      const path = join(dir, 'state', f);
      if (f === 'llmgw.db' || existsSync(path)) expect(statSync(path).mode & 0o777, f).toBe(0o600);
    }
  });
});

describe('store file modes on an existing store', () => {
  it('warns at start, naming the path and its looser mode', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-sec-mode-'));
    mkdirSync(join(dir, 'state'), { mode: 0o755 });
    chmodSync(join(dir, 'state'), 0o755);
    const path = join(dir, 'state', 'llmgw.db');
    writeFileSync(path, '');
    chmodSync(path, 0o644);
    const control = await startControl(['--store', `sqlite:${path}`, '--admin-token', ADMIN, '--log-level', 'warn']);
    const warning = await control.waitForLog(
      (e) => typeof e.msg === 'string' && e.msg.includes(path) && e.msg.includes('0644'),
    );
    expect(warning.msg).toMatch(/chmod 0600/);
    await control.waitForLog(
      (e) => typeof e.msg === 'string' && e.msg.includes(join(dir, 'state')) && e.msg.includes('0755'),
    );
    expect(statSync(path).mode & 0o777, "the operator's mode is left as it was").toBe(0o644);
    await control.stop();
  });
});

describe('admin listener without a token (loopback)', () => {
  let admin: string;
  let client: string;

  beforeAll(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-sec-open-'));
    const control = await startControl([
      '--store',
      `sqlite:${join(dir, 'db')}`,
      '--api-keys',
      'off',
      '--log-level',
      'warn',
    ]);
    admin = control.urls.admin;
    client = control.urls.client;
  });

  // Attack: DNS rebinding. A page on evil.example re-points its name at 127.0.0.1 and calls the
  // token-less admin listener as "evil.example", same-origin to the browser.
  it('refuses a Host that is not its own (421) and makes no key', async () => {
    const before = ((await (await fetch(`${admin}/api/v1/keys`)).json()) as { keys: unknown[] }).keys.length;
    const port = new URL(admin).port;
    for (const evil of [
      `evil.example:${port}`,
      'evil.example',
      `127.0.0.1.evil.example:${port}`,
      `localhost.evil.example:${port}`,
    ]) {
      const res = await raw(
        admin,
        requestText('POST', '/api/v1/keys', evil, { 'content-type': 'application/json' }, '{"name":"rebound"}'),
      );
      expect(res.status, `Host ${evil}: ${res.body}`).toBe(421);
      expect(JSON.parse(res.body).error).toMatch(/admin_hosts/);
    }
    const dashboard = await raw(admin, requestText('GET', '/', `evil.example:${port}`));
    expect(dashboard.status, 'the dashboard too').toBe(421);
    const after = ((await (await fetch(`${admin}/api/v1/keys`)).json()) as { keys: unknown[] }).keys.length;
    expect(after, 'no key was made').toBe(before);
  });

  // Attack: a cross-site text/plain POST (a "simple" request, no preflight) to /api/v1/weights/collect.
  it('refuses a cross-site or non-JSON write (415 / 403)', async () => {
    const port = new URL(admin).port;
    const plain = await raw(
      admin,
      requestText(
        'POST',
        '/api/v1/weights/collect',
        `127.0.0.1:${port}`,
        { 'content-type': 'text/plain', origin: 'http://evil.example' },
        '{}',
      ),
    );
    expect(plain.status, plain.body).toBe(415);
    const json = await raw(
      admin,
      requestText(
        'POST',
        '/api/v1/keys',
        `127.0.0.1:${port}`,
        { 'content-type': 'application/json', origin: 'http://evil.example' },
        '{"name":"x"}',
      ),
    );
    expect(json.status, json.body).toBe(403);
    const fetchMeta = await raw(
      admin,
      requestText(
        'POST',
        '/api/v1/keys',
        `127.0.0.1:${port}`,
        { 'content-type': 'application/json', 'sec-fetch-site': 'cross-site' },
        '{"name":"x"}',
      ),
    );
    expect(fetchMeta.status, fetchMeta.body).toBe(403);
    const keys = ((await (await fetch(`${admin}/api/v1/keys`)).json()) as { keys: unknown[] }).keys;
    expect(keys, 'no key was made').toEqual([]);
    // The listener's own origin still may.
    const own = await raw(
      admin,
      requestText(
        'POST',
        '/api/v1/keys',
        `127.0.0.1:${port}`,
        { 'content-type': 'application/json', origin: `http://127.0.0.1:${port}` },
        '{"name":"own"}',
      ),
    );
    expect(own.status, own.body).toBe(201);
  });

  // Attack: with api_keys off, a page POSTs a body with no type (a Blob) or text/plain to drive inference.
  it('client listener without keys refuses a body not declared JSON, and a foreign Host', async () => {
    const port = new URL(client).port;
    const body = JSON.stringify({ model: 'any', messages: [{ role: 'user', content: 'hi' }] });
    const plain = await raw(
      client,
      requestText('POST', '/v1/chat/completions', `127.0.0.1:${port}`, { 'content-type': 'text/plain' }, body),
    );
    expect(plain.status, plain.body).toBe(415);
    expect(JSON.parse(plain.body).error.type, "OpenAI's error shape").toBeDefined();
    const untyped = await raw(client, requestText('POST', '/v1/chat/completions', `127.0.0.1:${port}`, {}, body));
    expect(untyped.status, untyped.body).toBe(415);
    const rebound = await raw(
      client,
      requestText('POST', '/v1/chat/completions', `evil.example:${port}`, { 'content-type': 'application/json' }, body),
    );
    expect(rebound.status, rebound.body).toBe(421);
    expect(JSON.parse(rebound.body).error.message).toMatch(/client_hosts/);
  });
});
