import Fastify, { type FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { LlmgwError } from '../errors/index.js';
import type { ZodTypeProvider } from '../http/index.js';
import { declareMgmtBodies } from './mgmt-bodies.js';

let app: FastifyInstance | null = null;
afterEach(async () => {
  await app?.close();
  app = null;
});

async function listener(): Promise<FastifyInstance> {
  app = Fastify();
  declareMgmtBodies(app);
  const typed = app.withTypeProvider<ZodTypeProvider>();
  const body = z.strictObject({ shard: z.string().min(1), lines: z.number().int().min(1) });
  typed.post('/labelled', { schema: { body }, config: { invalidBody: 'the tail request' } }, async (request) => ({
    got: request.body.shard,
  }));
  typed.post('/plain', { schema: { body } }, async () => ({ ok: true }));
  typed.post('/throws', async () => {
    throw new LlmgwError('LLMGW_NOT_FOUND', 'no shard s1 on this node');
  });
  await app.ready();
  return app;
}

const post = (server: FastifyInstance, url: string, payload: unknown) =>
  server.inject({ method: 'POST', url, payload: payload as object });

describe('the management listener’s bodies', () => {
  it('hands the handler the parsed body', async () => {
    const res = await post(await listener(), '/labelled', { shard: 's1', lines: 5 });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual({ got: 's1' });
  });

  it('answers a body that does not fit with 400 in the listener’s shape, each problem named by field', async () => {
    const server = await listener();
    const labelled = await post(server, '/labelled', { shard: '', lines: 5, colour: 'red' });
    expect(labelled.statusCode).toBe(400);
    expect(labelled.json().error, 'the route’s label, then every problem').toMatch(
      /^the tail request: shard: .+; colour: unknown field; valid fields here are shard, lines$/,
    );
    const plain = await post(server, '/plain', { shard: 's1' });
    expect(plain.statusCode).toBe(400);
    expect(plain.json()).toEqual({ error: 'lines: is required (number)' });
  });

  it('leaves every other error to Fastify’s own handler', async () => {
    // Regression guard: an error handler that caught everything would turn a handler's 404 into a 400 or a 500.
    const res = await post(await listener(), '/throws', {});
    expect(res.statusCode, res.body).toBe(404);
    expect(res.json()).toMatchObject({ statusCode: 404, message: 'no shard s1 on this node' });
  });
});
