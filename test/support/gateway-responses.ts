// The Responses harness, shared by src/gateway/responses-*.test.ts:
// POST /v1/responses in process, the official `openai` client against a
// Fastify app with the router registered (stub catalog and directory, real
// sim engines as replicas). One model's replica runs the sim as itself, which
// serves the Responses API natively; the other's is the same sim marked as
// an engine that does not (llama.cpp), so the router translates to chat.
// The sim writes its Responses answers independently of the router's
// translation and hashes a conversation the same way in both APIs, so the
// two paths giving the same words proves the translation kept the
// conversation exactly.
//
// Kept under test/support, not beside the tests, because it builds the
// control plane's key, usage and response stores, which no non-test file in
// src/gateway may import (ESLint and src/architecture.test.ts fence it).
import type { AddressInfo } from 'node:net';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import OpenAI from 'openai';
import pino from 'pino';
import { Registry } from 'prom-client';
import { compileModel, ModelSchema, type Model } from '../../src/control/catalog/index.js';
import { createJsonApp } from '../../src/http/index.js';
import { startSimEngine } from '../../src/engine/sim/index.js';
import { issueKey, MemoryKeyStore, MemoryUsageSink } from '../../src/control/keys/index.js';
import { MemoryResponseStore, RESPONSE_STORE_DEFAULTS } from '../../src/control/responses/index.js';
import { openAiErrorShape, registerRouter, type RouterReplica } from '../../src/gateway/index.js';
import { cleanups } from './gateway-router.js';

export { closeAll } from './gateway-router.js';

export function model(name: string): Model {
  return compileModel(
    ModelSchema.parse({ name, source: `file:///models/${name}`, profiles: [{ engine: 'sim' }] }),
    'file',
  );
}

/** Names of the two models: one served natively, one through translation. */
export const NATIVE = 'native';
export const TRANSLATED = 'translated';
export const PATHS = [NATIVE, TRANSLATED] as const;

export async function simReplica(m: Model, engine: string): Promise<RouterReplica> {
  const sim = await startSimEngine({ models: [m.name], shutdownGraceMs: 0 });
  cleanups.push(() => sim.close({ graceMs: 0 }));
  return { id: `${m.name}-r1`, endpoint: sim.url, draining: false, engine };
}

/** An engine stand-in that answers as `answer` says; records each request's path and body. */
export async function scripted(
  answer: (body: Record<string, unknown>, res: ServerResponse) => void,
  engine = 'llamacpp',
): Promise<{ replica: RouterReplica; seen: { path: string; body: Record<string, unknown> }[] }> {
  const seen: { path: string; body: Record<string, unknown> }[] = [];
  const server: Server = createServer((req: IncomingMessage, res) => {
    let raw = '';
    req.on('data', (c: Buffer) => (raw += c.toString('utf8')));
    req.on('end', () => {
      const body = JSON.parse(raw) as Record<string, unknown>;
      seen.push({ path: req.url ?? '', body });
      answer(body, res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  const port = (server.address() as AddressInfo).port;
  return { replica: { id: `scripted-${port}`, endpoint: `http://127.0.0.1:${port}`, draining: false, engine }, seen };
}

export async function harness(replicas?: Partial<Record<string, RouterReplica[]>>) {
  const logger = pino({ level: 'silent' });
  const app = createJsonApp({
    logger,
    bodyLimitBytes: 8 << 20,
    shapeError: openAiErrorShape,
    requestLoggers: false,
    requestIds: true,
  });
  const models = [model(NATIVE), model(TRANSLATED)];
  const ready = new Map<string, RouterReplica[]>();
  ready.set(NATIVE, replicas?.[NATIVE] ?? [await simReplica(models[0]!, 'sim')]);
  ready.set(TRANSLATED, replicas?.[TRANSLATED] ?? [await simReplica(models[1]!, 'llamacpp')]);
  const keys = new MemoryKeyStore();
  const usage = new MemoryUsageSink();
  const responses = new MemoryResponseStore(RESPONSE_STORE_DEFAULTS);
  registerRouter(app, {
    catalog: { resolve: (n) => models.find((m) => m.name === n), models: () => models },
    replicas: { ready: (n) => ready.get(n) ?? [], describe: () => 'none is wanted', demand: () => false },
    keys,
    authRequired: true,
    usage,
    registry: new Registry(),
    logger,
    random: () => 0,
    retryBackoffMs: 1,
    sweepIntervalMs: 0,
    responses,
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  cleanups.push(() => app.close());
  const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  const { secret } = await issueKey(keys, { name: 'test' }, Date.now(), 'test');
  const { secret: other } = await issueKey(keys, { name: 'other' }, Date.now(), 'test');
  const client = (apiKey = secret) => new OpenAI({ apiKey, baseURL: `${url}/v1`, maxRetries: 0, timeout: 20_000 });
  return { url, usage, secret, other, client };
}

export const weather = {
  type: 'function' as const,
  name: 'get_weather',
  description: 'the weather in a city',
  parameters: { type: 'object', properties: { city: { type: 'string' } } },
  strict: false,
};
