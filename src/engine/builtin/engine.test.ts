// The builtin engine in-process, driven by the official OpenAI client: what a
// client sees (shapes, usage, limits, errors) and what the engine does under
// it (waiting for a sequence, stopping when the client goes away).
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeTinyModel } from '../../dev/make-model/index.js';
import { initTls } from '../../tls/init.js';
import { BuiltinRuntime } from './llama-runtime.js';
import { startBuiltinEngine, type BuiltinEngine, type BuiltinEngineStats } from './server.js';
import { waitFor } from '../../../test/support/wait.js';

/** Waits as the engine's own counters move; a real model run can take seconds. */
const promptly = { timeoutMs: 30_000, intervalMs: 10 };

const MODEL = 'tiny';
let dir: string;
let engine: BuiltinEngine;
let client: OpenAI;
let healthWhileLoading: { status: number; body: unknown };
const logLines: string[] = [];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'llmgw-builtin-'));
  const modelPath = join(dir, 'tiny.gguf');
  // A longer declared context than the default tiny model, so one request can outlast the test's abort.
  await makeTinyModel(modelPath, { contextLength: 4096 });
  let openGate: () => void = () => undefined;
  const gate = new Promise<void>((resolve) => {
    openGate = resolve;
  });
  engine = await startBuiltinEngine(
    {
      modelPath,
      aliases: [MODEL, 'tiny-alias'],
      threads: 1,
      parallel: 1,
      contextTokens: 4096,
      log: (line) => logLines.push(line),
    },
    // Held at "loading" until the test has looked, so the check does not race the load.
    { loadRuntime: async (options, facts) => (await gate, BuiltinRuntime.load(options, facts)) },
  );
  const res = await fetch(`${engine.url}/health`);
  healthWhileLoading = { status: res.status, body: await res.json() };
  openGate();
  await engine.ready;
  client = new OpenAI({ baseURL: `${engine.url}/v1`, apiKey: 'unused', maxRetries: 0 });
});

afterAll(async () => {
  await engine?.close();
  await rm(dir, { recursive: true, force: true });
});

