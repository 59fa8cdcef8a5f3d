// Bad input against real processes: a control plane and one simulated agent
// with a sim engine, on loopback. Hostile or broken requests on the client
// and admin listeners get a clear refusal and nothing else (no engine sees
// them, nothing is half-written, the process keeps serving), and canary
// secrets seeded at start (API key, admin token, join token, node
// credential, HF token) appear in no log line, metric, error body, audit row
// or dashboard page after every failure path has run.
import { readFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HubStandIn } from '../support/weight-servers.js';
import { killEnginesOf, startControl, startLlmgw, stopAll, type RunningProcess } from '../support/processes.js';
import { waitFor } from '../support/wait.js';

const CANARY_ADMIN = 'canary-admin-token-7f3a9c1e5b';
const CANARY_JOIN = 'canary-join-token-2d8e6f4a0c';
const CANARY_HF = 'hf_canaryToken9b7d5f3e1a';
const admin = {
  authorization: `Bearer ${CANARY_ADMIN}`,
  'content-type': 'application/json',
  'x-llmgw-actor': 'bad-input',
};

let dir = '';
let dbPath = '';
let stateDir = '';
let clientUrl = '';
let adminUrl = '';
let agentUrl = '';
let control: Awaited<ReturnType<typeof startControl>>;
let agent: RunningProcess;
let hub: HubStandIn;
/** The API key's secret: a canary too, handed out once at creation. */
let apiKey = '';
let engine = '';
/** Every response body a failure path produced, for the canary check. */
const errorBodies: string[] = [];

interface Answer {
  status: number;
  body: string;
  headers: Record<string, string | string[] | undefined>;
}

async function send(
  url: string,
  init: { method?: string; headers?: Record<string, string>; body?: string | Buffer } = {},
): Promise<Answer> {
  const res = await request(url, {
    method: (init.method ?? 'GET') as 'GET',
    headers: init.headers ?? {},
    ...(init.body === undefined ? {} : { body: init.body }),
  });
  const body = await res.body.text();
  if (res.statusCode >= 400) errorBodies.push(body);
  return { status: res.statusCode, body, headers: res.headers };
}

/** Writes raw bytes on a fresh connection and collects what comes back until the server closes it. */
function raw(
  url: string,
  write: (socket: Socket) => void | Promise<void>,
): Promise<{ reply: string; closed: boolean }> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const socket = connect(Number(port), hostname);
    let reply = '';
    socket.on('data', (d) => (reply += d.toString('latin1')));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      errorBodies.push(reply);
      resolve({ reply, closed: true });
    });
    socket.on('connect', () => void write(socket));
  });
}

/** The sim engine's own counters: a request refused by the router never moves them. */
async function engineCounters(): Promise<string> {
  const text = await (await fetch(`${engine}/metrics`)).text();
  return text
    .split('\n')
    .filter((l) => /^vllm:(prompt_tokens_total|generation_tokens_total|request_success_total)/.test(l))
    .join('\n');
}

