import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { createJsonApp } from '../../http/index.js';
import { registerKeyAdmin, registerUsageAdmin } from './admin.js';
import { hashKey, MemoryKeyStore } from './keys.js';

describe('key admin routes', () => {
  it('shows the secret once, keeps only its hash, lists without it, revokes by exact id, and audits each write', async () => {
    const keys = new MemoryKeyStore();
    const audits: string[] = [];
    const app = createJsonApp({ logger: pino({ level: 'silent' }), bodyLimitBytes: 1 << 20 });
    registerKeyAdmin(app, {
      keys,
      now: () => Date.parse('2026-12-01T00:00:00Z'),
      audit: (actor, action, target) => void audits.push(`${actor.label ?? 'unlabelled'} ${action} ${target}`),
      modelExists: (m) => m === 'alpha',
    });
    const created = await app.inject({
      method: 'POST',
      url: '/api/v1/keys',
      headers: { 'x-llmgw-actor': 'alice' },
      payload: { name: 'ci', allowed_models: ['alpha'], requests_per_minute: 60 },
    });
    expect(created.statusCode).toBe(201);
    const body = created.json<{ id: string; secret: string; prefix: string; state: string }>();
    expect(body.secret.startsWith(body.prefix)).toBe(true);
    expect(body.state).toBe('active');
    expect(keys.lookupByHash(hashKey(body.secret))?.id, 'the store finds the key by the hash of its secret').toBe(
      body.id,
    );
    expect(JSON.stringify(keys.list()), 'the secret itself is stored nowhere').not.toContain(body.secret);

    const listed = await app.inject({ method: 'GET', url: '/api/v1/keys' });
    expect(listed.body).not.toContain(body.secret);
    expect(listed.json<{ keys: { id: string }[] }>().keys.map((k) => k.id)).toEqual([body.id]);

    const typo = await app.inject({
      method: 'POST',
      url: '/api/v1/keys',
      payload: { name: 'x', allowed_models: ['alpah'] },
    });
    expect(typo.statusCode).toBe(400);
    const unknownField = await app.inject({
      method: 'POST',
      url: '/api/v1/keys',
      payload: { name: 'x', requests_per_min: 5 },
    });
    expect(unknownField.statusCode).toBe(400);
    expect(unknownField.body).toContain('requests_per_minute');

    expect((await app.inject({ method: 'DELETE', url: `/api/v1/keys/${body.id}x` })).statusCode).toBe(404);
    expect((await app.inject({ method: 'DELETE', url: `/api/v1/keys/${body.id}` })).statusCode).toBe(200);
    expect(keys.list()[0]?.revokedAtMs).not.toBeNull();
    expect(audits).toEqual([`alice key.create ${body.id}`, `unlabelled key.revoke ${body.id}`]);
  });
});

describe('usage admin route', () => {
  it('lists the stored totals, and nothing on a control plane without a store', async () => {
    const row = {
      key_id: 'key_1',
      model: 'alpha',
      endpoint: 'chat',
      requests: 2,
      errors: 0,
      prompt_tokens: 10,
      completion_tokens: 4,
    };
    const rerank = { ...row, endpoint: 'rerank', requests: 1 };
    const stored = createJsonApp({ logger: pino({ level: 'silent' }), bodyLimitBytes: 1 << 20 });
    registerUsageAdmin(stored, {
      usage: {
        list: async (filter = {}) =>
          [row, rerank].filter((r) => filter.endpoint === undefined || r.endpoint === filter.endpoint),
      },
    });
    expect(
      (await stored.inject({ method: 'GET', url: '/api/v1/usage' })).json(),
      'the rows as the store holds them',
    ).toEqual([row, rerank]);
    expect(
      (await stored.inject({ method: 'GET', url: '/api/v1/usage?endpoint=rerank' })).json(),
      'one endpoint',
    ).toEqual([rerank]);
    const bad = await stored.inject({ method: 'GET', url: '/api/v1/usage?endpoint=speech' });
    expect(bad.statusCode).toBe(400);
    expect(bad.body, 'the refusal lists the endpoints').toContain('want one of chat, completions, embeddings, rerank');
    const memoryOnly = createJsonApp({ logger: pino({ level: 'silent' }), bodyLimitBytes: 1 << 20 });
    registerUsageAdmin(memoryOnly, {});
    expect(
      (await memoryOnly.inject({ method: 'GET', url: '/api/v1/usage' })).json(),
      'no store, no usage kept',
    ).toEqual([]);
  });
});

describe('key admin bodies, checked by the route schema', () => {
  // Guards the move from a safeParse in the handler to the route's zod schema:
  // the answers must read word for word as they did, an absent body included.
  it('words a bad key, an absent body and a bad endpoint as before', async () => {
    const app = createJsonApp({ logger: pino({ level: 'silent' }), bodyLimitBytes: 1 << 20 });
    registerKeyAdmin(app, { keys: new MemoryKeyStore(), now: () => 0, audit: () => undefined });
    registerUsageAdmin(app, {});
    const typo = await app.inject({ method: 'POST', url: '/api/v1/keys', payload: { name: 'x', requests_per_min: 5 } });
    expect(typo.statusCode).toBe(400);
    expect(typo.json()).toEqual({
      error: 'the key is not valid: requests_per_min: unknown field; did you mean "requests_per_minute"?',
    });
    const absent = await app.inject({ method: 'POST', url: '/api/v1/keys' });
    expect(absent.statusCode).toBe(400);
    expect(absent.json()).toEqual({ error: 'the key is not valid: name: is required (string)' });
    const speech = await app.inject({ method: 'GET', url: '/api/v1/usage?endpoint=speech' });
    expect(speech.statusCode).toBe(400);
    expect(speech.json<{ error: string }>().error).toMatch(/^endpoint: "speech" is no endpoint; want one of chat, /);
  });
});
