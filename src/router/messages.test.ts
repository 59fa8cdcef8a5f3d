// POST /v1/messages in process: the official `@anthropic-ai/sdk` against a
// Fastify app with the router registered (stub catalog and directory, real
// sim engines as replicas), so the translation is proven where a client
// reads it: the SDK's own parsing of answers, streams and errors.
import type { AddressInfo } from 'node:net';
import { createServer } from 'node:http';
import Anthropic, { AuthenticationError, BadRequestError, NotFoundError, PermissionDeniedError } from '@anthropic-ai/sdk';
import pino from 'pino';
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import { compileModel, ModelSchema, type Model } from '../control/catalog/index.js';
import { createJsonApp } from '../http/index.js';
import { startSimEngine } from '../engine/sim/index.js';
import { issueKey, MemoryKeyStore, MemoryUsageSink } from '../control/keys/index.js';
import { openAiErrorShape, registerRouter, type RouterReplica } from './index.js';
import { waitFor } from '../../test/support/wait.js';

const cleanups: (() => Promise<unknown> | unknown)[] = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});

function model(name: string, aliases: string[] = []): Model {
  return compileModel(ModelSchema.parse({ name, aliases, source: `file:///models/${name}`, profiles: [{ engine: 'sim' }] }), 'file');
}

/** An endpoint nothing listens on: a port that was just bound and released. */
async function closedEndpoint(): Promise<string> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `http://127.0.0.1:${port}`;
}

async function harness(replicasOf: (m: Model) => Promise<RouterReplica[]>) {
  const logger = pino({ level: 'silent' });
  const app = createJsonApp({ logger, bodyLimitBytes: 8 << 20, shapeError: openAiErrorShape, requestLoggers: false, requestIds: true });
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
  const { secret: demoOnly } = await issueKey(keys, { name: 'other-only', allowedModels: ['other'] }, Date.now(), 'test');
  const client = new Anthropic({ apiKey: secret, baseURL: url, maxRetries: 0, timeout: 20_000 });
  return { url, usage, secret, demoOnly, client };
}

async function simReplicas(m: Model): Promise<RouterReplica[]> {
  const engine = await startSimEngine({ models: [m.name, ...m.aliases], shutdownGraceMs: 0 });
  cleanups.push(() => engine.close({ graceMs: 0 }));
  return [{ id: 'r1', endpoint: engine.url, draining: false }];
}

const weather = { name: 'get_weather', description: 'the weather in a city', input_schema: { type: 'object' as const, properties: { city: { type: 'string' } } } };

