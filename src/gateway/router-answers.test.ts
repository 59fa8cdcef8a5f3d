// The router end to end on loopback, answering: the official `openai` client
// against the router as the control plane registers it (harness in
// test/support/gateway-router.ts), real sim engines as replicas. What a client
// gets back when all goes well: the answers of each endpoint, usage counted
// and withheld, request ids, the engine's own secret upstream, the client's
// bytes passed on, injected requests and aliases.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import OpenAI from 'openai';
import { request as undiciRequest } from 'undici';
import pino from 'pino';
import { Registry } from 'prom-client';
import { createJsonApp } from '../http/index.js';
import { afterEach, describe, expect, it } from 'vitest';
import { issueKey, MemoryKeyStore, MemoryUsageSink } from '../control/keys/index.js';
import { openAiErrorShape, registerRouter } from './index.js';
import {
  closeAll,
  cleanups,
  model,
  StubDirectory,
  harness,
  sim,
  replica,
  eventually,
  caught,
} from '../../test/support/gateway-router.js';

afterEach(closeAll);

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
});