function chat(extra: Record<string, unknown> = {}): string {
  return JSON.stringify({ model: 'chat', messages: [{ role: 'user', content: 'hello' }], max_tokens: 4, ...extra });
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'llmgw-faults-input-'));
  dbPath = join(dir, 'db');
  stateDir = join(dir, 'agent');
  hub = await new HubStandIn()
    .add({
      id: 'org/gated',
      commit: 'a'.repeat(40),
      files: { 'model.gguf': Buffer.alloc(1024, 7) },
      token: 'the-right-token',
    })
    .listen();
  control = await startControl([
    '--store',
    `sqlite:${dbPath}`,
    '--admin-token',
    CANARY_ADMIN,
    '--join-token',
    CANARY_JOIN,
    '--reconcile-interval',
    '300ms',
    '--client-headers-timeout',
    '2s',
    '--log-level',
    'debug',
  ]);
  clientUrl = control.urls.client;
  adminUrl = control.urls.admin;
  agentUrl = control.urls.agent;
  agent = startLlmgw(
    [
      'agent',
      '--control',
      agentUrl,
      '--join-token',
      CANARY_JOIN,
      '--node-id',
      'n1',
      '--state-dir',
      stateDir,
      '--simulate',
      'gpus=0,ram=16g',
      '--heartbeat-interval',
      '300ms',
      '--port-range',
      '25400-25449',
      '--log-level',
      'debug',
    ],
    { env: { HF_TOKEN: CANARY_HF, HF_ENDPOINT: hub.url } },
  );
  const weights = join(dir, 'weights');
  mkdirSync(weights);
  for (const def of [
    {
      name: 'chat',
      source: `file://${weights}`,
      limits: { context_tokens: 4096, max_tokens: 1024, max_n: 4 },
      profiles: [{ engine: 'sim', args: ['--max-model-len', '4096'] }],
    },
    // The hub answers 401 to the agent's (wrong) HF token: a failure path that must not echo the token.
    { name: 'gated', source: 'hf://org/gated/model.gguf', profiles: [{ engine: 'sim' }] },
  ]) {
    const res = await send(`${adminUrl}/api/v1/models?force=true`, {
      method: 'POST',
      headers: admin,
      body: JSON.stringify(def),
    });
    expect(res.status, res.body).toBe(200);
  }
  const created = await send(`${adminUrl}/api/v1/keys`, {
    method: 'POST',
    headers: admin,
    body: JSON.stringify({ name: 'canary' }),
  });
  apiKey = (JSON.parse(created.body) as { secret: string }).secret;
  engine = await waitFor(
    'chat to be ready',
    async () => {
      const reps = JSON.parse((await send(`${adminUrl}/api/v1/replicas?model=chat`, { headers: admin })).body) as {
        state: string;
        endpoint?: string;
      }[];
      return reps.find((r) => r.state === 'ready')?.endpoint;
    },
    60_000,
  );
  await waitFor(
    'the gated model to fail its fetch',
    async () => {
      const reps = JSON.parse((await send(`${adminUrl}/api/v1/replicas?model=gated`, { headers: admin })).body) as {
        state: string;
        error?: string;
      }[];
      return reps.find((r) => r.state === 'failed' && r.error) ? true : undefined;
    },
    60_000,
  );
}, 120_000);

afterAll(async () => {
  await stopAll();
  killEnginesOf([stateDir]);
  await hub?.close();
});

describe('the client listener refuses bad credentials with 401 and nothing else', () => {
  it('answers 401 in OpenAI’s shape for an injection, an empty bearer, another scheme and the admin token', async () => {
    for (const authorization of [
      `Bearer ' OR '1'='1`,
      'Bearer ',
      'Bearer',
      `Basic ${Buffer.from('a:b').toString('base64')}`,
      `Bearer ${CANARY_ADMIN}`,
      `Bearer ${apiKey}x`,
    ]) {
      const res = await send(`${clientUrl}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization, 'content-type': 'application/json' },
        body: chat(),
      });
      expect(res.status, authorization).toBe(401);
      expect(JSON.parse(res.body)).toMatchObject({
        error: { code: 'invalid_api_key', llmgw_code: 'LLMGW_UNAUTHORIZED', type: 'authentication_error' },
      });
    }
  });

  it('refuses a 1 MB bearer and a NUL byte in the header before any key is looked at, and keeps serving', async () => {
    // Only the first 32 KiB of the 1 MB request go out, in one write, and then the client waits: Node refuses at
    // 16 KiB of headers, answers 431 and closes the connection itself. Bytes still arriving after it has read its
    // last turn the close into a reset, which on a busy machine overtook the answer (the 431 went out, the test
    // read nothing), whether the rest came in one write or in pieces between reads. One write is read whole.
    const huge = await raw(clientUrl, (s) => {
      const request = `POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer ${'k'.repeat(1 << 20)}\r\ncontent-length: 2\r\n\r\n{}`;
      s.write(request.slice(0, 32 * 1024));
    });
    expect(huge.reply).toMatch(/^HTTP\/1\.1 431 /);
    expect(huge.reply).toContain('larger than 16 KiB');
    const nul = await raw(clientUrl, (s) => {
      s.write(
        `POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer abc\u0000def\r\ncontent-length: 2\r\n\r\n{}`,
      );
    });
    expect(nul.reply).toMatch(/^HTTP\/1\.1 400 /);
    expect(nul.reply).toContain('character HTTP does not allow');
    const ok = await send(`${clientUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
      body: chat(),
    });
    expect(ok.status).toBe(200);
  });

  it('asks for a key on every route but health', async () => {
    for (const [method, path] of [
      ['GET', '/v1/models'],
      ['GET', '/v1/models/chat'],
      ['POST', '/v1/chat/completions'],
      ['POST', '/v1/completions'],
      ['POST', '/v1/embeddings'],
    ] as const) {
      const res = await send(`${clientUrl}${path}`, {
        method,
        headers: { 'content-type': 'application/json' },
        ...(method === 'POST' ? { body: chat() } : {}),
      });
      expect(res.status, `${method} ${path}`).toBe(401);
    }
    expect((await send(`${clientUrl}/healthz`)).status).toBe(200);
    expect((await send(`${clientUrl}/readyz`)).status).toBe(200);
  });

  it('refuses a client key and the join token on the admin listener', async () => {
    for (const token of [apiKey, CANARY_JOIN]) {
      expect((await send(`${adminUrl}/api/v1/nodes`, { headers: { authorization: `Bearer ${token}` } })).status).toBe(
        401,
      );
      const add = await send(`${adminUrl}/api/v1/models`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: '{}',
      });
      expect(add.status).toBe(401);
    }
  });
});

