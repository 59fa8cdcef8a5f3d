// The Messages API's in-process harness, shared by
// src/gateway/dialects/anthropic/messages-*.test.ts: the official
// `@anthropic-ai/sdk` against a Fastify app with the router registered (stub
// catalog and directory, real sim engines or scripted stand-ins as
// replicas). Here, not beside the tests, because it builds the control
// plane's key store and catalog entries, which the gateway must never import.
import type { AddressInfo } from 'node:net';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import Anthropic from '@anthropic-ai/sdk';
import pino from 'pino';
import { Registry } from 'prom-client';
import { compileModel, ModelSchema, type Model } from '../../src/control/catalog/index.js';
import { createJsonApp } from '../../src/http/index.js';
import { startSimEngine } from '../../src/engine/sim/index.js';
import { issueKey, MemoryKeyStore, MemoryUsageSink } from '../../src/control/keys/index.js';
import { openAiErrorShape, registerRouter, type RouterReplica } from '../../src/gateway/index.js';

/** What each test started, closed in reverse after it: every helper here pushes its own. */
export const cleanups: (() => Promise<unknown> | unknown)[] = [];

/** Closes what the test started; each test file runs it in afterEach. */
export async function closeAll(): Promise<void> {
  while (cleanups.length) await cleanups.pop()!();
}

export function model(name: string, aliases: string[] = []): Model {
  return compileModel(
    ModelSchema.parse({ name, aliases, source: `file:///models/${name}`, profiles: [{ engine: 'sim' }] }),
    'file',
  );
}

/** An endpoint nothing listens on: a port that was just bound and released. */
export async function closedEndpoint(): Promise<string> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `http://127.0.0.1:${port}`;
}

export async function harness(replicasOf: (m: Model) => Promise<RouterReplica[]>) {
  const logger = pino({ level: 'silent' });
  const app = createJsonApp({
    logger,
    bodyLimitBytes: 8 << 20,
    shapeError: openAiErrorShape,
    requestLoggers: false,
    requestIds: true,
  });
  const m = model('demo', ['demo-alias']);
  const other = model('other');
  const models = [m, other];
  const byName = new Map<string, Model>();
  for (const x of models) for (const n of [x.name, ...x.aliases]) byName.set(n, x);
  const ready = new Map<string, RouterReplica[]>([[m.name, await replicasOf(m)]]);
  const keys = new MemoryKeyStore();
  const usage = new MemoryUsageSink();
  registerRouter(app, {
    catalog: { resolve: (n) => byName.get(n), models: () => models },
    replicas: { ready: (n) => ready.get(n) ?? [], describe: () => 'none is wanted', demand: () => false },
    keys,
    authRequired: true,
    usage,
    registry: new Registry(),
    logger,
    random: () => 0,
    retryBackoffMs: 1,
    sweepIntervalMs: 0,
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  cleanups.push(() => app.close());
  const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  const { secret } = await issueKey(keys, { name: 'test' }, Date.now(), 'test');
  const { secret: demoOnly } = await issueKey(
    keys,
    { name: 'other-only', allowedModels: ['other'] },
    Date.now(),
    'test',
  );
  const { secret: onePerMinute } = await issueKey(
    keys,
    { name: 'one-per-minute', requestsPerMinute: 1 },
    Date.now(),
    'test',
  );
  const client = new Anthropic({ apiKey: secret, baseURL: url, maxRetries: 0, timeout: 20_000 });
  return { url, usage, secret, demoOnly, onePerMinute, client };
}

export async function simReplicas(m: Model): Promise<RouterReplica[]> {
  const engine = await startSimEngine({ models: [m.name, ...m.aliases], shutdownGraceMs: 0 });
  cleanups.push(() => engine.close({ graceMs: 0 }));
  // Named as the directory names it, so the gateway knows its /tokenize takes chat messages (message_start's count).
  return [{ id: 'r1', endpoint: engine.url, draining: false, engine: 'sim' }];
}

/** An engine stand-in that answers as `answer` says, with the request's parsed body; counts what it saw. */
export async function scripted(
  answer: (body: Record<string, unknown>, res: ServerResponse, path: string) => void,
): Promise<{ replica: RouterReplica; seen(): Record<string, unknown>[] }> {
  const seen: Record<string, unknown>[] = [];
  const server: Server = createServer((req: IncomingMessage, res) => {
    let raw = '';
    req.on('data', (c: Buffer) => (raw += c.toString('utf8')));
    req.on('end', () => {
      const body = JSON.parse(raw) as Record<string, unknown>;
      seen.push(body);
      answer(body, res, req.url ?? '');
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
  return {
    replica: {
      id: `scripted-${(server.address() as AddressInfo).port}`,
      endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      draining: false,
    },
    seen: () => seen,
  };
}

export const chunk = (choice: Record<string, unknown>) =>
  `data: ${JSON.stringify({ id: 'chatcmpl-s', object: 'chat.completion.chunk', created: 0, model: 'demo', choices: [{ index: 0, logprobs: null, finish_reason: null, ...choice }] })}\n\n`;

export const weather = {
  name: 'get_weather',
  description: 'the weather in a city',
  input_schema: { type: 'object' as const, properties: { city: { type: 'string' } } },
};
