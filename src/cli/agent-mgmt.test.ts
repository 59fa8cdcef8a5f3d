// The agent's management routes as the control plane calls them: what
// POST /mgmt/v1/weights/remove answers for a body it can use and for one it
// cannot. The control plane reads these answers (src/control/weights), so
// their status and wording are a contract between the two.
import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { RemoveResult } from '../agent/cache/weight-cache.js';
import { createMgmtApp } from '../agent/mgmt-app.js';
import { registerMgmtRoutes } from './agent.js';

const WANT = 'want {"paths": ["<cache dir>/<cache name>", ...]}';
const NAME = 'a'.repeat(64);
const TOKEN = 'mgmt-token';

let app: FastifyInstance | null = null;
afterEach(async () => {
  await app?.close();
  app = null;
});

/** The management listener as the agent builds it (src/agent/mgmt-app.ts) with its routes, over a cache that removes every path but one marked in use. */
async function mgmt(): Promise<{ app: FastifyInstance; asked: string[] }> {
  const asked: string[] = [];
  app = createMgmtApp({ logger: pino({ level: 'silent' }), tls: null, token: () => TOKEN, openFiles: null });
  registerMgmtRoutes(app, {
    cache: {
      remove: async (path, inUse): Promise<RemoveResult> => {
        asked.push(path);
        const user = inUse(NAME);
        return path.endsWith('busy') && user
          ? { removed: false, check: 'in_use', reason: `the entry is used by ${user}` }
          : { removed: true, name: NAME, bytesFreed: 42, leftBehind: [] };
      },
    },
    supervisor: { tailLog: () => [] },
    runner: { inUse: () => 'replica r-1' },
  });
  await app.ready();
  return { app, asked };
}

function remove(server: FastifyInstance, payload?: string, contentType = 'application/json') {
  return server.inject({
    method: 'POST',
    url: '/mgmt/v1/weights/remove',
    headers: {
      authorization: `Bearer ${TOKEN}`,
      ...(payload === undefined ? {} : { 'content-type': contentType }),
    },
    ...(payload === undefined ? {} : { payload }),
  });
}

describe('POST /mgmt/v1/weights/remove', () => {
  it('answers each path in order, removed or refused with the check and the reason', async () => {
    const { app, asked } = await mgmt();
    const res = await remove(app, JSON.stringify({ paths: ['/c/x', '/c/busy'], note: 'ignored' }));
    expect(res.statusCode, res.body).toBe(200);
    expect(asked, 'every path goes to the cache, in order').toEqual(['/c/x', '/c/busy']);
    expect(res.json()).toEqual({
      results: [
        { path: '/c/x', removed: true, bytes_freed: 42 },
        { path: '/c/busy', removed: false, check: 'in_use', reason: 'the entry is used by replica r-1' },
      ],
    });
  });

  it('answers an empty list with no results', async () => {
    const { app } = await mgmt();
    const res = await remove(app, '{"paths": []}');
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual({ results: [] });
  });

  it.each([
    ['no body', undefined],
    ['an empty body sent as JSON', ''],
    ['null', 'null'],
    ['no paths', '{}'],
    ['paths not a list', '{"paths": "/c/x"}'],
    ['a path that is not a string', '{"paths": ["/c/x", 7]}'],
    ['a list for a body', '["/c/x"]'],
  ])('refuses %s with 400 and the shape it wants, removing nothing', async (_, payload) => {
    const { app, asked } = await mgmt();
    const res = await remove(app, payload);
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json()).toEqual({ error: WANT });
    expect(asked, 'nothing reaches the cache').toEqual([]);
  });

  it('answers a body that is not JSON with 400 and what is wrong, removing nothing', async () => {
    const { app, asked } = await mgmt();
    const res = await remove(app, '{"paths": [');
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json()).toEqual({ error: expect.stringMatching(/^the request body is not valid JSON: /) });
    expect(asked).toEqual([]);
  });
});
