// The router end to end on loopback: the official `openai` client against a
// Fastify app from createJsonApp with the router registered, in-memory
// catalog and replica directory stubs, and real sim engines as replicas.
import { createServer, type Server } from 'node:http';
import { connect } from 'node:net';
import type { AddressInfo } from 'node:net';
import OpenAI from 'openai';
import pino from 'pino';
import { Registry } from 'prom-client';
import { Readable } from 'node:stream';
import { request as undiciRequest } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { compileModel, ModelSchema, type Model } from '../control/catalog/index.js';
import type { ModelDefinition } from '../control/catalog/model.js';
import { createJsonApp } from '../http/index.js';
import { startSimEngine, type SimEngine } from '../engine/sim/index.js';
import { issueKey, MemoryKeyStore, MemoryUsageSink } from '../control/keys/index.js';
import {
  openAiErrorShape,
  registerRouter,
  type ReplicaDirectory,
  type Router,
  type RouterDeps,
  type RouterReplica,
} from './index.js';
import { waitFor } from '../../test/support/wait.js';
import { RequestLog, requestRecordView } from './request-log.js';

const cleanups: (() => Promise<unknown> | unknown)[] = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});

function model(def: Partial<ModelDefinition> & { name: string }): Model {
  return compileModel(
    ModelSchema.parse({ source: `file:///models/${def.name}`, profiles: [{ engine: 'sim' }], ...def }),
    'file',
  );
}

class StubDirectory implements ReplicaDirectory {
  readonly replicas = new Map<string, RouterReplica[]>();
  /** Models for which demand() answers "one is starting". */
  readonly starting = new Set<string>();
  readonly demands: string[] = [];
  private readonly listeners = new Set<() => void>();