describe('oversized and slow requests', () => {
  it('answers 413 to a 100 MB body, declared or chunked, before parsing it; the engine sees nothing', async () => {
    const before = await engineCounters();
    const declared = await raw(clientUrl, (s) => {
      s.once('data', () => s.end());
      s.write(
        `POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer ${apiKey}\r\ncontent-type: application/json\r\ncontent-length: ${100 << 20}\r\n\r\n{"model":`,
      );
    });
    expect(declared.reply).toMatch(/^HTTP\/1\.1 413 /);
    const chunked = await raw(clientUrl, async (s) => {
      s.write(
        `POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer ${apiKey}\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n`,
      );
      const piece = Buffer.alloc(1 << 20, 0x20);
      for (let i = 0; i < 100 && !s.destroyed; i++) {
        s.write(`${piece.length.toString(16)}\r\n`);
        s.write(piece);
        // Both listeners off again whichever fires: a hundred waits on one socket must not pile them up.
        if (!s.write('\r\n')) {
          await new Promise<void>((resolve) => {
            const done = () => {
              s.off('drain', done).off('close', done);
              resolve();
            };
            s.once('drain', done).once('close', done);
          });
        }
      }
      s.end('0\r\n\r\n');
    });
    expect(chunked.reply).toMatch(/^HTTP\/1\.1 413 /);
    expect(chunked.reply).toContain('LLMGW_BODY_TOO_LARGE');
    expect(await engineCounters()).toBe(before);
  });

  it('closes a connection whose headers arrive a byte at a time, by the headers timeout', async () => {
    const head = `POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer ${apiKey}\r\ncontent-type: application/json\r\n\r\n`;
    let sent = 0;
    const r = await raw(clientUrl, async (s) => {
      while (sent < head.length && !s.destroyed) {
        s.write(head[sent]!);
        sent++;
        await new Promise((res) => setTimeout(res, 250));
      }
    });
    // Closed by the server (configured to wait 2 s for headers) long before the last byte was sent.
    expect(sent).toBeLessThan(head.length);
    expect(r.reply === '' || /^HTTP\/1\.1 408 /.test(r.reply), r.reply).toBe(true);
  }, 60_000);

  it('refuses max_tokens of 1e9, n of 1e6 and a prompt beyond the context with 400 naming the field; the engine sees none', async () => {
    const before = await engineCounters();
    const headers = { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' };
    const cases: [string, string][] = [
      [chat({ max_tokens: 1e9 }), 'max_tokens'],
      [chat({ n: 1e6 }), 'n'],
      [chat({ n: 5 }), 'n'],
      [chat({ max_tokens: 2000 }), 'max_tokens'],
      [JSON.stringify({ model: 'chat', messages: [{ role: 'user', content: 'x'.repeat(16 * 5000) }] }), 'messages'],
    ];
    for (const [body, param] of cases) {
      const res = await send(`${clientUrl}/v1/chat/completions`, { method: 'POST', headers, body });
      expect(res.status, body.slice(0, 80)).toBe(400);
      expect(JSON.parse(res.body).error.param).toBe(param);
    }
    expect(await engineCounters()).toBe(before);
  });
});

describe('the admin listener refuses bad definitions whole', () => {
  it('answers 400 (or 413) with a message for malformed JSON, wrong types and huge definitions; nothing is written', async () => {
    const models = (await send(`${adminUrl}/api/v1/models`, { headers: admin })).body;
    const db = new Database(dbPath, { readonly: true });
    const auditRows = () => (db.prepare('SELECT count(*) AS n FROM audit_log').get() as { n: number }).n;
    const audits = auditRows();
    const bad: [string, number, RegExp][] = [
      ['{"name": "x", ', 400, /not valid JSON/],
      [JSON.stringify({ name: 42, source: 'file:///m', profiles: [{ engine: 'sim' }] }), 400, /name/],
      [JSON.stringify({ name: 'x', source: 'file:///m', profiles: 'sim' }), 400, /profiles/],
      [JSON.stringify({ name: 'x', source: 'file:///m', profiles: [{ engine: 'sim', gpus: -1 }] }), 400, /gpus/],
      [
        JSON.stringify({
          name: 'x',
          source: 'file:///m',
          profiles: [{ engine: 'sim', args: Array.from({ length: 200_000 }, () => '--flag') }],
        }),
        413,
        /larger than/,
      ],
      [
        JSON.stringify({ name: 'x', source: 'file:///m', fallbacks: ['no-such-model'], profiles: [{ engine: 'sim' }] }),
        400,
        /no-such-model/,
      ],
    ];
    for (const [body, status, message] of bad) {
      const res = await send(`${adminUrl}/api/v1/models`, { method: 'POST', headers: admin, body });
      expect(res.status, body.slice(0, 80)).toBe(status);
      expect((JSON.parse(res.body) as { error: string }).error).toMatch(message);
    }
    expect((await send(`${adminUrl}/api/v1/models/no-such-model`, { method: 'DELETE', headers: admin })).status).toBe(
      404,
    );
    expect((await send(`${adminUrl}/api/v1/models`, { headers: admin })).body).toBe(models);
    expect(auditRows()).toBe(audits);
    db.close();
  });
});

describe('canary secrets', () => {
  it('appear in no log line, metric, error body, audit row or dashboard page after the failure paths ran', async () => {
    // Two more failure paths with secrets in reach: a wrong admin token and a wrong dashboard login.
    await send(`${adminUrl}/api/v1/nodes`, { headers: { authorization: `Bearer ${CANARY_ADMIN}x` } });
    const wrongLogin = await send(`${adminUrl}/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin: adminUrl },
      body: `token=${encodeURIComponent(`${CANARY_ADMIN}-typo`)}`,
    });
    expect(wrongLogin.status).toBe(401);

    const credential = (JSON.parse(readFileSync(join(stateDir, 'node.json'), 'utf8')) as { credential: string })
      .credential;
    const canaries = {
      'API key': apiKey,
      'admin token': CANARY_ADMIN,
      'join token': CANARY_JOIN,
      'node credential': credential,
      'HF token': CANARY_HF,
    };

    // The dashboard, logged in: every page an operator sees.
    const login = await request(`${adminUrl}/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin: adminUrl },
      body: `token=${encodeURIComponent(CANARY_ADMIN)}`,
    });
    await login.body.text();
    const cookie = String(login.headers['set-cookie']).split(';')[0]!;
    const pages: string[] = [];
    for (const path of ['/', '/nodes', '/nodes/n1', '/models', '/models/gated', '/replicas', '/traffic', '/weights']) {
      const page = await send(`${adminUrl}${path}`, { headers: { cookie } });
      expect(page.status, path).toBe(200);
      pages.push(page.body);
    }

    const db = new Database(dbPath, { readonly: true });
    const audit = JSON.stringify(db.prepare('SELECT * FROM audit_log').all());
    db.close();
    const replicas = (await send(`${adminUrl}/api/v1/replicas`, { headers: admin })).body;
    expect(replicas, 'the gated fetch failed with a reason').toMatch(/401|access|HF_TOKEN/);
    const places: Record<string, string> = {
      'control plane log': control.lines.join('\n') + control.stderr(),
      'agent log': agent.lines.join('\n') + agent.stderr(),
      metrics: (await send(`${adminUrl}/metrics`, { headers: admin })).body,
      'error bodies': errorBodies.join('\n'),
      'audit rows': audit,
      'dashboard pages': pages.join('\n'),
      'replica views': replicas,
      'key listing': (await send(`${adminUrl}/api/v1/keys`, { headers: admin })).body,
    };
    expect(places['control plane log']!.length, 'the control plane logged at debug').toBeGreaterThan(1000);
    for (const [where, text] of Object.entries(places)) {
      for (const [what, secret] of Object.entries(canaries)) {
        expect(text.includes(secret), `the ${what} appears in the ${where}`).toBe(false);
      }
    }
  });
});
