// POST /v1/responses in process: the official `openai` client against a
// Fastify app with the router registered (stub catalog and directory, real
// sim engines as replicas). One model's replica runs the sim as itself, which
// serves the Responses API natively; the other's is the same sim marked as
// an engine that does not (llama.cpp), so the router translates to chat.
// The sim writes its Responses answers independently of the router's
// translation and hashes a conversation the same way in both APIs, so the
// two paths giving the same words proves the translation kept the
// conversation exactly.
import type { AddressInfo } from 'node:net';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createOpenAI } from '@ai-sdk/openai';
import { generateText, stepCountIs, tool } from 'ai';
import { z } from 'zod';
import OpenAI, { APIError, AuthenticationError, BadRequestError, NotFoundError } from 'openai';
import pino from 'pino';
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import { compileModel, ModelSchema, type Model } from '../control/catalog/index.js';
import { createJsonApp } from '../http/index.js';
import { startSimEngine } from '../engine/sim/index.js';
import { issueKey, MemoryKeyStore, MemoryUsageSink } from '../control/keys/index.js';
import { MemoryResponseStore, RESPONSE_STORE_DEFAULTS } from '../control/responses/index.js';
import { openAiErrorShape, registerRouter, type RouterReplica } from './index.js';
import { waitFor } from '../../test/support/wait.js';

const cleanups: (() => Promise<unknown> | unknown)[] = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});

function model(name: string): Model {
  return compileModel(
    ModelSchema.parse({ name, source: `file:///models/${name}`, profiles: [{ engine: 'sim' }] }),
    'file',
  );
}

/** Names of the two models: one served natively, one through translation. */
const NATIVE = 'native';
const TRANSLATED = 'translated';
const PATHS = [NATIVE, TRANSLATED] as const;

async function simReplica(m: Model, engine: string): Promise<RouterReplica> {
  const sim = await startSimEngine({ models: [m.name], shutdownGraceMs: 0 });
  cleanups.push(() => sim.close({ graceMs: 0 }));
  return { id: `${m.name}-r1`, endpoint: sim.url, draining: false, engine };
}