  ready(name: string): readonly RouterReplica[] {
    return this.replicas.get(name) ?? [];
  }
  describe(name: string): string {
    return this.starting.has(name) ? '1 fetching weights, 43%' : 'none is wanted (scaling min 0)';
  }
  demand(name: string): boolean {
    this.demands.push(name);
    return this.starting.has(name);
  }
  subscribe(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
  set(name: string, replicas: RouterReplica[]): void {
    this.replicas.set(name, replicas);
    for (const l of this.listeners) l();
  }
}

interface Harness {
  url: string;
  router: Router;
  directory: StubDirectory;
  keys: MemoryKeyStore;
  usage: MemoryUsageSink;
  registry: Registry;
  secret: string;
  client: OpenAI;
  clientWith(secret: string): OpenAI;
}

async function harness(models: Model[], overrides: Partial<RouterDeps> = {}): Promise<Harness> {
  const logger = pino({ level: 'silent' });
  // As the control plane builds its client listener.
  const app = createJsonApp({
    logger,
    bodyLimitBytes: 8 << 20,
    shapeError: openAiErrorShape,
    requestLoggers: false,
    requestIds: true,
  });
  const byName = new Map<string, Model>();
  for (const m of models) for (const n of [m.name, ...m.aliases]) byName.set(n, m);
  const directory = new StubDirectory();
  const keys = new MemoryKeyStore();
  const usage = new MemoryUsageSink();
  const registry = new Registry();
  const router = registerRouter(app, {
    catalog: { resolve: (n) => byName.get(n), models: () => models },
    replicas: directory,
    keys,
    authRequired: true,
    usage,
    registry,
    logger,
    random: () => 0,
    retryBackoffMs: 1,
    sweepIntervalMs: 0,
    ...overrides,
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  cleanups.push(() => app.close());
  const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  const { secret } = await issueKey(keys, { name: 'test' }, Date.now(), 'test');
  const clientWith = (s: string) => new OpenAI({ apiKey: s, baseURL: `${url}/v1`, maxRetries: 0, timeout: 20_000 });
  return { url, router, directory, keys, usage, registry, secret, client: clientWith(secret), clientWith };
}

async function sim(m: Model, options: Parameters<typeof startSimEngine>[0] = {}): Promise<SimEngine> {
  const engine = await startSimEngine({ models: [m.name, ...m.aliases], shutdownGraceMs: 0, ...options });
  cleanups.push(() => engine.close({ graceMs: 0 }));
  return engine;
}

function replica(id: string, endpoint: string): RouterReplica {
  return { id, endpoint, draining: false };
}

/** An endpoint nothing listens on: a port that was just bound and released. */
async function closedEndpoint(): Promise<string> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `http://127.0.0.1:${port}`;
}

/** The shared wait, in the order this file's checks read (condition first). */
function eventually(check: () => boolean, what: string, timeoutMs = 5_000): Promise<true> {
  return waitFor(what, check, { timeoutMs, intervalMs: 10 });
}

async function caught(p: Promise<unknown>): Promise<InstanceType<typeof OpenAI.APIError>> {
  try {
    await p;
  } catch (err) {
    if (err instanceof OpenAI.APIError) return err;
    throw err;
  }
  throw new Error('expected the request to fail');
}

describe('the router through the openai client', () => {
  it('lists models with their aliases, and answers chat, streaming with usage, completions and embeddings', async () => {
    const a = model({ name: 'alpha', aliases: ['a1'] });
    const b = model({ name: 'beta' });
    const h = await harness([a, b]);
    const engine = await sim(a);
    h.directory.set('alpha', [replica('r1', engine.url)]);

    const list = await h.client.models.list();
    expect(list.data.map((m) => m.id).sort(), 'every name and alias is listed').toEqual(['a1', 'alpha', 'beta']);

    const chat = await h.client.chat.completions.create({
      model: 'alpha',
      messages: [{ role: 'user', content: 'hello' }],
      max_tokens: 5,
    });
    expect(chat.choices[0]?.message.content, 'the sim generated words').toBeTruthy();
    expect(chat.usage?.completion_tokens).toBe(5);

    const stream = await h.client.chat.completions.create({
      model: 'alpha',
      messages: [{ role: 'user', content: 'hello' }],
      max_tokens: 7,
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = '';
    let usage: OpenAI.CompletionUsage | null | undefined;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? '';
      if (chunk.usage) usage = chunk.usage;
    }
    expect(text.length).toBeGreaterThan(0);
    expect(usage?.completion_tokens, 'the final usage chunk is relayed').toBe(7);

    const completion = await h.client.completions.create({ model: 'alpha', prompt: 'once upon', max_tokens: 3 });
    expect(completion.choices[0]?.text).toBeTruthy();

    const emb = await h.client.embeddings.create({ model: 'alpha', input: ['x', 'y'] });
    expect(emb.data).toHaveLength(2);

    // Usage reaches the sink after the response: non-streamed, streamed (from the last chunk), completions.
    const counted = () => h.usage.snapshot().reduce((n, u) => n + u.requests, 0);
    await eventually(() => counted() === 4, 'four usage records');
    const rows = h.usage.snapshot();
    expect(
      rows.reduce((n, u) => n + u.completionTokens, 0),
      '5 + 7 + 3 generated tokens, embeddings none',
    ).toBe(15);
    expect(new Set(rows.map((u) => u.model))).toEqual(new Set(['alpha']));
    expect(Object.fromEntries(rows.map((u) => [u.endpoint, u.requests])), 'counted per endpoint').toEqual({
      chat: 2,
      completions: 1,
      embeddings: 1,
    });

    const metrics = await h.registry.metrics();
    expect(metrics).toMatch(/llmgw_router_requests_total\{model="alpha",status="200",key_prefix="llmgw-/);
    expect(metrics, "the in-flight gauge is read from the router's own counts").toContain(
      'llmgw_router_replica_in_flight{replica="r1"} 0',
    );
    expect(h.router.replicaUse().get('r1')?.inFlight).toBe(0);
    expect(h.router.replicaUse().get('r1')?.lastUsedAtMs).toBeGreaterThan(0);
    h.directory.set('alpha', []);
    h.router.sweep();
    expect(h.router.replicaUse().has('r1'), 'a replica that is gone is forgotten').toBe(false);
    expect(
      await h.registry.getSingleMetricAsString('llmgw_router_replica_in_flight'),
      'and leaves the gauge',
    ).not.toContain('r1');
  });

  it("counts a stream whose client did not ask for usage, and against the key's token limit, without showing it the usage chunk", async () => {
    const a = model({ name: 'alpha' });
    const h = await harness([a]);
    const engine = await sim(a);
    h.directory.set('alpha', [replica('r1', engine.url)]);
    const limited = await issueKey(h.keys, { name: 'tokens', tokensPerMinute: 20 }, Date.now(), 'test');
    const client = h.clientWith(limited.secret);
    const streamOnce = async () => {
      const stream = await client.chat.completions.create({
        model: 'alpha',
        messages: [{ role: 'user', content: 'hello' }],
        max_tokens: 12,
        stream: true,
      });
      const chunks: OpenAI.Chat.Completions.ChatCompletionChunk[] = [];
      for await (const chunk of stream) chunks.push(chunk);
      return chunks;
    };
    const chunks = await streamOnce();
    expect(chunks.length).toBeGreaterThan(1);
    expect(
      chunks.every((c) => c.choices.length === 1),
      'no usage-only chunk (choices: []) reaches a client that did not ask',
    ).toBe(true);
    expect(
      chunks.some((c) => c.usage),
      'nor usage on any chunk',
    ).toBe(false);
    await eventually(
      () => (h.usage.snapshot().find((u) => u.keyId === limited.record.id)?.completionTokens ?? 0) === 12,
      "the stream's 12 tokens counted",
    );
    // The stream's 12 tokens (and its prompt) were charged: 12 more do not fit in what is left of 20, stream or not.
    const over = await caught(
      client.chat.completions.create({
        model: 'alpha',
        messages: [{ role: 'user', content: 'hello' }],
        max_tokens: 12,
        stream: true,
      }),
    );
    expect(over).toBeInstanceOf(OpenAI.RateLimitError);
  });

  it("gives every answer a request id, the client's own when it sends a sane one, and sends it to the engine", async () => {
    const a = model({ name: 'alpha' });
    const h = await harness([a]);
    const seen: (string | undefined)[] = [];
    const upstream = createServer((req, res) => {
      seen.push(req.headers['x-request-id'] as string | undefined);
      req.resume();
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'application/json', 'x-request-id': 'the-engine-own-id' });
        res.end(
          JSON.stringify({
            id: 'c',
            object: 'chat.completion',
            choices: [],
            usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
          }),
        );
      });
    });
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => new Promise((resolve) => upstream.close(resolve)));
    h.directory.set('alpha', [replica('r1', `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`)]);
    const post = (headers: Record<string, string>, path = '/v1/chat/completions') =>
      undiciRequest(`${h.url}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${h.secret}`, ...headers },
        body: JSON.stringify({ model: 'alpha', messages: [{ role: 'user', content: 'x' }] }),
      });

    const mine = await post({ 'x-request-id': 'trace-42.a:b' });
    await mine.body.text();
    expect(mine.headers['x-request-id'], "the client's id back, not the engine's").toBe('trace-42.a:b');
    const made = await post({});
    await made.body.text();
    expect(made.headers['x-request-id']).toMatch(/^req_[0-9a-f]{32}$/);
    const odd = await post({ 'x-request-id': 'has spaces in it' });
    await odd.body.text();
    expect(odd.headers['x-request-id'], 'an id unfit for a log line is replaced').toMatch(/^req_/);
    // The engine hears each id with a suffix of its own per attempt: vLLM refuses an id already running, and clients reuse theirs.
    expect(seen).toEqual([
      expect.stringMatching(/^trace-42\.a:b-[0-9a-z]+\.[0-9a-f]{6}$/),
      expect.stringMatching(new RegExp(`^${made.headers['x-request-id']}-[0-9a-z]+\\.`)),
      expect.stringMatching(new RegExp(`^${odd.headers['x-request-id']}-[0-9a-z]+\\.`)),
    ]);
    const again = await post({ 'x-request-id': 'trace-42.a:b' });
    await again.body.text();
    expect(seen[3], 'the same client id twice: two ids upstream').not.toBe(seen[0]);

    const refused = await post({ authorization: 'Bearer wrong', 'x-request-id': 'r-401' });
    await refused.body.text();
    expect([refused.statusCode, refused.headers['x-request-id']]).toEqual([401, 'r-401']);
    const missing = await post({ 'x-request-id': 'r-404' }, '/v1/nothing');
    await missing.body.text();
    expect([missing.statusCode, missing.headers['x-request-id']]).toEqual([404, 'r-404']);
    const err = await caught(
      h.client.chat.completions.create({ model: 'nope', messages: [{ role: 'user', content: 'x' }] }),
    );
    expect(err.requestID, "the openai client's error carries it").toMatch(/^req_/);
  });

  // Engines took no credential, and a client's own key must never reach an engine (issue 17).
  it("sends the replica's engine secret upstream as the bearer token, never the client's key, and serves through a keyed engine", async () => {
    const a = model({ name: 'alpha' });
    const h = await harness([a]);
    const seen: (string | undefined)[] = [];
    const upstream = createServer((req, res) => {
      seen.push(req.headers.authorization);
      req.resume();
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({
            id: 'c',
            object: 'chat.completion',
            choices: [],
            usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
          }),
        );
      });
    });
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => new Promise((resolve) => upstream.close(resolve)));
    const endpoint = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
    h.directory.set('alpha', [{ ...replica('r1', endpoint), engineSecret: 'replica-secret' }]);
    await h.client.chat.completions.create({ model: 'alpha', messages: [{ role: 'user', content: 'x' }] });
    h.directory.set('alpha', [replica('r1', endpoint)]);
    await h.client.chat.completions.create({ model: 'alpha', messages: [{ role: 'user', content: 'x' }] });
    expect(seen, "the secret when the replica has one, nothing otherwise; the client's key never").toEqual([
      'Bearer replica-secret',
      undefined,
    ]);

    const b = model({ name: 'beta' });
    const h2 = await harness([b]);
    const keyed = await sim(b, { apiKey: 'beta-secret' });
    h2.directory.set('beta', [{ ...replica('r2', keyed.url), engineSecret: 'beta-secret' }]);
    const answer = await h2.client.chat.completions.create({
      model: 'beta',
      messages: [{ role: 'user', content: 'x' }],
      max_tokens: 2,
    });
    expect(answer.choices[0]!.message.content, 'a keyed sim serves the router').toBeTruthy();
    expect(
      (
        await fetch(`${keyed.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${h2.secret}`, 'content-type': 'application/json' },
          body: '{}',
        })
      ).status,
      'and refuses the client key sent straight to it',
    ).toBe(401);
  });

  it('reads a body as vLLM would (no content type, a byte-order mark) and refuses a compressed or non-JSON one by name', async () => {
    const a = model({ name: 'alpha' });
    const h = await harness([a]);
    const engine = await sim(a);
    h.directory.set('alpha', [replica('r1', engine.url)]);
    const body = JSON.stringify({ model: 'alpha', messages: [{ role: 'user', content: 'x' }], max_tokens: 2 });
    const post = async (headers: Record<string, string>, payload: string | Buffer = body) => {
      const res = await undiciRequest(`${h.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${h.secret}`, ...headers },
        body: payload,
      });
      return { status: res.statusCode, text: await res.body.text() };
    };
    expect((await post({})).status, 'no content type: read as JSON').toBe(200);
    expect(
      (await post({ 'content-type': 'application/json' }, `\ufeff${body}`)).status,
      'a BOM is dropped, for the engine too',
    ).toBe(200);
    const plain = await post({ 'content-type': 'text/plain' });
    expect([plain.status, JSON.parse(plain.text).error.message]).toEqual([
      415,
      'send the body as JSON with Content-Type: application/json, not text/plain',
    ]);
    const gzip = await post(
      { 'content-type': 'application/json', 'content-encoding': 'gzip' },
      Buffer.from([0x1f, 0x8b, 8, 0]),
    );
    expect(gzip.status).toBe(415);
    expect(JSON.parse(gzip.text).error.message).toBe(
      'the body is sent with Content-Encoding: gzip, which llmgw does not decode; send it uncompressed',
    );
  });

  // Guards against any web page driving inference on a keyless loopback gateway: a page can POST a
  // Blob (no content type) or text/plain without a CORS preflight, and both were read as JSON.
  it("refuses a body that is not declared JSON when it asks for no key, in OpenAI's shape", async () => {
    const a = model({ name: 'alpha' });
    const h = await harness([a], { authRequired: false });
    const engine = await sim(a);
    h.directory.set('alpha', [replica('r1', engine.url)]);
    const body = JSON.stringify({ model: 'alpha', messages: [{ role: 'user', content: 'x' }], max_tokens: 2 });
    const post = async (headers: Record<string, string>) => {
      const res = await undiciRequest(`${h.url}/v1/chat/completions`, { method: 'POST', headers, body });
      return {
        status: res.statusCode,
        json: (await res.body.json()) as { error: { message: string; llmgw_code?: string } },
      };
    };
    const untyped = await post({});
    expect(untyped.status, 'no content type: refused without keys').toBe(415);
    expect(untyped.json.error.llmgw_code).toBe('LLMGW_UNSUPPORTED_MEDIA_TYPE');
    expect(untyped.json.error.message).toMatch(/Content-Type: application\/json/);
    expect((await post({ 'content-type': 'text/plain' })).status).toBe(415);
    expect((await post({ 'content-type': 'application/json' })).status, 'declared JSON still works').toBe(200);
  });

  it("answers a browser app's preflight for an allowed origin, and its relayed answers carry the CORS headers", async () => {
    const a = model({ name: 'alpha' });
    const h = await harness([a], { corsOrigins: ['https://chat.example.com'] });
    const engine = await sim(a);
    h.directory.set('alpha', [replica('r1', engine.url)]);
    const preflight = await undiciRequest(`${h.url}/v1/chat/completions`, {
      method: 'OPTIONS',
      headers: {
        origin: 'https://chat.example.com',
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'authorization,content-type,x-stainless-os',
      },
    });
    await preflight.body.text();
    expect(preflight.statusCode).toBe(204);
    expect(preflight.headers['access-control-allow-origin']).toBe('https://chat.example.com');
    expect(String(preflight.headers['access-control-allow-headers'])).toContain('authorization');
    const answer = await undiciRequest(`${h.url}/v1/chat/completions`, {
      method: 'POST',
      headers: {
        origin: 'https://chat.example.com',
        authorization: `Bearer ${h.secret}`,
        'content-type': 'application/json',
      },
      body: JSON.stringify({ model: 'alpha', messages: [{ role: 'user', content: 'x' }], max_tokens: 2 }),
    });
    await answer.body.text();
    expect(answer.statusCode).toBe(200);
    expect(answer.headers['access-control-allow-origin'], 'on the relayed answer too').toBe('https://chat.example.com');
    expect(String(answer.headers['access-control-expose-headers'])).toContain('x-request-id');
    const other = await undiciRequest(`${h.url}/v1/models`, {
      headers: { origin: 'https://evil.example', authorization: `Bearer ${h.secret}` },
    });
    await other.body.text();
    expect(other.headers['access-control-allow-origin'], 'another origin is not allowed').toBeUndefined();
  });

  it("adds stream_options to the client's own bytes (a 64-bit seed arrives intact), and sends a stream without it to an engine that refuses the field", async () => {
    const a = model({ name: 'alpha' });
    const h = await harness([a]);
    const bodies: string[] = [];
    let strict = false;
    const upstream = createServer((req, res) => {
      let text = '';
      req.on('data', (d: Buffer) => (text += d.toString('utf8')));
      req.on('end', () => {
        bodies.push(text);
        if (strict && text.includes('stream_options')) {
          res.writeHead(400, { 'content-type': 'application/json' });
          res.end(
            JSON.stringify({
              object: 'error',
              message: 'stream_options: Extra inputs are not permitted',
              type: 'BadRequestError',
              code: 400,
            }),
          );
          return;
        }
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write('data: {"id":"c","choices":[{"index":0,"delta":{"content":"hi"}}]}\n\n');
        if (text.includes('"include_usage":true'))
          res.write(
            'data: {"id":"c","choices":[],"usage":{"prompt_tokens":2,"completion_tokens":1,"total_tokens":3}}\n\n',
          );
        res.end('data: [DONE]\n\n');
      });
    });
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => new Promise((resolve) => upstream.close(resolve)));
    h.directory.set('alpha', [replica('r1', `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`)]);
    const send = async () => {
      const res = await undiciRequest(`${h.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${h.secret}`, 'content-type': 'application/json' },
        body: '{"model":"alpha","seed":9223372036854775807,"stream":true,"messages":[{"role":"user","content":"x"}]}',
      });
      return { status: res.statusCode, text: await res.body.text() };
    };

    const first = await send();
    expect(first.status).toBe(200);
    expect(first.text, 'the usage chunk is kept from a client that did not ask').not.toContain('"usage"');
    expect(bodies[0]).toBe(
      '{"model":"alpha","seed":9223372036854775807,"stream":true,"messages":[{"role":"user","content":"x"}],"stream_options":{"include_usage":true}}',
    );

    strict = true;
    const second = await send();
    expect(second.status, 'the engine that refuses the field still answers the stream').toBe(200);
    expect(second.text).toContain('"content":"hi"');
    expect(bodies.slice(1), 'asked with the field, then as the client wrote it').toEqual([
      bodies[0],
      '{"model":"alpha","seed":9223372036854775807,"stream":true,"messages":[{"role":"user","content":"x"}]}',
    ]);
  });

  it('answers injected requests (no real socket) like real ones', async () => {
    const logger = pino({ level: 'silent' });
    const app = createJsonApp({ logger, bodyLimitBytes: 1 << 20, shapeError: openAiErrorShape });
    const keys = new MemoryKeyStore();
    const m = model({ name: 'alpha' });
    registerRouter(app, {
      catalog: { resolve: (n) => (n === 'alpha' ? m : undefined), models: () => [m] },
      replicas: new StubDirectory(),
      keys,
      authRequired: true,
      usage: new MemoryUsageSink(),
      registry: new Registry(),
      logger,
      sweepIntervalMs: 0,
    });
    cleanups.push(() => app.close());
    const { secret } = await issueKey(keys, { name: 'inject' }, Date.now(), 'test');
    const list = await app.inject({ method: 'GET', url: '/v1/models', headers: { authorization: `Bearer ${secret}` } });
    expect(list.statusCode, list.body).toBe(200);
    const chat = await app.inject({
      method: 'POST',
      url: '/v1/chat/completions',
      payload: { model: 'nope', messages: [{ role: 'user', content: 'x' }] },
      headers: { authorization: `Bearer ${secret}` },
    });
    expect(chat.statusCode, chat.body).toBe(404);
  });

  it('serves a model by its alias without rewriting the body', async () => {
    const a = model({ name: 'alpha', aliases: ['a1'] });
    const h = await harness([a]);
    const engine = await sim(a);
    h.directory.set('alpha', [replica('r1', engine.url)]);
    const chat = await h.client.chat.completions.create({ model: 'a1', messages: [{ role: 'user', content: 'hi' }] });
    expect(chat.model, 'the engine saw the alias: the original bytes went upstream').toBe('a1');
    expect(
      ((await h.client.models.retrieve('a1')) as unknown as { root: string }).root,
      'an alias names its model',
    ).toBe('alpha');
    expect(await caught(h.client.models.retrieve('nope'))).toBeInstanceOf(OpenAI.NotFoundError);
  });

  it('asks for no key on a listener configured without keys (loopback only)', async () => {
    const a = model({ name: 'alpha' });
    const h = await harness([a], { authRequired: false });
    const engine = await sim(a);
    h.directory.set('alpha', [replica('r1', engine.url)]);
    const chat = await h
      .clientWith('anything')
      .chat.completions.create({ model: 'alpha', messages: [{ role: 'user', content: 'hi' }] });
    expect(chat.choices).toHaveLength(1);
    await eventually(() => h.usage.snapshot()[0]?.keyId === 'anonymous', 'usage under the anonymous key');
  });

  it('answers each refusal with the status and error class OpenAI would', async () => {
    const a = model({ name: 'alpha' });
    const b = model({ name: 'beta' });
    const cold = model({ name: 'gamma' });
    const h = await harness([a, b, cold], { bodyLimitBytes: 64 * 1024 });
    const engine = await sim(a);
    h.directory.set('alpha', [replica('r1', engine.url)]);
    const betaEngine = await sim(b);
    h.directory.set('beta', [replica('r2', betaEngine.url)]);
    const msg = [{ role: 'user' as const, content: 'hi' }];

    const bad = await caught(h.clientWith('llmgw-nope').chat.completions.create({ model: 'alpha', messages: msg }));
    expect(bad).toBeInstanceOf(OpenAI.AuthenticationError);
    expect([bad.code, (bad.error as { llmgw_code?: string }).llmgw_code], "OpenAI's code, llmgw's beside it").toEqual([
      'invalid_api_key',
      'LLMGW_UNAUTHORIZED',
    ]);

    const { secret: onlyBeta } = await issueKey(
      h.keys,
      { name: 'beta-only', allowedModels: ['beta'] },
      Date.now(),
      'test',
    );
    const denied = await caught(h.clientWith(onlyBeta).chat.completions.create({ model: 'alpha', messages: msg }));
    expect(denied).toBeInstanceOf(OpenAI.PermissionDeniedError);
    const ok = await h.clientWith(onlyBeta).chat.completions.create({ model: 'beta', messages: msg });
    expect(ok.choices).toHaveLength(1);
    const visible = await h.clientWith(onlyBeta).models.list();
    expect(
      visible.data.map((m) => m.id),
      'a limited key sees only its models',
    ).toEqual(['beta']);

    const unknown = await caught(h.client.chat.completions.create({ model: 'alpah', messages: msg }));
    expect(unknown).toBeInstanceOf(OpenAI.NotFoundError);
    expect(unknown.message).toContain('Did you mean `alpha`?');
    expect(unknown.code).toBe('model_not_found');

    const big = await caught(
      h.client.chat.completions.create({
        model: 'alpha',
        messages: [{ role: 'user', content: 'x'.repeat(100 * 1024) }],
      }),
    );
    expect(big.status).toBe(413);

    const noReplica = await caught(h.client.chat.completions.create({ model: 'gamma', messages: msg }));
    expect(noReplica.status).toBe(503);
    expect(noReplica.message).toContain('model `gamma` has 0 ready replicas: none is wanted');
    await eventually(
      () => h.usage.snapshot().some((u) => u.model === 'gamma' && u.errors === 1),
      'the refusal to be counted as an error of its key and model',
    );

    const redirect = await caught(
      h.client.chat.completions.create({
        model: 'alpha',
        messages: msg,
        api_base: 'http://evil.example',
      } as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming),
    );
    expect(redirect).toBeInstanceOf(OpenAI.BadRequestError);
    expect(redirect.message).toContain('api_base');
    const urlField = await caught(
      h.client.chat.completions.create({ model: 'alpha', messages: msg, user: 'https://evil.example/v1' }),
    );
    expect(urlField).toBeInstanceOf(OpenAI.BadRequestError);
    const badN = await caught(h.client.chat.completions.create({ model: 'alpha', messages: msg, n: 99 }));
    expect(badN).toBeInstanceOf(OpenAI.BadRequestError);
    expect(badN.message).toContain('n: 99 is more than this server allows (16)');
    const badShape = await caught(
      h.client.chat.completions.create({
        model: 'alpha',
        messages: 'hi',
      } as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming),
    );
    expect(badShape.message, 'zod names the field').toContain('messages');
    expect(engine.stats().requestsSeen, 'no refused request reached an engine').toBe(0);
    expect(betaEngine.stats().requestsSeen).toBe(1);
  });

  it('refuses a body over the limit when it is sent chunked, without a length', async () => {
    const a = model({ name: 'alpha' });
    const h = await harness([a], { bodyLimitBytes: 4096 });
    const chunks = Readable.from(
      (async function* () {
        yield Buffer.from('{"model":"alpha","messages":[{"role":"user","content":"');
        for (let i = 0; i < 10; i++) yield Buffer.from('y'.repeat(1024));
        yield Buffer.from('"}]}');
      })(),
    );
    const res = await undiciRequest(`${h.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${h.secret}` },
      body: chunks,
    });
    expect(res.statusCode).toBe(413);
    const body = (await res.body.json()) as { error: { code: string; type: string } };
    expect(body.error.code).toBe('LLMGW_BODY_TOO_LARGE');
  });

  it('refuses revoked and expired keys, and rate-limits with Retry-After', async () => {
    const a = model({ name: 'alpha' });
    const h = await harness([a]);
    const engine = await sim(a);
    h.directory.set('alpha', [replica('r1', engine.url)]);
    const msg = [{ role: 'user' as const, content: 'hi' }];

    const revoked = await issueKey(h.keys, { name: 'gone' }, Date.now(), 'test');
    await h.clientWith(revoked.secret).chat.completions.create({ model: 'alpha', messages: msg });
    h.keys.revoke(revoked.record.id, Date.now());
    const r = await caught(h.clientWith(revoked.secret).chat.completions.create({ model: 'alpha', messages: msg }));
    expect(r).toBeInstanceOf(OpenAI.AuthenticationError);
    expect(r.message).toContain('revoked');

    const expired = await issueKey(h.keys, { name: 'old', expiresAtMs: Date.now() - 1 }, Date.now() - 60_000, 'test');
    const e = await caught(h.clientWith(expired.secret).chat.completions.create({ model: 'alpha', messages: msg }));
    expect(e).toBeInstanceOf(OpenAI.AuthenticationError);
    expect(e.message).toContain('expired');

    const limited = await issueKey(h.keys, { name: 'slow', requestsPerMinute: 2 }, Date.now(), 'test');
    const c = h.clientWith(limited.secret);
    const first = await c.chat.completions.create({ model: 'alpha', messages: msg }).withResponse();
    expect(
      ['x-ratelimit-limit-requests', 'x-ratelimit-remaining-requests'].map((n) => first.response.headers.get(n)),
      "OpenAI's rate-limit headers",
    ).toEqual(['2', '1']);
    expect(first.response.headers.get('x-ratelimit-limit-tokens'), 'no token limit, no token headers').toBeNull();
    await c.chat.completions.create({ model: 'alpha', messages: msg });
    const limit = await caught(c.chat.completions.create({ model: 'alpha', messages: msg }));
    expect(limit).toBeInstanceOf(OpenAI.RateLimitError);
    expect(limit.code).toBe('rate_limit_exceeded');
    expect(limit.headers?.get('x-ratelimit-remaining-requests')).toBe('0');
    expect(Number(limit.headers?.get('retry-after')), 'Retry-After in whole seconds').toBeGreaterThanOrEqual(1);
  });
});

