// POST /v1/messages in process: the official `@anthropic-ai/sdk` against a
// Fastify app with the router registered (stub catalog and directory, real
// sim engines as replicas), so the translation is proven where a client
// reads it: the SDK's own parsing of answers, streams and errors.
import type { AddressInfo } from 'node:net';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import Anthropic, {
  APIError,
  AuthenticationError,
  BadRequestError,
  InternalServerError,
  NotFoundError,
  PermissionDeniedError,
  RateLimitError,
} from '@anthropic-ai/sdk';
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
  return compileModel(
    ModelSchema.parse({ name, aliases, source: `file:///models/${name}`, profiles: [{ engine: 'sim' }] }),
    'file',
  );
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

async function simReplicas(m: Model): Promise<RouterReplica[]> {
  const engine = await startSimEngine({ models: [m.name, ...m.aliases], shutdownGraceMs: 0 });
  cleanups.push(() => engine.close({ graceMs: 0 }));
  return [{ id: 'r1', endpoint: engine.url, draining: false }];
}

/** An engine stand-in that answers as `answer` says, with the request's parsed body; counts what it saw. */
async function scripted(
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

const chunk = (choice: Record<string, unknown>) =>
  `data: ${JSON.stringify({ id: 'chatcmpl-s', object: 'chat.completion.chunk', created: 0, model: 'demo', choices: [{ index: 0, logprobs: null, finish_reason: null, ...choice }] })}\n\n`;

const weather = {
  name: 'get_weather',
  description: 'the weather in a city',
  input_schema: { type: 'object' as const, properties: { city: { type: 'string' } } },
};

describe('POST /v1/messages', () => {
  it('answers a message with a system prompt: text, usage, the name asked for, and max_tokens as the stop reason', async () => {
    const h = await harness(simReplicas);
    const msg = await h.client.messages.create({
      model: 'demo-alias',
      max_tokens: 8,
      system: 'Be brief.',
      messages: [{ role: 'user', content: 'Tell me about rivers.' }],
    });
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
    await waitFor('the usage record', () =>
      h.usage.snapshot().find((u) => u.model === 'demo' && u.completionTokens === 8),
    );
    // The SDK's request id is llmgw's, the one its logs name.
    const withResponse = await h.client.messages
      .create(
        { model: 'demo', max_tokens: 1, messages: [{ role: 'user', content: 'x' }] },
        { headers: { 'x-request-id': 'my-request-7' } },
      )
      .withResponse();
    expect(withResponse.request_id).toBe('my-request-7');
  });

  it('streams the same text as it answers whole, with the usage in the final message', async () => {
    const h = await harness(simReplicas);
    const params = {
      model: 'demo',
      max_tokens: 12,
      messages: [{ role: 'user' as const, content: 'Tell me about rivers.' }],
    };
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
    expect(new Set(types)).toEqual(
      new Set([
        'message_start',
        'content_block_start',
        'content_block_delta',
        'content_block_stop',
        'message_delta',
        'message_stop',
      ]),
    );
    await waitFor('the stream counted', () =>
      h.usage.snapshot().find((u) => u.model === 'demo' && u.completionTokens === 24),
    );
  });

  it('round-trips a tool: a forced tool_use (whole and streamed), then a tool_result answered in text', async () => {
    const h = await harness(simReplicas);
    const ask = { role: 'user' as const, content: 'Weather in Oslo?' };
    const first = await h.client.messages.create({
      model: 'demo',
      max_tokens: 16,
      tools: [weather],
      tool_choice: { type: 'tool', name: 'get_weather' },
      messages: [ask],
    });
    expect(first.stop_reason).toBe('tool_use');
    const use = first.content.find((b) => b.type === 'tool_use')!;
    expect(use).toMatchObject({ type: 'tool_use', name: 'get_weather', input: { seed: expect.any(Number) } });
    const streamed = await h.client.messages
      .stream({ model: 'demo', max_tokens: 16, tools: [weather], tool_choice: { type: 'any' }, messages: [ask] })
      .finalMessage();
    expect(streamed.stop_reason).toBe('tool_use');
    expect(streamed.content).toEqual([
      expect.objectContaining({ type: 'tool_use', name: 'get_weather', input: (use as { input: unknown }).input }),
    ]);
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
      fetch(`${h.url}/v1/messages`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01', ...headers },
        body,
      });
    expect((await post({ 'x-api-key': h.secret })).status).toBe(200);
    const bearer = new Anthropic({ authToken: h.secret, apiKey: null, baseURL: h.url, maxRetries: 0 });
    expect(
      (await bearer.messages.create({ model: 'demo', max_tokens: 2, messages: [{ role: 'user', content: 'hi' }] }))
        .type,
    ).toBe('message');
    const none = await post({});
    expect(none.status).toBe(401);
    expect(await none.json()).toEqual({
      type: 'error',
      error: { type: 'authentication_error', message: expect.stringMatching(/no API key/) },
    });
    // x-api-key is this endpoint's alone: the OpenAI routes still ask for a bearer token.
    const chat = await fetch(`${h.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': h.secret },
      body,
    });
    expect(chat.status).toBe(401);
    expect(((await chat.json()) as { error: { code: string } }).error.code).toBe('invalid_api_key');
  });

  it('refuses bad input in Anthropic’s shape and status, as the SDK’s own error classes', async () => {
    const h = await harness(simReplicas);
    const refused = async (p: Promise<unknown>) => {
      const err = await p.then(
        () => null,
        (e: unknown) => e,
      );
      expect(err, 'the call was refused').not.toBeNull();
      return err as { status: number; error: { type: string; error: { type: string; message: string } } };
    };
    const noMax = await refused(
      h.client.messages.create({
        model: 'demo',
        messages: [{ role: 'user', content: 'x' }],
      } as unknown as Anthropic.MessageCreateParamsNonStreaming),
    );
    expect(noMax).toBeInstanceOf(BadRequestError);
    expect(noMax.error).toEqual({
      type: 'error',
      error: { type: 'invalid_request_error', message: expect.stringMatching(/max_tokens: is required/) },
    });
    const unknown = await refused(
      h.client.messages.create({ model: 'demoo', max_tokens: 2, messages: [{ role: 'user', content: 'x' }] }),
    );
    expect(unknown).toBeInstanceOf(NotFoundError);
    expect(unknown.error.error).toEqual({
      type: 'not_found_error',
      message: expect.stringMatching(/`demoo` does not exist. Did you mean `demo`/),
    });
    const badKey = await refused(
      new Anthropic({ apiKey: 'sk-nope', baseURL: h.url, maxRetries: 0 }).messages.create({
        model: 'demo',
        max_tokens: 2,
        messages: [{ role: 'user', content: 'x' }],
      }),
    );
    expect(badKey).toBeInstanceOf(AuthenticationError);
    const forbidden = await refused(
      new Anthropic({ apiKey: h.demoOnly, baseURL: h.url, maxRetries: 0 }).messages.create({
        model: 'demo',
        max_tokens: 2,
        messages: [{ role: 'user', content: 'x' }],
      }),
    );
    expect(forbidden).toBeInstanceOf(PermissionDeniedError);
    expect(forbidden.error.error.type).toBe('permission_error');
    const limited = new Anthropic({ apiKey: h.onePerMinute, baseURL: h.url, maxRetries: 0 });
    await limited.messages.create({ model: 'demo', max_tokens: 1, messages: [{ role: 'user', content: 'x' }] });
    const tooMany = await refused(
      limited.messages.create({ model: 'demo', max_tokens: 1, messages: [{ role: 'user', content: 'x' }] }),
    );
    expect(tooMany).toBeInstanceOf(RateLimitError);
    expect(tooMany.error.error).toEqual({
      type: 'rate_limit_error',
      message: expect.stringMatching(/1 requests per minute/),
    });
    expect((tooMany as unknown as { headers: Headers }).headers.get('retry-after')).toMatch(/^\d+$/);
    // The engine's own refusal (a forced tool that is not listed) reaches the client in Anthropic's shape too.
    const engine = await refused(
      h.client.messages.create({
        model: 'demo',
        max_tokens: 2,
        tools: [weather],
        tool_choice: { type: 'tool', name: 'nope' },
        messages: [{ role: 'user', content: 'x' }],
      }),
    );
    expect(engine.status).toBe(400);
    expect(engine.error.error).toEqual({
      type: 'invalid_request_error',
      message: expect.stringMatching(/`nope` is not in tools/),
    });
    // Bad JSON, from the router's checks.
    const badJson = await fetch(`${h.url}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': h.secret },
      body: '{"model":',
    });
    expect(badJson.status).toBe(400);
    expect(((await badJson.json()) as { type: string; error: { type: string } }).error.type).toBe(
      'invalid_request_error',
    );
    // Fastify's own refusals (a body that is not JSON by its type) leave in the same shape.
    const notJson = await fetch(`${h.url}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'text/plain', 'x-api-key': h.secret },
      body: 'hi',
    });
    expect(notJson.status).toBe(415);
    expect(await notJson.json()).toEqual({
      type: 'error',
      error: { type: 'invalid_request_error', message: expect.stringMatching(/Content-Type: application\/json/) },
    });
    // The sim's /tokenize takes chat messages, as vLLM's does: count_tokens agrees with the answer's input_tokens.
    const asked = {
      model: 'demo',
      system: 'Be brief.',
      messages: [{ role: 'user' as const, content: 'Tell me about rivers.' }],
    };
    const count = await h.client.messages.countTokens(asked);
    const answered = await h.client.messages.create({ ...asked, max_tokens: 1 });
    expect(count.input_tokens, 'the same count as the usage of the answer').toBe(answered.usage.input_tokens);
  });

  it('moves to another replica when one refuses the connection, before any byte', async () => {
    const h = await harness(async (m) => [
      { id: 'dead', endpoint: await closedEndpoint(), draining: false },
      ...(await simReplicas(m)).map((r) => ({ ...r, id: 'live' })),
    ]);
    for (let i = 0; i < 3; i++) {
      const msg = await h.client.messages.create({
        model: 'demo',
        max_tokens: 3,
        messages: [{ role: 'user', content: `try ${i}` }],
      });
      expect(msg.usage.output_tokens).toBe(3);
    }
  });

  it('counts tokens with the engine’s tokenizer, from the translated messages', async () => {
    const seen: Array<{ path: string; body: Record<string, unknown> }> = [];
    const tokenizer = await scripted((body, res, path) => {
      seen.push({ path, body });
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ count: 42, max_model_len: 4096, tokens: [] }));
    });
    const h = await harness(async () => [tokenizer.replica]);
    const counted = await h.client.messages.countTokens({
      model: 'demo-alias',
      system: 'Be brief.',
      tools: [weather],
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(counted).toEqual({ input_tokens: 42 });
    expect(seen.map((x) => x.path)).toEqual(['/tokenize']);
    expect(seen[0]!.body).toEqual({
      model: 'demo-alias',
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'hi' },
      ],
      tools: [
        {
          type: 'function',
          function: { name: 'get_weather', description: weather.description, parameters: weather.input_schema },
        },
      ],
      add_generation_prompt: true,
    });
    const withMax = await fetch(`${h.url}/v1/messages/count_tokens`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': h.secret },
      body: JSON.stringify({ model: 'demo', max_tokens: 3, messages: [{ role: 'user', content: 'x' }] }),
    });
    expect(withMax.status).toBe(400);
    expect(((await withMax.json()) as { error: { message: string } }).error.message).toMatch(/counts the prompt only/);
  });

  it('answers 503 with no ready replica as overloaded_error', async () => {
    const h = await harness(async () => []);
    const res = await fetch(`${h.url}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': h.secret },
      body: JSON.stringify({ model: 'demo', max_tokens: 2, messages: [{ role: 'user', content: 'x' }] }),
    });
    expect(res.status).toBe(503);
    expect(await res.json()).toEqual({
      type: 'error',
      error: { type: 'overloaded_error', message: expect.stringMatching(/0 ready replicas/) },
    });
    const count = await fetch(`${h.url}/v1/messages/count_tokens`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': h.secret },
      body: JSON.stringify({ model: 'demo', messages: [{ role: 'user', content: 'x' }] }),
    });
    expect(count.status).toBe(503);
    expect(((await count.json()) as { error: { type: string } }).error.type).toBe('overloaded_error');
  });

  it('says which stop sequence ended the answer where the engine tells (vLLM’s stop_reason), whole and streamed', async () => {
    const engine = await scripted((body, res) => {
      if (body.stream === true) {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write(chunk({ delta: { role: 'assistant', content: '' } }) + chunk({ delta: { content: 'one two' } }));
        res.end(chunk({ delta: {}, finish_reason: 'stop', stop_reason: 'END' }) + 'data: [DONE]\n\n');
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          id: 'chatcmpl-w',
          choices: [
            { index: 0, message: { role: 'assistant', content: 'one two' }, finish_reason: 'stop', stop_reason: 'END' },
          ],
          usage: { prompt_tokens: 4, completion_tokens: 2 },
        }),
      );
    });
    const h = await harness(async () => [engine.replica]);
    const params = {
      model: 'demo',
      max_tokens: 9,
      stop_sequences: ['END'],
      temperature: 0.2,
      metadata: { user_id: 'u1' },
      messages: [{ role: 'user' as const, content: 'count' }],
    };
    const whole = await h.client.messages.create(params);
    expect(whole).toMatchObject({
      id: 'msg_w',
      stop_reason: 'stop_sequence',
      stop_sequence: 'END',
      usage: { input_tokens: 4, output_tokens: 2 },
    });
    const streamed = await h.client.messages.stream(params).finalMessage();
    expect(streamed).toMatchObject({
      id: 'msg_s',
      stop_reason: 'stop_sequence',
      stop_sequence: 'END',
      content: [{ type: 'text', text: 'one two' }],
    });
    // What the engine heard: a chat request, the stops as `stop`, metadata left out, and the stream asked for its usage.
    const [first, second] = engine.seen();
    expect(first).toEqual({
      model: 'demo',
      messages: [{ role: 'user', content: 'count' }],
      max_tokens: 9,
      stream: false,
      temperature: 0.2,
      stop: ['END'],
    });
    expect(second).toMatchObject({ stream: true, stream_options: { include_usage: true } });
  });

  it('moves on from a 503 before the first byte, and never after it: a broken stream ends with an error event', async () => {
    const busy = await scripted((_body, res) => {
      res.writeHead(503, { 'content-type': 'application/json' });
      res.end('{"error":{"message":"busy"}}');
    });
    const breaking = await scripted((_body, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(chunk({ delta: { content: 'one' } }));
      res.write(chunk({ delta: { content: ' two' } }), () => res.socket?.destroy());
    });
    const h = await harness(async (m) => [busy.replica, ...(await simReplicas(m))]);
    const msg = await h.client.messages.create({
      model: 'demo',
      max_tokens: 3,
      messages: [{ role: 'user', content: 'x' }],
    });
    expect(msg.usage.output_tokens).toBe(3);
    expect(busy.seen()).toHaveLength(1);

    const h2 = await harness(async () => [breaking.replica]);
    let text = '';
    const failed = await h2.client.messages
      .stream({ model: 'demo', max_tokens: 30, messages: [{ role: 'user', content: 'x' }] })
      .on('text', (d) => (text += d))
      .finalMessage()
      .then(
        () => null,
        (e: unknown) => e,
      );
    expect(failed, 'the client sees an error').toBeInstanceOf(APIError);
    expect(String((failed as Error).message)).toMatch(/stopped answering mid-response/);
    expect(text, 'what came before the break, once').toBe('one two');
    expect(breaking.seen()).toHaveLength(1);
  });

  it('resends a stream without stream_options to an engine that refuses it, and passes an engine’s 500 on as api_error', async () => {
    const strict = await scripted((body, res) => {
      if ('stream_options' in body) {
        res.writeHead(400, { 'content-type': 'application/json' });
        res.end('{"error":{"message":"unknown field stream_options"}}');
        return;
      }
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end(chunk({ delta: { content: 'ok' } }) + chunk({ delta: {}, finish_reason: 'length' }) + 'data: [DONE]\n\n');
    });
    const h = await harness(async () => [strict.replica]);
    const final = await h.client.messages
      .stream({ model: 'demo', max_tokens: 1, messages: [{ role: 'user', content: 'x' }] })
      .finalMessage();
    expect(final).toMatchObject({ stop_reason: 'max_tokens', content: [{ type: 'text', text: 'ok' }] });
    expect(strict.seen().map((b) => 'stream_options' in b)).toEqual([true, false]);

    const failing = await scripted((_body, res) => {
      res.writeHead(500, { 'content-type': 'application/json' });
      res.end('{"error":{"message":"CUDA out of memory"}}');
    });
    const h2 = await harness(async () => [failing.replica]);
    const err = await h2.client.messages
      .create({ model: 'demo', max_tokens: 1, messages: [{ role: 'user', content: 'x' }] })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InternalServerError);
    expect((err as { error: unknown }).error).toEqual({
      type: 'error',
      error: { type: 'api_error', message: 'CUDA out of memory' },
    });
  });
});
