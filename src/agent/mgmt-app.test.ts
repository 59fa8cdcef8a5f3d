import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { SilentConnections } from '../../test/support/silent-connections.js';
import { waitFor } from '../../test/support/wait.js';
import { LlmgwError } from '../errors/index.js';
import type { ZodTypeProvider } from '../http/index.js';
import { createMgmtApp, mgmtConnectionCap } from './mgmt-app.js';

const TOKEN = 'mgmt-token-of-this-node';
const auth = { authorization: `Bearer ${TOKEN}` };

let app: FastifyInstance | null = null;
const silent = new SilentConnections();
afterEach(async () => {
  silent.destroyAll();
  await app?.close();
  app = null;
});

/**
 * The listener as the agent builds it, with three routes of the kind the agent adds; `ran` counts handler calls.
 * `token` null: the node holds none yet. `logged` collects what it logs at warn and above.
 */
async function listener(options: { token?: string | null; openFiles?: number } = {}) {
  const ran = { count: 0 };
  const logged: { msg: string; [field: string]: unknown }[] = [];
  const logger = pino({ level: 'warn' }, { write: (line: string) => void logged.push(JSON.parse(line)) });
  const token = options.token === undefined ? TOKEN : options.token;
  app = createMgmtApp({ logger, tls: null, token: () => token ?? undefined, openFiles: options.openFiles ?? null });
  const typed = app.withTypeProvider<ZodTypeProvider>();
  const body = z.strictObject({ shard: z.string().min(1), lines: z.number().int().min(1) });
  typed.post('/labelled', { schema: { body }, config: { invalidBody: 'the tail request' } }, async (request) => {
    ran.count++;
    return { got: request.body.shard };
  });
  typed.post('/plain', { schema: { body } }, async () => ({ ok: true }));
  typed.get('/throws', async () => {
    ran.count++;
    throw new LlmgwError('LLMGW_NOT_FOUND', 'no shard s1 on this node');
  });
  await app.ready();
  return { app, ran, logged };
}

const post = (server: FastifyInstance, url: string, payload: unknown, headers: Record<string, string> = auth) =>
  server.inject({ method: 'POST', url, payload: payload as object, headers });

describe('the management listener’s bodies', () => {
  it('hands the handler the parsed body', async () => {
    const { app } = await listener();
    const res = await post(app, '/labelled', { shard: 's1', lines: 5 });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual({ got: 's1' });
  });

  it('answers a body that does not fit with 400 in the listener’s shape, each problem named by field', async () => {
    const { app } = await listener();
    const labelled = await post(app, '/labelled', { shard: '', lines: 5, colour: 'red' });
    expect(labelled.statusCode).toBe(400);
    expect(labelled.json().error, 'the route’s label, then every problem').toMatch(
      /^the tail request: shard: .+; colour: unknown field; valid fields here are shard, lines$/,
    );
    const plain = await post(app, '/plain', { shard: 's1' });
    expect(plain.statusCode).toBe(400);
    expect(plain.json()).toEqual({ error: 'lines: is required (number)' });
  });

  it('answers a body that is not JSON with 400 in the same shape', async () => {
    const { app } = await listener();
    const res = await app.inject({
      method: 'POST',
      url: '/plain',
      payload: '{"shard": ',
      headers: { ...auth, 'content-type': 'application/json' },
    });
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json()).toEqual({ error: expect.stringMatching(/^the request body is not valid JSON: /) });
  });

  it('answers a handler’s own error with its status and message', async () => {
    const { app } = await listener();
    const res = await app.inject({ method: 'GET', url: '/throws', headers: auth });
    expect(res.statusCode, res.body).toBe(404);
    expect(res.json()).toEqual({ error: 'no shard s1 on this node' });
  });
});

describe('the management listener’s token', () => {
  const REFUSED = { error: "only this node's control plane may call its management API" };

  it.each([
    ['no token', {}],
    ['another token', { authorization: 'Bearer not-this-one' }],
    ['the token not as a bearer', { authorization: TOKEN }],
  ])('refuses %s with 401 on a route, an unknown path and a wrong verb, running nothing', async (_, headers) => {
    const { app, ran } = await listener();
    for (const [method, url] of [
      ['GET', '/throws'],
      ['GET', '/mgmt/v1/nope'],
      ['DELETE', '/labelled'],
    ] as const) {
      const res = await app.inject({ method, url, headers });
      expect(res.statusCode, `${method} ${url}: ${res.body}`).toBe(401);
      expect(res.json()).toEqual(REFUSED);
      expect(res.headers.allow, 'a caller without the token learns no verbs').toBeUndefined();
    }
    expect(ran.count).toBe(0);
  });

  it('refuses every call until the node holds a token', async () => {
    const { app, ran } = await listener({ token: null });
    const res = await app.inject({ method: 'GET', url: '/throws', headers: auth });
    expect(res.statusCode).toBe(401);
    expect(ran.count).toBe(0);
  });

  it('answers an unknown path 404 and a wrong verb 405, with the token, in the listener’s shape', async () => {
    const { app } = await listener();
    const missing = await app.inject({ method: 'GET', url: '/mgmt/v1/nope', headers: auth });
    expect(missing.statusCode).toBe(404);
    expect(missing.json()).toEqual({ error: 'no route GET /mgmt/v1/nope' });
    const verb = await app.inject({ method: 'GET', url: '/labelled', headers: auth });
    expect(verb.statusCode).toBe(405);
    expect(verb.headers.allow).toBe('POST');
    expect(verb.json().error).toMatch(/^GET is not allowed on \/labelled; use POST$/);
  });
});

describe('the management listener’s connections', () => {
  it('caps them at a share of the open-file limit, between 16 and 128', () => {
    expect(mgmtConnectionCap(null)).toBe(128);
    expect(mgmtConnectionCap(1 << 20)).toBe(128);
    // 200 files: 64 kept for the process, half the rest for the listener.
    expect(mgmtConnectionCap(200)).toBe(68);
    expect(mgmtConnectionCap(50)).toBe(16);
  });

  // Attack: silent connections held open until the agent had no file descriptor left for its engines, its
  // downloads or its heartbeats. At the cap the oldest silent one makes room, and a real call still gets through.
  it('closes silent connections past the cap and still answers its control plane', async () => {
    const { app, logged } = await listener({ openFiles: 50 });
    await app.listen({ host: '127.0.0.1', port: 0 });
    const { port } = app.server.address() as { port: number };
    await silent.open(port, 40);
    await waitFor('the cap of 16 closed 24 of the 40', () => silent.closed >= 24);
    const res = await fetch(`http://127.0.0.1:${port}/throws`, { headers: auth });
    expect(res.status).toBe(404);
    expect(await res.json()).toEqual({ error: 'no shard s1 on this node' });
    expect(
      silent.closed,
      'no more than the flood past the cap, and the call’s own connection made room',
    ).toBeLessThanOrEqual(25);
    const warnings = logged.filter((l) => l.msg.includes('at its connection cap'));
    expect(warnings, 'one line says what happens, not one per connection closed').toHaveLength(1);
    expect(warnings[0]).toMatchObject({ max_connections: 16, closed_since_last_warning: 1 });
  });
});