describe('retries, fallbacks and failures', () => {
  it('retries on another replica when the first refuses the connection', async () => {
    const a = model({ name: 'alpha' });
    const h = await harness([a]);
    const engine = await sim(a);
    // random() = 0 makes power of two choices pick the first listed on a tie: the dead one.
    h.directory.set('alpha', [replica('dead', await closedEndpoint()), replica('live', engine.url)]);
    const chat = await h.client.chat.completions.create({
      model: 'alpha',
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(chat.choices).toHaveLength(1);
    expect(engine.stats().requestsSeen).toBe(1);
    expect(await h.registry.getSingleMetricAsString('llmgw_router_retries_total')).toContain(
      'llmgw_router_retries_total{model="alpha"} 1',
    );
  });

  it("records each request in the request log: the refused attempt and why, the fallback that answered, a broken stream's cause", async () => {
    const a = model({ name: 'alpha', fallbacks: ['beta'] });
    const b = model({ name: 'beta' });
    const log = new RequestLog(10);
    const h = await harness([a, b], { requestLog: log });
    const betaSim = await sim(b);
    h.directory.set('alpha', [{ ...replica('a-dead', await closedEndpoint()), nodes: ['n1'] }]);
    h.directory.set('beta', [{ ...replica('b1', betaSim.url), nodes: ['n2'] }]);
    const { response } = await h.client.chat.completions
      .create({ model: 'alpha', messages: [{ role: 'user', content: 'hi' }] })
      .withResponse();
    const id = response.headers.get('x-request-id')!;
    await eventually(() => log.get(id)?.promptTokens !== undefined, 'the tokens are recorded after the answer');
    const view = requestRecordView(log.get(id)!);
    expect(view).toMatchObject({
      model: 'alpha',
      status: 200,
      outcome: 'ok',
      replica: 'b1',
      nodes: ['n2'],
      fallback: 'beta',
    });
    expect(view.attempts.map((t) => [t.replica, t.outcome])).toEqual([
      ['a-dead', 'failed'],
      ['b1', 'answered'],
    ]);
    expect(view.attempts[0]!.reason, 'the refused connection, in words').toMatch(/refused/i);

    const breaking = await brokenStreamServer();
    h.directory.set('beta', [replica('breaks', breaking.url)]);
    const stream = await h.client.chat.completions.create({
      model: 'beta',
      messages: [{ role: 'user', content: 'hi' }],
      stream: true,
    });
    await expect(async () => {
      for await (const chunk of stream) void chunk;
    }).rejects.toThrow();
    await eventually(() => log.list({ model: 'beta' }).length === 1, 'the broken stream is recorded');
    expect(requestRecordView(log.list({ model: 'beta' })[0]!)).toMatchObject({ outcome: 'broken', replica: 'breaks' });
  });

  it('never retries after the first byte: a stream that breaks ends with one error and no repeated tokens', async () => {
    const a = model({ name: 'alpha' });
    const h = await harness([a]);
    const healthy = await sim(a);
    const breaking = await brokenStreamServer();
    h.directory.set('alpha', [replica('breaks', breaking.url), replica('healthy', healthy.url)]);
    const stream = await h.client.chat.completions.create({
      model: 'alpha',
      messages: [{ role: 'user', content: 'hi' }],
      stream: true,
    });
    const tokens: string[] = [];
    let error: unknown = null;
    try {
      for await (const chunk of stream) tokens.push(chunk.choices[0]?.delta.content ?? '');
    } catch (err) {
      error = err;
    }
    expect(error, 'the client sees an error').toBeInstanceOf(OpenAI.APIError);
    expect(tokens, 'the two tokens sent, once each').toEqual(['one', 'two']);
    expect(healthy.stats().requestsSeen, 'nothing was sent to another replica').toBe(0);
  });

  it('tries the fallbacks in order, skipping one with nothing ready', async () => {
    const a = model({ name: 'alpha', fallbacks: ['beta', 'gamma', 'delta'] });
    const b = model({ name: 'beta' });
    const g = model({ name: 'gamma' });
    const d = model({ name: 'delta' });
    const h = await harness([a, b, g, d]);
    const gammaSim = await sim(g);
    const deltaSim = await sim(d);
    h.directory.set('alpha', [replica('a-dead', await closedEndpoint())]);
    h.directory.set('gamma', [replica('g1', gammaSim.url)]);
    h.directory.set('delta', [replica('d1', deltaSim.url)]);
    const chat = await h.client.chat.completions.create({
      model: 'alpha',
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(chat.model, 'gamma is the first fallback with a ready replica; the body was rewritten to its name').toBe(
      'gamma',
    );
    expect(deltaSim.stats().requestsSeen).toBe(0);
    expect(await h.registry.getSingleMetricAsString('llmgw_router_fallbacks_total')).toContain('fallback="gamma"');
  });

  it('aborts the upstream request as soon as the client goes away', async () => {
    const a = model({ name: 'alpha' });
    const h = await harness([a]);
    const engine = await sim(a, { tokensPerSecond: 50 });
    h.directory.set('alpha', [replica('r1', engine.url)]);
    const controller = new AbortController();
    const stream = await h.client.chat.completions.create(
      { model: 'alpha', messages: [{ role: 'user', content: 'hi' }], stream: true, max_tokens: 10_000 },
      { signal: controller.signal },
    );
    let seen = 0;
    try {
      for await (const _ of stream) {
        if (++seen === 8) controller.abort();
      }
    } catch {
      // The client's own abort.
    }
    await eventually(() => engine.stats().requestsAborted === 1, 'the sim to see the abort');
    await eventually(() => h.router.replicaUse().get('r1')?.inFlight === 0, 'the replica to carry nothing');
    // Its usage never came: counted at no less than what was relayed, so leaving a stream early does not make it free.
    await eventually(() => h.usage.snapshot().length === 1, 'the usage record');
    const [left] = h.usage.snapshot();
    expect(
      left!.completionTokens,
      'at least the tokens relayed, less the role, finish and [DONE] events',
    ).toBeGreaterThanOrEqual(5);
    expect(left!.promptTokens).toBeGreaterThanOrEqual(0);
  });

  it('holds a request for a cold model until a replica is ready', async () => {
    const a = model({ name: 'alpha', scaling: { min: 0, max: 1 } });
    const h = await harness([a], { timeouts: { coldStartTimeoutMs: 10_000 } });
    h.directory.starting.add('alpha');
    const pending = h.client.chat.completions.create({ model: 'alpha', messages: [{ role: 'user', content: 'hi' }] });
    await eventually(() => h.directory.demands.includes('alpha'), 'the router to report demand');
    await eventually(() => h.router.queued().get('alpha') === 1, 'the held request to count as queued for the scaler');
    const engine = await sim(a);
    h.directory.set('alpha', [replica('r1', engine.url)]);
    const chat = await pending;
    expect(chat.choices).toHaveLength(1);
    expect(h.router.queued().size, 'nothing queued once it was served').toBe(0);
  });

  it('answers 503 naming the cause when a cold model does not start in time', async () => {
    const a = model({ name: 'alpha', scaling: { min: 0, max: 1 } });
    const h = await harness([a], { timeouts: { coldStartTimeoutMs: 200 } });
    h.directory.starting.add('alpha');
    const err = await caught(
      h.client.chat.completions.create({ model: 'alpha', messages: [{ role: 'user', content: 'hi' }] }),
    );
    expect(err.status).toBe(503);
    expect(err.message).toContain('has 0 ready replicas after waiting 0 s for one to start: 1 fetching weights, 43%');
  });

  it('serves the first fallback at once while cold when the model says fallback_while_cold', async () => {
    const a = model({ name: 'alpha', fallbacks: ['beta'], fallback_while_cold: true, scaling: { min: 0, max: 1 } });
    const b = model({ name: 'beta' });
    const h = await harness([a, b], { timeouts: { coldStartTimeoutMs: 60_000 } });
    h.directory.starting.add('alpha');
    const betaSim = await sim(b);
    h.directory.set('beta', [replica('b1', betaSim.url)]);
    const chat = await h.client.chat.completions.create({
      model: 'alpha',
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(chat.model).toBe('beta');
    expect(h.directory.demands, 'the cold model is still asked for').toContain('alpha');
  });

  it('retries a 502 or 503 from an engine, passes other errors through, and skips draining replicas', async () => {
    const a = model({ name: 'alpha' });
    const h = await harness([a]);
    const healthy = await sim(a);
    const unavailable = await statusServer(503);
    const limited = await statusServer(429);
    h.directory.set('alpha', [replica('busy', unavailable.url), replica('ok', healthy.url)]);
    const msg = [{ role: 'user' as const, content: 'hi' }];
    await h.client.chat.completions.create({ model: 'alpha', messages: msg });
    expect(unavailable.seen(), 'the 503 replica was tried first').toBe(1);
    expect(healthy.stats().requestsSeen, 'then the request moved on').toBe(1);

    h.directory.set('alpha', [replica('limited', limited.url), replica('ok', healthy.url)]);
    const err = await caught(h.client.chat.completions.create({ model: 'alpha', messages: msg }));
    expect(err, "an engine's 429 is the client's answer, not a reason to retry").toBeInstanceOf(OpenAI.RateLimitError);
    expect(healthy.stats().requestsSeen).toBe(1);

    h.directory.set('alpha', [{ ...replica('leaving', limited.url), draining: true }, replica('ok', healthy.url)]);
    await h.client.chat.completions.create({ model: 'alpha', messages: msg });
    expect(limited.seen(), 'a draining replica takes nothing new').toBe(1);
  });

  it('stops a request that outlives the total timeout with 504', async () => {
    const a = model({ name: 'alpha' });
    const h = await harness([a], { timeouts: { totalTimeoutMs: 300 } });
    const hung = await sim(a, { hang: true });
    h.directory.set('alpha', [replica('hung', hung.url)]);
    const err = await caught(
      h.client.chat.completions.create({ model: 'alpha', messages: [{ role: 'user', content: 'hi' }] }),
    );
    expect(err.status).toBe(504);
    await eventually(() => hung.stats().hanging === 0, 'the upstream request to be cut');
  });

  it('drops a half-sent event when a stream breaks, so the error event that ends it parses', async () => {
    const a = model({ name: 'alpha' });
    const h = await harness([a]);
    const breaking = await brokenStreamServer({ halfEvent: true });
    h.directory.set('alpha', [replica('breaks', breaking.url)]);
    const stream = await h.client.chat.completions.create({
      model: 'alpha',
      messages: [{ role: 'user', content: 'hi' }],
      stream: true,
    });
    const tokens: string[] = [];
    let error: unknown = null;
    try {
      for await (const chunk of stream) tokens.push(chunk.choices[0]?.delta.content ?? '');
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(OpenAI.APIError);
    expect((error as Error).message).toContain('the engine stopped answering mid-response');
    expect(tokens).toEqual(['one', 'two']);
  });
});

describe('choice and connections', () => {
  it('keeps one prompt prefix on one replica under routing: prefix, and spreads different prefixes', async () => {
    const a = model({ name: 'alpha', routing: 'prefix' });
    const h = await harness([a]);
    const sims = [await sim(a), await sim(a), await sim(a)];
    h.directory.set(
      'alpha',
      sims.map((e, i) => replica(`r${i}`, e.url)),
    );
    const system = 'You are a careful assistant. '.repeat(20);
    for (let i = 0; i < 6; i++) {
      await h.client.chat.completions.create({
        model: 'alpha',
        messages: [
          { role: 'system', content: system },
          { role: 'user', content: `question ${i}` },
        ],
      });
    }
    expect(sims.map((e) => e.stats().requestsSeen).sort(), 'one replica took every request sharing the prefix').toEqual(
      [0, 0, 6],
    );
    for (let i = 0; i < 30; i++) {
      await h.client.chat.completions.create({
        model: 'alpha',
        messages: [{ role: 'user', content: `a different conversation ${i}` }],
      });
    }
    expect(sims.filter((e) => e.stats().requestsSeen > 0).length, 'different prefixes land on different replicas').toBe(
      3,
    );
  });

  it('sends to the replica whose engine reports the shorter queue, and counts its own sends since the sample', async () => {
    const a = model({ name: 'alpha' });
    const h = await harness([a]);
    const busy = await sim(a, { ttftMs: 1500 });
    const idle = await sim(a, { ttftMs: 1500 });
    const now = Date.now();
    // The busy engine's queue came from elsewhere (another control plane, a long prompt): this router has nothing in flight there.
    h.directory.set('alpha', [
      { ...replica('busy', busy.url), load: { running: 4, waiting: 3, kvUsage: 0.5, sampledAtMs: now } },
      { ...replica('idle', idle.url), load: { running: 0, waiting: 0, kvUsage: 0, sampledAtMs: now } },
    ]);
    await Promise.all(
      Array.from({ length: 16 }, (_, i) =>
        h.client.chat.completions.create({ model: 'alpha', messages: [{ role: 'user', content: `q${i}` }] }),
      ),
    );
    // busy scores 4 + 2×3 = 10; idle 0 plus what was sent to it since its sample, so it takes 10 before they tie and share.
    expect(
      idle.stats().requestsSeen,
      'the idle engine took the burst until its own sends made it as busy',
    ).toBeGreaterThanOrEqual(10);
    expect(
      busy.stats().requestsSeen,
      'then the sends since the sample counted, and the busy one took some too',
    ).toBeGreaterThanOrEqual(1);
  });

  it('ignores a stale sample, and every sample under routing: least-inflight', async () => {
    const stale = model({ name: 'alpha' });
    const inflight = model({ name: 'beta', routing: 'least-inflight' });
    const h = await harness([stale, inflight], { loadStaleMs: 4000 });
    const [a0, a1, b0, b1] = [await sim(stale), await sim(stale), await sim(inflight), await sim(inflight)];
    const queued = { running: 8, waiting: 8, sampledAtMs: Date.now() };
    // With random() = 0 a tie goes to the first candidate: were its old queue read, a1 would win instead.
    h.directory.set('alpha', [
      { ...replica('a0', a0.url), load: { ...queued, sampledAtMs: Date.now() - 60_000 } },
      replica('a1', a1.url),
    ]);
    // Least-inflight's two draws with random() = 0 are b0, then b1; it keeps b0 on equal in-flight counts.
    h.directory.set('beta', [{ ...replica('b0', b0.url), load: queued }, replica('b1', b1.url)]);
    for (let i = 0; i < 3; i++) {
      await h.client.chat.completions.create({ model: 'alpha', messages: [{ role: 'user', content: 'hi' }] });
      await h.client.chat.completions.create({ model: 'beta', messages: [{ role: 'user', content: 'hi' }] });
    }
    expect([a0.stats().requestsSeen, a1.stats().requestsSeen], 'a minute-old sample is not read').toEqual([3, 0]);
    expect([b0.stats().requestsSeen, b1.stats().requestsSeen], 'least-inflight reads no sample').toEqual([3, 0]);
  });

  it('holds for the cold model itself when fallback_while_cold finds no fallback ready', async () => {
    const a = model({ name: 'alpha', fallbacks: ['beta'], fallback_while_cold: true, scaling: { min: 0, max: 1 } });
    const b = model({ name: 'beta', scaling: { min: 0, max: 1 } });
    const h = await harness([a, b], { timeouts: { coldStartTimeoutMs: 10_000 } });
    h.directory.starting.add('alpha');
    const pending = h.client.chat.completions.create({ model: 'alpha', messages: [{ role: 'user', content: 'hi' }] });
    await eventually(() => h.directory.demands.includes('alpha'), 'the router to report demand');
    const engine = await sim(a);
    h.directory.set('alpha', [replica('r1', engine.url)]);
    expect((await pending).model).toBe('alpha');
  });

  it('answers a wrong verb with 405 in OpenAI shape, and cuts a client that stalls mid-body', async () => {
    const a = model({ name: 'alpha' });
    const h = await harness([a], { timeouts: { idleBodyTimeoutMs: 200 } });
    const res = await undiciRequest(`${h.url}/v1/chat/completions`, { method: 'GET' });
    expect(res.statusCode).toBe(405);
    expect(((await res.body.json()) as { error: { type: string } }).error.type).toBe('invalid_request_error');

    const port = Number(new URL(h.url).port);
    const socket = connect(port, '127.0.0.1');
    let closed = false;
    let answer = '';
    socket.on('data', (d: Buffer) => (answer += d.toString()));
    socket.on('close', () => (closed = true));
    socket.on('error', () => undefined);
    socket.write(
      `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\nauthorization: Bearer ${h.secret}\r\ncontent-length: 100\r\n\r\n{"model":`,
    );
    await eventually(() => closed, 'the router to close a connection whose body went silent', 5_000).catch(
      (e: Error) => {
        throw new Error(`${e.message}; answer so far: ${JSON.stringify(answer)}`);
      },
    );
  });
});

describe('a request without a valid key', () => {
  // The key was checked once the whole body was in: a connection trickling a large body without any key stayed
  // busy, out of reach of the listener's connection cap, and a few thousand such connections shut clients out.
  it('is refused with 401 as soon as its headers are in, before any of its body arrives', async () => {
    const h = await harness([model({ name: 'alpha' })], { timeouts: { idleBodyTimeoutMs: 60_000 } });
    const port = Number(new URL(h.url).port);
    for (const auth of ['', 'authorization: Bearer not-a-key\r\n']) {
      const socket = connect(port, '127.0.0.1');
      let answer = '';
      socket.on('data', (d: Buffer) => (answer += d.toString()));
      socket.on('error', () => undefined);
      socket.write(
        `POST /v1/audio/transcriptions HTTP/1.1\r\nhost: x\r\ncontent-type: multipart/form-data; boundary=b\r\n${auth}content-length: 8000000\r\n\r\n`,
      );
      await eventually(
        () => answer.startsWith('HTTP/1.1 401'),
        `a 401 with the body still unsent (${auth ? 'a wrong key' : 'no key'}); so far: ${JSON.stringify(answer.slice(0, 80))}`,
        5_000,
      );
      socket.destroy();
    }
  });
});

/** An engine that answers every request with `status` and an OpenAI error body; counts what it saw. */
async function statusServer(status: number): Promise<{ url: string; seen(): number }> {
  let seen = 0;
  const server: Server = createServer((req, res) => {
    seen++;
    req.resume();
    req.on('end', () => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({ error: { message: `status ${status} on purpose`, type: 'x', param: null, code: status } }),
      );
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
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen: () => seen };
}

/** An engine that sends two SSE tokens (and optionally half of a third) and then resets the connection. */
async function brokenStreamServer(options: { halfEvent?: boolean } = {}): Promise<{ url: string }> {
  const chunk = (content: string) =>
    `data: ${JSON.stringify({ id: 'x', object: 'chat.completion.chunk', created: 0, model: 'alpha', choices: [{ index: 0, delta: { content }, finish_reason: null }] })}\n\n`;
  const server: Server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(chunk('one'));
      res.write(chunk('two') + (options.halfEvent ? chunk('three').slice(0, 40) : ''), () => res.socket?.destroy());
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
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}