/** An engine stand-in that answers as `answer` says; records each request's path and body. */
async function scripted(
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

async function harness(replicas?: Partial<Record<string, RouterReplica[]>>) {
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

const weather = {
  type: 'function' as const,
  name: 'get_weather',
  description: 'the weather in a city',
  parameters: { type: 'object', properties: { city: { type: 'string' } } },
  strict: false,
};

describe('POST /v1/responses, natively and translated', () => {
  it('answers with the same words either way, with usage, kept for GET, and accounted', async () => {
    const h = await harness();
    const texts: string[] = [];
    for (const path of PATHS) {
      const res = await h.client().responses.create({
        model: path,
        instructions: 'Be terse.',
        input: 'Tell me about rivers.',
        max_output_tokens: 6,
      });
      expect(res.object, path).toBe('response');
      expect(res.id, path).toMatch(/^resp_/);
      expect(res.output_text.split(' '), `${path}: a word per token`).toHaveLength(6);
      expect(res.status, `${path}: cut by max_output_tokens`).toBe('incomplete');
      // "Be terse." and "Tell me about rivers." are 30 characters: the sim counts ceil(30 / 4).
      expect(res.usage, path).toMatchObject({ input_tokens: 8, output_tokens: 6, total_tokens: 14 });
      texts.push(res.output_text);
      const got = await h.client().responses.retrieve(res.id);
      expect(got.output_text, `${path}: GET returns the kept response`).toBe(res.output_text);
      expect((got as unknown as { store: unknown }).store, `${path}: kept, as the client asked`).toBe(true);
      await waitFor(`${path}: the usage record`, () =>
        h.usage.snapshot().find((u) => u.model === path && u.completionTokens === 6 && u.promptTokens === 8),
      );
    }
    expect(texts[1], 'the translation kept the conversation exactly').toBe(texts[0]);
  });

  it('streams the events clients parse, numbered from 0, to the same text and usage', async () => {
    const h = await harness();
    for (const path of PATHS) {
      const whole = await h
        .client()
        .responses.create({ model: path, input: 'Tell me about rivers.', max_output_tokens: 5, store: false });
      const stream = await h
        .client()
        .responses.create({ model: path, input: 'Tell me about rivers.', max_output_tokens: 5, stream: true });
      const types: string[] = [];
      const numbers: number[] = [];
      let text = '';
      let final: OpenAI.Responses.Response | null = null;
      for await (const e of stream) {
        types.push(e.type);
        numbers.push(e.sequence_number);
        if (e.type === 'response.output_text.delta') text += e.delta;
        if (e.type === 'response.completed' || e.type === 'response.incomplete') final = e.response;
      }
      expect(numbers, path).toEqual(types.map((_, i) => i));
      expect(types.slice(0, 2), path).toEqual(['response.created', 'response.in_progress']);
      expect(types.at(-1), path).toBe('response.incomplete');
      expect(text, path).toBe(whole.output_text);
      expect(final?.usage, path).toMatchObject({ input_tokens: 6, output_tokens: 5 });
      const kept = await h.client().responses.retrieve(final!.id);
      expect(kept.output_text, `${path}: a streamed response is kept too`).toBe(text);
      await expect(
        h.client().responses.retrieve(whole.id),
        `${path}: store: false keeps nothing`,
      ).rejects.toBeInstanceOf(NotFoundError);
    }
  });

  // An engine that lingers after its last event: the client, done reading, may continue the conversation at once.
  const lastEvents: Record<(typeof PATHS)[number], (model: unknown) => string> = {
    [TRANSLATED]: (model) => {
      const chunk = (delta: object, finish: string | null, usage?: object) =>
        `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model, choices: [{ index: 0, delta, finish_reason: finish }], ...(usage ? { usage } : {}) })}\n\n`;
      return (
        chunk({ role: 'assistant', content: 'hi' }, null) +
        chunk({}, 'stop', { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 }) +
        'data: [DONE]\n\n'
      );
    },
    [NATIVE]: (model) => {
      const response = {
        id: 'resp_native_held',
        object: 'response',
        created_at: 1,
        status: 'completed',
        model,
        output: [
          {
            id: 'msg_1',
            type: 'message',
            role: 'assistant',
            status: 'completed',
            content: [{ type: 'output_text', text: 'hi', annotations: [] }],
          },
        ],
        usage: { input_tokens: 2, output_tokens: 1, total_tokens: 3 },
      };
      return `event: response.completed\ndata: ${JSON.stringify({ type: 'response.completed', sequence_number: 0, response })}\n\n`;
    },
  };

  it.each(PATHS)(
    '%s: keeps a streamed Response before its final event reaches the client, though the engine has not closed yet',
    async (path) => {
      let release = () => {};
      const held = new Promise<void>((resolve) => (release = resolve));
      const engine = await scripted(
        (body, res) => {
          res.writeHead(200, { 'content-type': 'text/event-stream' });
          res.write(lastEvents[path](body.model));
          void held.then(() => res.end());
        },
        path === NATIVE ? 'vllm' : 'llamacpp',
      );
      const h = await harness({ [path]: [engine.replica] });
      const stream = await h.client().responses.create({ model: path, input: 'Say hi', stream: true });
      let id = '';
      for await (const event of stream) {
        if (event.type !== 'response.completed') continue;
        id = event.response.id;
        break;
      }
      try {
        expect(
          (await h.client().responses.retrieve(id)).output_text,
          'kept by the time the client read response.completed',
        ).toBe('hi');
      } finally {
        release();
      }
    },
  );

  it('continues by previous_response_id, per key: the engine gets the whole conversation, another key gets 400', async () => {
    const native = await scripted((body, res) => {
      const usage = { input_tokens: 1, output_tokens: 1, total_tokens: 2 };
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          id: `resp_n${Math.random().toString(36).slice(2)}`,
          object: 'response',
          status: 'completed',
          model: body.model,
          output: [
            {
              id: 'msg_1',
              type: 'message',
              role: 'assistant',
              status: 'completed',
              content: [{ type: 'output_text', text: 'hello', annotations: [] }],
            },
          ],
          usage,
        }),
      );
    }, 'vllm');
    const h = await harness({ [NATIVE]: [native.replica] });
    const first = await h.client().responses.create({ model: NATIVE, input: 'My name is Ada.' });
    const second = await h
      .client()
      .responses.create({ model: NATIVE, input: 'What is my name?', previous_response_id: first.id });
    expect(second.output_text).toBe('hello');
    const sent = native.seen[1]!;
    expect(sent.path, 'passed through to the engine’s own route').toBe('/v1/responses');
    expect(sent.body.store, 'the engine keeps nothing').toBe(false);
    expect('previous_response_id' in sent.body, 'the engine never sees an id it does not know').toBe(false);
    expect(
      JSON.stringify(sent.body.input),
      'the whole conversation: the first input, its answer, the new input',
    ).toMatch(/My name is Ada\..*hello.*What is my name\?/);

    for (const path of PATHS) {
      const a = await h.client().responses.create({
        model: path === NATIVE ? TRANSLATED : path,
        input: 'Tell me about rivers.',
        max_output_tokens: 3,
      });
      const b = await h.client().responses.create({
        model: TRANSLATED,
        input: 'And stones?',
        previous_response_id: a.id,
        max_output_tokens: 3,
      });
      expect(b.previous_response_id, path).toBe(a.id);
      const stranger = await h
        .client(h.other)
        .responses.create({ model: TRANSLATED, input: 'x', previous_response_id: a.id })
        .catch((e: unknown) => e);
      expect(stranger, 'another key’s response does not exist for this key').toBeInstanceOf(BadRequestError);
      expect((stranger as BadRequestError).code).toBe('previous_response_not_found');
      expect((stranger as BadRequestError).message).toContain(a.id);
      await expect(h.client(h.other).responses.retrieve(a.id)).rejects.toBeInstanceOf(NotFoundError);
    }
  });

  it("keeps its own ids whatever the engine answers: two keys given one engine id keep apart, and the engine's id still continues", async () => {
    // Kept responses were keyed by the engine's id alone: an engine answering key B with the id it gave key A made
    // B's answer take A's kept one (owner and body). The router's own random ids now name what it keeps.
    const native = await scripted((body, res) => {
      const text = JSON.stringify(body.input).includes('from A') ? 'answer for A' : 'answer for B';
      const response = {
        id: 'resp_engine_same',
        object: 'response',
        status: 'completed',
        model: body.model,
        output: [
          {
            id: 'msg_1',
            type: 'message',
            role: 'assistant',
            status: 'completed',
            content: [{ type: 'output_text', text, annotations: [] }],
          },
        ],
        usage: { input_tokens: 1, output_tokens: 1, total_tokens: 2 },
      };
      if (body.stream === true) {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        const event = (type: string, n: number) =>
          `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: n, response })}\n\n`;
        res.end(event('response.created', 0) + event('response.completed', 1));
        return;
      }
      const whole = JSON.stringify(response);
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(whole) });
      res.end(whole);
    }, 'vllm');
    const h = await harness({ [NATIVE]: [native.replica] });
    const a = await h.client().responses.create({ model: NATIVE, input: 'from A' });
    const b = await h.client(h.other).responses.create({ model: NATIVE, input: 'from B' });
    expect(a.id, "the router's own id, not the engine's").toMatch(/^resp_[0-9a-f]{32}$/);
    expect(b.id).toMatch(/^resp_[0-9a-f]{32}$/);
    expect(a.id).not.toBe(b.id);
    expect((await h.client().responses.retrieve(a.id)).output_text, "A's kept answer is A's").toBe('answer for A');
    await expect(h.client(h.other).responses.retrieve(a.id), "B cannot read A's").rejects.toBeInstanceOf(NotFoundError);
    // A stream has every event's response id replaced, and what is kept under it is the streamed answer.
    const stream = await h.client().responses.create({ model: NATIVE, input: 'from A, streamed', stream: true });
    const ids = new Set<string>();
    for await (const e of stream) if ('response' in e) ids.add(e.response.id);
    expect(ids.size, 'one id throughout the stream').toBe(1);
    const [streamed] = [...ids];
    expect(streamed).toMatch(/^resp_[0-9a-f]{32}$/);
    expect((await h.client().responses.retrieve(streamed!)).output_text).toBe('answer for A');
    // A client that holds the engine's id (from before this version, or an answer too big to rewrite) continues its own key's newest.
    const next = await h
      .client(h.other)
      .responses.create({ model: NATIVE, input: 'and then?', previous_response_id: 'resp_engine_same' });
    expect(next.output_text).toBe('answer for B');
    expect(
      JSON.stringify(native.seen.at(-1)!.body.input),
      "B's engine id continues B's conversation, never A's",
    ).toMatch(/from B/);
    expect(JSON.stringify(native.seen.at(-1)!.body.input)).not.toMatch(/from A/);
  });

  it('round-trips a function tool on both paths: a forced call, then its output by previous_response_id', async () => {
    const h = await harness();
    for (const path of PATHS) {
      const first = await h
        .client()
        .responses.create({ model: path, input: 'Weather in Oslo?', tools: [weather], tool_choice: 'required' });
      const call = first.output.find((o): o is OpenAI.Responses.ResponseFunctionToolCall => o.type === 'function_call');
      expect(call?.name, path).toBe('get_weather');
      expect(JSON.parse(call!.arguments), path).toEqual({ seed: expect.any(Number) });
      const answer = await h.client().responses.create({
        model: path,
        tools: [weather],
        previous_response_id: first.id,
        input: [{ type: 'function_call_output', call_id: call!.call_id, output: '21 °C, sunny' }],
        max_output_tokens: 4,
      });
      expect(answer.output_text.split(' '), path).toHaveLength(4);
    }
  });

  it('lists the items a response answered, the previous conversation included, pages and all', async () => {
    const h = await harness();
    const first = await h
      .client()
      .responses.create({ model: TRANSLATED, input: 'My name is Ada.', max_output_tokens: 2 });
    const second = await h.client().responses.create({
      model: TRANSLATED,
      input: [{ role: 'user', content: 'What is my name?' }],
      previous_response_id: first.id,
      max_output_tokens: 2,
    });
    const text = (item: unknown) => JSON.stringify(item);
    const all: unknown[] = [];
    for await (const item of h.client().responses.inputItems.list(second.id, { order: 'asc', limit: 1 }))
      all.push(item);
    expect(all, 'the first input, its answer, the second input: not the second answer').toHaveLength(3);
    expect(text(all[0])).toContain('My name is Ada.');
    expect(text(all[1])).toContain(first.output_text);
    expect(text(all[2])).toContain('What is my name?');
    const newest = await h.client().responses.inputItems.list(second.id);
    expect(text(newest.data[0]), 'newest first by default').toContain('What is my name?');
    await expect(h.client(h.other).responses.inputItems.list(second.id), 'another key’s').rejects.toBeInstanceOf(
      NotFoundError,
    );
  });

  it('resolves the item references the AI SDK sends for earlier answers: a second turn and a tool loop, on both paths', async () => {
    const h = await harness();
    const provider = createOpenAI({ baseURL: `${h.url}/v1`, apiKey: h.secret });
    for (const path of PATHS) {
      const first = await generateText({
        model: provider(path),
        prompt: 'My name is Ada.',
        maxOutputTokens: 3,
        maxRetries: 0,
      });
      // With store (its default) the SDK sends the assistant turn back as an item_reference to its id.
      const second = await generateText({
        model: provider(path),
        messages: [
          { role: 'user', content: 'My name is Ada.' },
          ...first.response.messages,
          { role: 'user', content: 'What is my name?' },
        ],
        maxOutputTokens: 3,
        maxRetries: 0,
      });
      expect(second.text.split(' '), path).toHaveLength(3);
      const loop = await generateText({
        model: provider(path),
        prompt: 'Weather in Oslo?',
        tools: {
          get_weather: tool({
            description: 'the weather',
            inputSchema: z.object({ seed: z.number() }),
            execute: async () => '21 °C',
          }),
        },
        prepareStep: ({ stepNumber }) => ({ toolChoice: stepNumber === 0 ? 'required' : 'none' }),
        stopWhen: stepCountIs(2),
        maxOutputTokens: 3,
        maxRetries: 0,
      });
      expect(
        loop.steps.map((step) => step.finishReason),
        path,
      ).toEqual(['tool-calls', expect.any(String)]);
      expect(loop.text.split(' '), `${path}: answered after the tool`).toHaveLength(3);
    }
  });

  it('deletes by key as OpenAI answers, and asks a key on every Responses route', async () => {
    const h = await harness();
    const res = await h.client().responses.create({ model: TRANSLATED, input: 'x', max_output_tokens: 1 });
    const strangerDelete = await fetch(`${h.url}/v1/responses/${res.id}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${h.other}` },
    });
    expect(strangerDelete.status, 'another key cannot delete it').toBe(404);
    const deleted = await fetch(`${h.url}/v1/responses/${res.id}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${h.secret}` },
    });
    expect(await deleted.json()).toEqual({ id: res.id, object: 'response', deleted: true });
    await expect(h.client().responses.retrieve(res.id)).rejects.toBeInstanceOf(NotFoundError);
    for (const [method, path] of [
      ['POST', '/v1/responses'],
      ['GET', `/v1/responses/${res.id}`],
      ['GET', `/v1/responses/${res.id}/input_items`],
      ['DELETE', `/v1/responses/${res.id}`],
    ] as const) {
      const r = await fetch(`${h.url}${path}`, {
        method,
        headers: { 'content-type': 'application/json' },
        ...(method === 'POST' ? { body: '{}' } : {}),
      });
      expect(r.status, `${method} ${path} without a key`).toBe(401);
    }
    await expect(h.client('sk-wrong').responses.create({ model: NATIVE, input: 'x' })).rejects.toBeInstanceOf(
      AuthenticationError,
    );
  });

  it('refuses what llmgw does not serve with 400 naming it: a built-in tool, background mode, a bad item', async () => {
    const h = await harness();
    const builtIn = await h
      .client()
      .responses.create({ model: NATIVE, input: 'x', tools: [{ type: 'web_search_preview' }] })
      .catch((e: unknown) => e);
    expect(builtIn).toBeInstanceOf(BadRequestError);
    expect((builtIn as BadRequestError).message).toMatch(/web_search_preview/);
    const background = await h
      .client()
      .responses.create({ model: NATIVE, input: 'x', background: true })
      .catch((e: unknown) => e);
    expect(background).toBeInstanceOf(BadRequestError);
    expect((background as BadRequestError).message).toMatch(/background/);
    const item = await fetch(`${h.url}/v1/responses`, {
      method: 'POST',
      headers: { authorization: `Bearer ${h.secret}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: TRANSLATED, input: [{ type: 'no_such_item' }] }),
    });
    expect(item.status).toBe(400);
    expect(((await item.json()) as { error: { type: string; param: unknown } }).error).toMatchObject({
      type: 'invalid_request_error',
      param: 'input',
    });
    await expect(h.client().responses.create({ model: 'nope', input: 'x' })).rejects.toBeInstanceOf(NotFoundError);
  });

  it('moves on from a 503 before the first byte; a translated stream broken after it ends with response.failed', async () => {
    const busy = await scripted((_body, res) => {
      res.writeHead(503, { 'content-type': 'application/json' });
      res.end('{"error":{"message":"busy"}}');
    });
    const chunk = (delta: Record<string, unknown>) =>
      `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 0, model: TRANSLATED, choices: [{ index: 0, delta, finish_reason: null }] })}\n\n`;
    const breaking = await scripted((_body, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(chunk({ role: 'assistant', content: 'one' }));
      res.write(chunk({ content: ' two' }), () => res.socket?.destroy());
    });
    const h = await harness({ [TRANSLATED]: [busy.replica, await simReplica(model(TRANSLATED), 'llamacpp')] });
    const res = await h.client().responses.create({ model: TRANSLATED, input: 'x', max_output_tokens: 2 });
    expect(res.usage?.output_tokens).toBe(2);
    expect(busy.seen).toHaveLength(1);

    const h2 = await harness({ [TRANSLATED]: [breaking.replica] });
    const stream = await h2.client().responses.create({ model: TRANSLATED, input: 'x', stream: true });
    const types: string[] = [];
    let text = '';
    let failed: OpenAI.Responses.ResponseFailedEvent | null = null;
    const err = await (async () => {
      for await (const e of stream) {
        types.push(e.type);
        if (e.type === 'response.output_text.delta') text += e.delta;
        if (e.type === 'response.failed') failed = e;
      }
    })().then(
      () => null,
      (e: unknown) => e,
    );
    expect(err === null || err instanceof APIError, 'the stream ends, or the client reports the failure').toBe(true);
    expect(types.at(-1), 'the last event says it failed').toBe('response.failed');
    expect(failed!.response.error?.message).toMatch(/stopped answering mid-response/);
    expect(text, 'what came before the break, once').toBe('one two');

    // Natively, the byte relay's own ending: the events that came whole, then one error event.
    const event = (type: string, fields: Record<string, unknown>) =>
      `event: ${type}\ndata: ${JSON.stringify({ type, ...fields })}\n\n`;
    const nativeBreaking = await scripted((_body, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(
        event('response.created', {
          sequence_number: 0,
          response: { id: 'resp_x', object: 'response', status: 'in_progress', output: [] },
        }),
      );
      res.write(
        event('response.output_text.delta', {
          sequence_number: 1,
          item_id: 'msg_1',
          output_index: 0,
          content_index: 0,
          delta: 'one',
        }),
        () => res.socket?.destroy(),
      );
    }, 'vllm');
    const h3 = await harness({ [NATIVE]: [nativeBreaking.replica] });
    const raw = await fetch(`${h3.url}/v1/responses`, {
      method: 'POST',
      headers: { authorization: `Bearer ${h3.secret}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: NATIVE, input: 'x', stream: true }),
    });
    const body = await raw.text();
    expect(body.startsWith('event: response.created'), body).toBe(true);
    expect(body, 'the delta that came whole').toContain('"delta":"one"');
    expect(body.trimEnd().split('\n\n').at(-1), 'then the error event').toMatch(
      /^data: \{"error":\{"message":"the engine stopped answering mid-response"/,
    );
  });

  it('decides the path per replica: a fallback on another engine is served its own way', async () => {
    const busy = await scripted((_body, res) => {
      res.writeHead(503, { 'content-type': 'application/json' });
      res.end('{"error":{"message":"busy"}}');
    }, 'vllm');
    // One model whose replicas run two engines: the native one refuses before its first byte, the other is sent chat.
    const h = await harness({ [NATIVE]: [busy.replica, await simReplica(model(NATIVE), 'builtin')] });
    const res = await h
      .client()
      .responses.create({ model: NATIVE, input: 'Tell me about rivers.', max_output_tokens: 3 });
    expect(res.output_text.split(' ')).toHaveLength(3);
    expect(
      busy.seen.map((s) => s.path),
      'the first attempt went natively',
    ).toEqual(['/v1/responses']);
  });
});