describe('POST /v1/messages', () => {
  it('answers a message with a system prompt: text, usage, the name asked for, and max_tokens as the stop reason', async () => {
    const h = await harness(simReplicas);
    const msg = await h.client.messages.create({ model: 'demo-alias', max_tokens: 8, system: 'Be brief.', messages: [{ role: 'user', content: 'Tell me about rivers.' }] });
    expect(msg.type).toBe('message');
    expect(msg.role).toBe('assistant');
    expect(msg.id).toMatch(/^msg_/);
    expect(msg.model).toBe('demo-alias');
    expect(msg.stop_reason).toBe('max_tokens');
    expect(msg.content).toHaveLength(1);
    expect(msg.content[0]!.type).toBe('text');
    expect((msg.content[0] as { text: string }).text.length).toBeGreaterThan(0);
    expect(msg.usage.output_tokens).toBe(8);
    expect(msg.usage.input_tokens).toBeGreaterThan(0);
    // The usage record has the engine's counts, under the model's canonical name.
    await waitFor('the usage record', () => h.usage.snapshot().find((u) => u.model === 'demo' && u.completionTokens === 8));
  });

  it('streams the same text as it answers whole, with the usage in the final message', async () => {
    const h = await harness(simReplicas);
    const params = { model: 'demo', max_tokens: 12, messages: [{ role: 'user' as const, content: 'Tell me about rivers.' }] };
    const whole = await h.client.messages.create(params);
    const stream = h.client.messages.stream(params);
    const types: string[] = [];
    let text = '';
    stream.on('streamEvent', (e) => types.push(e.type));
    stream.on('text', (delta) => (text += delta));
    const final = await stream.finalMessage();
    expect(text).toBe((whole.content[0] as { text: string }).text);
    expect(final.usage).toEqual(expect.objectContaining({ input_tokens: whole.usage.input_tokens, output_tokens: 12 }));
    expect(final.stop_reason).toBe('max_tokens');
    expect(types[0]).toBe('message_start');
    expect(types.slice(-2)).toEqual(['message_delta', 'message_stop']);
    // The usage chunk the router asked for is not passed on as anything else.
    expect(new Set(types)).toEqual(new Set(['message_start', 'content_block_start', 'content_block_delta', 'content_block_stop', 'message_delta', 'message_stop']));
    await waitFor('the stream counted', () => h.usage.snapshot().find((u) => u.model === 'demo' && u.completionTokens === 24));
  });

  it('round-trips a tool: a forced tool_use (whole and streamed), then a tool_result answered in text', async () => {
    const h = await harness(simReplicas);
    const ask = { role: 'user' as const, content: 'Weather in Oslo?' };
    const first = await h.client.messages.create({ model: 'demo', max_tokens: 16, tools: [weather], tool_choice: { type: 'tool', name: 'get_weather' }, messages: [ask] });
    expect(first.stop_reason).toBe('tool_use');
    const use = first.content.find((b) => b.type === 'tool_use')!;
    expect(use).toMatchObject({ type: 'tool_use', name: 'get_weather', input: { seed: expect.any(Number) } });
    const streamed = await h.client.messages.stream({ model: 'demo', max_tokens: 16, tools: [weather], tool_choice: { type: 'any' }, messages: [ask] }).finalMessage();
    expect(streamed.stop_reason).toBe('tool_use');
    expect(streamed.content).toEqual([expect.objectContaining({ type: 'tool_use', name: 'get_weather', input: (use as { input: unknown }).input })]);
    const answer = await h.client.messages.create({
      model: 'demo',
      max_tokens: 6,
      tools: [weather],
      messages: [
        ask,
        { role: 'assistant', content: first.content },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: (use as { id: string }).id, content: 'sunny' }] },
      ],
    });
    expect(answer.stop_reason).toBe('max_tokens');
    expect(answer.content[0]!.type).toBe('text');
  });

  it('takes the key as x-api-key or as a bearer token, and refuses none in Anthropic’s shape', async () => {
    const h = await harness(simReplicas);
    const body = JSON.stringify({ model: 'demo', max_tokens: 2, messages: [{ role: 'user', content: 'hi' }] });
    const post = (headers: Record<string, string>) =>
      fetch(`${h.url}/v1/messages`, { method: 'POST', headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01', ...headers }, body });
    expect((await post({ 'x-api-key': h.secret })).status).toBe(200);
    const bearer = new Anthropic({ authToken: h.secret, apiKey: null, baseURL: h.url, maxRetries: 0 });
    expect((await bearer.messages.create({ model: 'demo', max_tokens: 2, messages: [{ role: 'user', content: 'hi' }] })).type).toBe('message');
    const none = await post({});
    expect(none.status).toBe(401);
    expect(await none.json()).toEqual({ type: 'error', error: { type: 'authentication_error', message: expect.stringMatching(/no API key/) } });
    // x-api-key is this endpoint's alone: the OpenAI routes still ask for a bearer token.
    const chat = await fetch(`${h.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': h.secret }, body });
    expect(chat.status).toBe(401);
    expect(((await chat.json()) as { error: { code: string } }).error.code).toBe('invalid_api_key');
  });

  it('refuses bad input in Anthropic’s shape and status, as the SDK’s own error classes', async () => {
    const h = await harness(simReplicas);
    const refused = async (p: Promise<unknown>) => {
      const err = await p.then(() => null, (e: unknown) => e);
      expect(err, 'the call was refused').not.toBeNull();
      return err as { status: number; error: { type: string; error: { type: string; message: string } } };
    };
    const noMax = await refused(h.client.messages.create({ model: 'demo', messages: [{ role: 'user', content: 'x' }] } as unknown as Anthropic.MessageCreateParamsNonStreaming));
    expect(noMax).toBeInstanceOf(BadRequestError);
    expect(noMax.error).toEqual({ type: 'error', error: { type: 'invalid_request_error', message: expect.stringMatching(/max_tokens: is required/) } });
    const unknown = await refused(h.client.messages.create({ model: 'demoo', max_tokens: 2, messages: [{ role: 'user', content: 'x' }] }));
    expect(unknown).toBeInstanceOf(NotFoundError);
    expect(unknown.error.error).toEqual({ type: 'not_found_error', message: expect.stringMatching(/`demoo` does not exist. Did you mean `demo`/) });
    const badKey = await refused(new Anthropic({ apiKey: 'sk-nope', baseURL: h.url, maxRetries: 0 }).messages.create({ model: 'demo', max_tokens: 2, messages: [{ role: 'user', content: 'x' }] }));
    expect(badKey).toBeInstanceOf(AuthenticationError);
    const forbidden = await refused(new Anthropic({ apiKey: h.demoOnly, baseURL: h.url, maxRetries: 0 }).messages.create({ model: 'demo', max_tokens: 2, messages: [{ role: 'user', content: 'x' }] }));
    expect(forbidden).toBeInstanceOf(PermissionDeniedError);
    expect(forbidden.error.error.type).toBe('permission_error');
    // The engine's own refusal (a forced tool that is not listed) reaches the client in Anthropic's shape too.
    const engine = await refused(h.client.messages.create({ model: 'demo', max_tokens: 2, tools: [weather], tool_choice: { type: 'tool', name: 'nope' }, messages: [{ role: 'user', content: 'x' }] }));
    expect(engine.status).toBe(400);
    expect(engine.error.error).toEqual({ type: 'invalid_request_error', message: expect.stringMatching(/`nope` is not in tools/) });
    // Bad JSON, from the router's checks.
    const badJson = await fetch(`${h.url}/v1/messages`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': h.secret }, body: '{"model":' });
    expect(badJson.status).toBe(400);
    expect(((await badJson.json()) as { type: string; error: { type: string } }).error.type).toBe('invalid_request_error');
    // count_tokens is refused, saying so.
    const count = await fetch(`${h.url}/v1/messages/count_tokens`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': h.secret }, body: '{}' });
    expect(count.status).toBe(400);
    expect(await count.json()).toEqual({ type: 'error', error: { type: 'invalid_request_error', message: expect.stringMatching(/count_tokens is not supported/) } });
  });

  it('moves to another replica when one refuses the connection, before any byte', async () => {
    const h = await harness(async (m) => [{ id: 'dead', endpoint: await closedEndpoint(), draining: false }, ...(await simReplicas(m)).map((r) => ({ ...r, id: 'live' }))]);
    for (let i = 0; i < 3; i++) {
      const msg = await h.client.messages.create({ model: 'demo', max_tokens: 3, messages: [{ role: 'user', content: `try ${i}` }] });
      expect(msg.usage.output_tokens).toBe(3);
    }
  });

  it('answers 503 with no ready replica as overloaded_error', async () => {
    const h = await harness(async () => []);
    const res = await fetch(`${h.url}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': h.secret },
      body: JSON.stringify({ model: 'demo', max_tokens: 2, messages: [{ role: 'user', content: 'x' }] }),
    });
    expect(res.status).toBe(503);
    expect(await res.json()).toEqual({ type: 'error', error: { type: 'overloaded_error', message: expect.stringMatching(/0 ready replicas/) } });
  });
});