describe('builtin engine over HTTP', () => {
  it('answers 503 loading until the model is loaded, then 200 with its counters', async () => {
    expect(healthWhileLoading).toEqual({ status: 503, body: { status: 'loading' } });
    const res = await fetch(`${engine.url}/health`);
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ status: 'ok', model: MODEL, requests_in_flight: 0 });
    expect(logLines.join('\n'), 'the load line names the binary: on the CPU, with the threads asked for').toMatch(
      /loaded .*tiny\.gguf .*1 sequence\(s\) of 4096 tokens, 1 thread\(s\), (prebuilt|localBuild) llama\.cpp \S+, CPU/,
    );
  });

  it('lists every alias in /v1/models', async () => {
    const models = await client.models.list();
    expect(models.data.map((m) => m.id)).toEqual([MODEL, 'tiny-alias']);
    expect(models.data[0]).toMatchObject({ object: 'model', owned_by: 'llmgw' });
  });

  it('answers a chat with the real token counts and stops at max_tokens', async () => {
    const reply = await client.chat.completions.create({
      model: MODEL,
      messages: [
        { role: 'system', content: 'You are terse.' },
        { role: 'user', content: 'Say something.' },
      ],
      max_tokens: 7,
    });
    const choice = reply.choices[0]!;
    expect(reply.object).toBe('chat.completion');
    expect(choice.message.role).toBe('assistant');
    expect(choice.message.content, 'the tiny model writes printable ASCII').toMatch(/^[\x20-\x7e]+$/);
    // The tiny model never ends a reply itself, so max_tokens is what stops it.
    expect(choice.finish_reason).toBe('length');
    expect(reply.usage?.completion_tokens).toBe(7);
    // ChatML around two messages and the open reply is well over a dozen tokens.
    expect(reply.usage!.prompt_tokens).toBeGreaterThan(12);
    expect(reply.usage!.total_tokens).toBe(reply.usage!.prompt_tokens + 7);
  });

  it('honours max_completion_tokens as max_tokens', async () => {
    const reply = await client.chat.completions.create({
      model: 'tiny-alias',
      messages: [{ role: 'user', content: 'hi' }],
      max_completion_tokens: 3,
    });
    expect(reply.usage?.completion_tokens).toBe(3);
    expect(reply.model, 'the name the client used').toBe('tiny-alias');
  });

  it('counts a last token that node-llama-cpp holds back and never releases', async () => {
    // With the tiny model, seed 329 ends a 7-token reply on a token that
    // node-llama-cpp keeps back from its text (a possible start of a stop
    // string): six tokens' text, but seven were generated and billed.
    const reply = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'Say something.' }],
      max_tokens: 7,
      seed: 329,
    });
    expect(reply.choices[0]!.message.content!.length, 'this seed still ends on a held-back token').toBeLessThan(7);
    expect(reply.choices[0]!.finish_reason).toBe('length');
    expect(reply.usage?.completion_tokens).toBe(7);
  });

  it('samples afresh for each request without a seed, as OpenAI does', async () => {
    const ask = () =>
      client.chat.completions.create({
        model: MODEL,
        messages: [{ role: 'user', content: 'Pick a word.' }],
        max_tokens: 8,
      });
    const replies = await Promise.all([ask(), ask(), ask()]);
    // Without a seed of our own, node-llama-cpp seeds with the current second: three equal replies.
    expect(new Set(replies.map((r) => r.choices[0]!.message.content)).size).toBeGreaterThan(1);
  });

  it('streams OpenAI chunks: role first, content deltas, finish, then usage when asked', async () => {
    const stream = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'Stream please.' }],
      max_tokens: 9,
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks: OpenAI.Chat.Completions.ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks[0]!.choices[0]!.delta.role).toBe('assistant');
    const content = chunks.map((c) => c.choices[0]?.delta.content ?? '').join('');
    expect(content.length, 'the deltas add up to text').toBeGreaterThan(0);
    const finishes = chunks.filter((c) => c.choices[0]?.finish_reason);
    expect(finishes.map((c) => c.choices[0]!.finish_reason)).toEqual(['length']);
    const last = chunks.at(-1)!;
    expect(last.choices, 'the usage chunk carries no choice').toEqual([]);
    expect(last.usage).toMatchObject({ completion_tokens: 9, total_tokens: last.usage!.prompt_tokens + 9 });
    expect(
      chunks.slice(0, -1).every((c) => c.usage === null),
      'usage is null on every other chunk',
    ).toBe(true);
  });

  it('completes a raw prompt, streamed or not, with the same seed giving the same text', async () => {
    const params = { model: MODEL, prompt: 'Once upon a time', max_tokens: 12, temperature: 1, seed: 42 };
    const first = await client.completions.create(params);
    expect(first.object).toBe('text_completion');
    expect(first.choices[0]!.text).toMatch(/^[\x20-\x7e]+$/);
    expect(first.usage?.completion_tokens).toBe(12);
    // BOS and the prompt's bytes and spaces: at least one token per word.
    expect(first.usage!.prompt_tokens).toBeGreaterThanOrEqual(5);

    const stream = await client.completions.create({ ...params, stream: true });
    let streamed = '';
    for await (const chunk of stream) streamed += chunk.choices[0]?.text ?? '';
    expect(streamed, 'the same seed samples the same tokens').toBe(first.choices[0]!.text);
  });

  it('stops at a stop sequence and leaves it out', async () => {
    const prompt = 'The stop test';
    const greedy = (await client.completions.create({ model: MODEL, prompt, max_tokens: 24, temperature: 0 }))
      .choices[0]!.text;
    const stop = greedy.slice(4, 6);
    const cut = await client.completions.create({ model: MODEL, prompt, max_tokens: 24, temperature: 0, stop: [stop] });
    expect(cut.choices[0]!.text).toBe(greedy.slice(0, greedy.indexOf(stop)));
    expect(cut.choices[0]!.finish_reason).toBe('stop');
  });

  it('embeds text as vectors of the model width, in floats and in base64', async () => {
    const viaBase64 = await client.embeddings.create({ model: MODEL, input: ['hello', 'world'] });
    expect(viaBase64.data).toHaveLength(2);
    expect(viaBase64.data[0]!.embedding).toHaveLength(64);
    expect(viaBase64.usage.prompt_tokens).toBeGreaterThan(0);
    const viaFloat = await client.embeddings.create({ model: MODEL, input: 'hello', encoding_format: 'float' });
    expect(viaFloat.data[0]!.embedding).toHaveLength(64);
    const a = viaBase64.data[0]!.embedding;
    const b = viaFloat.data[0]!.embedding;
    expect(
      b.every((v, i) => Math.abs(v - a[i]!) < 1e-5),
      'one input, one vector, however encoded',
    ).toBe(true);
  });

  // An engine on 0.0.0.0 took requests from anyone who reached its port, skipping keys, limits and accounting (issue 17).
  it('with --api-key, refuses /v1/* without the key with 401 and keeps /health open for the probe', async () => {
    let endLoad: (err: Error) => void = () => undefined;
    const keyed = await startBuiltinEngine(
      {
        modelPath: join(dir, 'tiny.gguf'),
        aliases: [MODEL],
        threads: 1,
        apiKey: 'engine-secret',
        log: () => undefined,
      },
      // Stays loading until the test ends: the key is checked before the model is asked for anything.
      { loadRuntime: () => new Promise<never>((_, reject) => (endLoad = reject)) },
    );
    try {
      const bare = await fetch(`${keyed.url}/v1/models`);
      expect(bare.status).toBe(401);
      const body = (await bare.json()) as { error: { message: string; code: unknown } };
      expect(body.error.message).toMatch(/only with its API key/);
      const wrong = await fetch(`${keyed.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: 'Bearer nope', 'content-type': 'application/json' },
        body: '{}',
      });
      expect(wrong.status).toBe(401);
      const right = await fetch(`${keyed.url}/v1/models`, { headers: { authorization: 'Bearer engine-secret' } });
      expect(right.status, 'past the key, the engine answers as it would (still loading)').toBe(503);
      expect((await fetch(`${keyed.url}/health`)).status, 'the probe needs no key: 503 is "loading", not 401').toBe(
        503,
      );
    } finally {
      endLoad(new Error('the test is over'));
      await keyed.close();
    }
  });

  // Engines spoke plain http only, so prompts crossed the fleet network in clear between router and engine (issue 17).
  it('with --tls-cert/--tls-key, serves https (even while loading) and nothing over plain http', async () => {
    const pki = join(dir, 'pki');
    await initTls({ dir: pki, controlHosts: [], nodes: [{ name: 'n1', hosts: [] }], days: 1, force: false });
    let endLoad: (err: Error) => void = () => undefined;
    const secure = await startBuiltinEngine(
      {
        modelPath: join(dir, 'tiny.gguf'),
        aliases: [MODEL],
        threads: 1,
        tlsCert: join(pki, 'node-n1.pem'),
        tlsKey: join(pki, 'node-n1-key.pem'),
        log: () => undefined,
      },
      { loadRuntime: () => new Promise<never>((_, reject) => (endLoad = reject)) },
    );
    // A node certificate names the node, never loopback: the client asks for the node's name, as the router checks it.
    const trusting = new Agent({ connect: { ca: await readFile(join(pki, 'ca.pem')), servername: 'n1' } });
    try {
      expect(secure.url).toMatch(/^https:\/\//);
      const health = await request(`${secure.url}/health`, { dispatcher: trusting });
      await health.body.dump();
      expect(health.statusCode, 'the probe reaches it over https: 503 is "loading"').toBe(503);
      await expect(
        request(`${secure.url.replace('https:', 'http:')}/health`),
        'plain http gets no answer',
      ).rejects.toThrow();
    } finally {
      endLoad(new Error('the test is over'));
      await trusting.close();
      await secure.close();
    }
  });

  it("tokenizes text and chat messages with the model's own tokenizer, counting as usage does, and detokenizes back", async () => {
    const post = async (path: string, body: unknown) => {
      const res = await fetch(`${engine.url}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      return { status: res.status, json: (await res.json()) as Record<string, unknown> };
    };
    const messages = [
      { role: 'system' as const, content: 'You are terse.' },
      { role: 'user' as const, content: 'Count these words for me.' },
    ];
    const counted = await post('/tokenize', { model: MODEL, messages });
    expect(counted.status, JSON.stringify(counted.json)).toBe(200);
    const reply = await client.chat.completions.create({ model: MODEL, messages, max_tokens: 1 });
    expect(counted.json.count, "the chat template's tokens: the answer's prompt_tokens").toBe(
      reply.usage?.prompt_tokens,
    );
    expect(counted.json.max_model_len).toBe(4096);

    const prompt = 'once upon a time';
    const text = await post('/tokenize', { model: 'tiny-alias', prompt, return_token_strs: true });
    const completion = await client.completions.create({ model: MODEL, prompt, max_tokens: 1 });
    expect(text.json.count, "a completion prompt's tokens: its prompt_tokens").toBe(completion.usage?.prompt_tokens);
    const tokens = text.json.tokens as number[];
    expect((text.json.token_strs as string[]).length).toBe(tokens.length);
    const withoutBos = await post('/tokenize', { model: MODEL, prompt, add_special_tokens: false });
    const back = await post('/detokenize', { model: MODEL, tokens: withoutBos.json.tokens });
    expect((back.json.prompt as string).trim(), 'the text again').toBe(prompt);
    expect((await post('/tokenize', { content: prompt })).json, "llama.cpp's shape for its field").toEqual({
      tokens: withoutBos.json.tokens,
    });

    const outside = await post('/detokenize', { model: MODEL, tokens: [1, 10_000_000] });
    expect(outside.status).toBe(400);
    expect((outside.json.error as { message: string }).message).toMatch(
      /^tokens\[1\]: 10000000 is outside this model's vocabulary of \d+ tokens/,
    );
    expect((await post('/tokenize', { model: 'other', prompt })).status, 'another model').toBe(404);
  });

  it("answers mistakes in OpenAI's error shape", async () => {
    await expect(
      client.chat.completions.create({ model: 'nope', messages: [{ role: 'user', content: 'x' }] }),
    ).rejects.toMatchObject({
      status: 404,
      code: 'model_not_found',
      error: { llmgw_code: 'LLMGW_MODEL_NOT_FOUND' },
      param: 'model',
      type: 'invalid_request_error',
    });
    await expect(
      client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'x' }], n: 17 }),
    ).rejects.toMatchObject({
      status: 400,
      code: 'LLMGW_BAD_REQUEST',
      param: 'n',
    });
    await expect(client.chat.completions.create({ model: MODEL, messages: [] })).rejects.toMatchObject({
      status: 400,
      param: 'messages',
    });
    const raw = await fetch(`${engine.url}/v1/chat/completions`, { method: 'POST', body: '{"model":' });
    expect(raw.status).toBe(400);
    expect(await raw.json()).toMatchObject({
      error: {
        code: 'LLMGW_INVALID_JSON',
        llmgw_code: 'LLMGW_INVALID_JSON',
        type: 'invalid_request_error',
        param: null,
      },
    });
    const missing = await fetch(`${engine.url}/v1/nothing`);
    expect(missing.status).toBe(404);
    expect(((await missing.json()) as { error: { message: string } }).error.message).toContain('/v1/chat/completions');
  });

  it('refuses a message without content, naming it', async () => {
    const noContent = { role: 'user', content: null } as unknown as OpenAI.ChatCompletionMessageParam;
    await expect(
      client.chat.completions.create({ model: MODEL, messages: [{ role: 'system', content: 'Be brief.' }, noContent] }),
    ).rejects.toMatchObject({
      status: 400,
      code: 'LLMGW_BAD_REQUEST',
      param: 'messages[1].content',
      message: expect.stringContaining('needs content'),
    });
    const missing = await fetch(`${engine.url}/v1/chat/completions`, {
      method: 'POST',
      body: JSON.stringify({ model: MODEL, messages: [{ role: 'user' }] }),
    });
    expect(missing.status).toBe(400);
    expect(await missing.json()).toMatchObject({
      error: { param: 'messages[0].content', llmgw_code: 'LLMGW_BAD_REQUEST' },
    });
  });

  it("refuses a prompt longer than a sequence holds as OpenAI's context_length_exceeded, saying what to change", async () => {
    await expect(
      client.completions.create({ model: MODEL, prompt: 'x '.repeat(5000), max_tokens: 1 }),
    ).rejects.toMatchObject({
      status: 400,
      code: 'context_length_exceeded',
      param: 'prompt',
      error: {
        llmgw_code: 'LLMGW_CONTEXT_LENGTH_EXCEEDED',
        message: expect.stringMatching(
          /^This model's maximum context length is 4096 tokens, however you requested \d+ tokens .*--ctx-size/,
        ),
      },
    });
    await expect(
      client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'x '.repeat(5000) }] }),
    ).rejects.toMatchObject({
      status: 400,
      code: 'context_length_exceeded',
      param: 'messages',
      error: {
        message: expect.stringMatching(
          /^This model's maximum context length is 4096 tokens\. However, your messages resulted in \d+ tokens\. Please reduce the length of the messages\./,
        ),
      },
    });
    await expect(client.embeddings.create({ model: MODEL, input: ['short', 'x '.repeat(5000)] })).rejects.toMatchObject(
      {
        status: 400,
        code: 'context_length_exceeded',
        param: 'input',
        message: expect.stringContaining('input[1] is'),
      },
    );
  });

  it('queues requests beyond --parallel, and stops generating when the client goes away', async () => {
    const stats = (): BuiltinEngineStats => engine.stats();
    const abortedBefore = stats().requestsAborted;
    const servedBefore = stats().requestsServed;
    const gone = new AbortController();
    const long = await client.chat.completions.create(
      { model: MODEL, messages: [{ role: 'user', content: 'Talk for a long time.' }], max_tokens: 3500, stream: true },
      { signal: gone.signal },
    );
    const reader = long[Symbol.asyncIterator]();
    await reader.next();
    expect(stats().requestsInFlight, 'the long request holds the only sequence').toBe(1);

    const queued = client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'Me next.' }],
      max_tokens: 4,
    });
    await waitFor('the second request waits for a sequence', () => stats().requestsWaiting === 1, promptly);

    gone.abort();
    const reply = await queued;
    expect(reply.usage?.completion_tokens, 'the waiting request is served once the sequence is free').toBe(4);
    await waitFor('the abort is counted', () => stats().requestsAborted === abortedBefore + 1, promptly);
    expect(stats()).toMatchObject({ requestsInFlight: 0, requestsWaiting: 0, requestsServed: servedBefore + 1 });
    const line = logLines.find((l) => /aborted after \d+ tokens/.test(l));
    expect(line, 'the log says the request was aborted').toBeDefined();
    const generated = Number(/aborted after (\d+) tokens/.exec(line!)![1]);
    expect(generated, 'generation stopped well before max_tokens').toBeLessThan(3500);
    const health = (await (await fetch(`${engine.url}/health`)).json()) as Record<string, number>;
    expect(health.requests_aborted).toBe(abortedBefore + 1);
  });
});
