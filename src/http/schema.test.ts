import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createJsonApp, type RouteJsonWording, type ZodTypeProvider } from './index.js';

function app() {
  return createJsonApp({
    logger: pino({ level: 'silent' }),
    bodyLimitBytes: 1 << 20,
  }).withTypeProvider<ZodTypeProvider>();
}

describe('zod route schemas', () => {
  it('hands the handler the parsed body, and answers a bad one 400 in the listener shape, worded per route', async () => {
    const a = app();
    const wording: RouteJsonWording = { invalidBody: 'the thing is not valid' };
    a.post(
      '/thing',
      { schema: { body: z.strictObject({ name: z.string(), count: z.number().int().default(1) }) }, config: wording },
      async (request) => ({ name: request.body.name, count: request.body.count }),
    );
    const ok = await a.inject({ method: 'POST', url: '/thing', payload: { name: 'x' } });
    expect(ok.json(), 'defaults are applied before the handler').toEqual({ name: 'x', count: 1 });
    const typo = await a.inject({ method: 'POST', url: '/thing', payload: { name: 'x', cuont: 2 } });
    expect(typo.statusCode).toBe(400);
    expect(typo.json()).toEqual({ error: 'the thing is not valid: cuont: unknown field; did you mean "count"?' });
    const missing = await a.inject({ method: 'POST', url: '/thing', payload: {} });
    expect(missing.json()).toEqual({ error: 'the thing is not valid: name: is required (string)' });
  });

  it('words a problem with the whole body by its message alone, and reads an absent body as absent', async () => {
    const a = app();
    a.post(
      '/def',
      { schema: { body: z.looseObject({}, { error: 'the definition must be a JSON object' }) } },
      async () => ({ ok: true }),
    );
    a.post('/opt', { schema: { body: z.object({ n: z.number().default(3) }).prefault({}) } }, async (request) => ({
      n: request.body.n,
    }));
    for (const payload of ['[1]', '"x"', undefined]) {
      const res = await a.inject({
        method: 'POST',
        url: '/def',
        ...(payload === undefined ? {} : { payload, headers: { 'content-type': 'application/json' } }),
      });
      expect(res.statusCode, String(payload)).toBe(400);
      expect(res.json(), String(payload)).toEqual({ error: 'the definition must be a JSON object' });
    }
    expect((await a.inject({ method: 'POST', url: '/opt' })).json(), 'no body: the schema says what it means').toEqual({
      n: 3,
    });
  });

  it('checks the query too, naming the parameter, without the body wording', async () => {
    const a = app();
    a.get(
      '/q',
      { schema: { querystring: z.object({ kind: z.enum(['a', 'b']).optional() }) }, config: { invalidBody: 'x' } },
      async (request) => ({ kind: request.query.kind ?? null }),
    );
    expect((await a.inject({ method: 'GET', url: '/q?kind=b' })).json()).toEqual({ kind: 'b' });
    const bad = await a.inject({ method: 'GET', url: '/q?kind=c' });
    expect(bad.statusCode).toBe(400);
    expect(bad.json<{ error: string }>().error).toMatch(/^kind: /);
  });

  it('names the field of the first problem to a shape that shows one, and none for the whole value', async () => {
    const a = createJsonApp({
      logger: pino({ level: 'silent' }),
      bodyLimitBytes: 1 << 20,
      shapeError: (e) => ({ message: e.message, param: e.param ?? null }),
    }).withTypeProvider<ZodTypeProvider>();
    a.post(
      '/p',
      { schema: { body: z.object({ a: z.string(), b: z.object({ c: z.number() }) }, { error: 'want an object' }) } },
      async () => ({ ok: true }),
    );
    const nested = await a.inject({ method: 'POST', url: '/p', payload: { a: 'x', b: { c: 'y' } } });
    expect(nested.json<{ param: string | null }>().param, 'the top-level field holding it').toBe('b');
    const whole = await a.inject({ method: 'POST', url: '/p', payload: [1] });
    expect(whole.json()).toEqual({ message: 'want an object', param: null });
  });
});
