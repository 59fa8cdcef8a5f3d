// The sim engine through the official OpenAI client, in process, on port 0:
// if these shapes drift from OpenAI's, every router test built on the sim
// would be testing against a server no real client talks to.
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import OpenAI, {
  AuthenticationError,
  BadRequestError,
  InternalServerError,
  NotFoundError,
  RateLimitError,
} from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import { initTls } from '../../tls/init.js';
import { startSimEngine, type SimEngine, type SimEngineOptions } from './index.js';
import { waitFor } from '../../../test/support/wait.js';

/** Waits as the engine's own counters move: they change within milliseconds. */
const promptly = { timeoutMs: 10_000, intervalMs: 5 };

const engines: SimEngine[] = [];

async function start(options: SimEngineOptions = {}): Promise<{ engine: SimEngine; client: OpenAI }> {
  const engine = await startSimEngine({ models: ['sim-model', 'sim-alias'], ...options });
  engines.push(engine);
  const client = new OpenAI({ baseURL: `${engine.url}/v1`, apiKey: 'unused', maxRetries: 0 });
  return { engine, client };
}

afterEach(async () => {
  await Promise.all(engines.splice(0).map((e) => e.close({ graceMs: 0 })));
});

const messages = [{ role: 'user' as const, content: 'Tell me about rivers.' }];

async function chatText(client: OpenAI, extra: Record<string, unknown> = {}): Promise<string> {
  const res = await client.chat.completions.create({ model: 'sim-model', messages, max_tokens: 20, ...extra });
  return res.choices[0]!.message.content ?? '';
}

describe('sim engine, as the OpenAI client sees it', () => {
  it('lists every served name as a model owned by llmgw-sim', async () => {
    const { client } = await start();
    const page = await client.models.list();
    expect(
      page.data.map((m) => m.id),
      'served names in order',
    ).toEqual(['sim-model', 'sim-alias']);
    expect(page.data.every((m) => m.owned_by === 'llmgw-sim' && m.object === 'model')).toBe(true);
  });

  it('answers a chat with max_tokens words, usage, and the model name as requested', async () => {
    const { client } = await start();
    const res = await client.chat.completions.create({ model: 'sim-alias', messages, max_tokens: 5 });
    expect(res.object).toBe('chat.completion');
    expect(res.model, 'an alias is echoed, not replaced by the canonical name').toBe('sim-alias');
    const choice = res.choices[0]!;
    expect(choice.message.role).toBe('assistant');
    expect(choice.message.content!.split(' '), 'one word per token').toHaveLength(5);
    expect(choice.finish_reason).toBe('length');
    // prompt_tokens = ceil(characters / 4): "Tell me about rivers." is 21 characters.
    expect(res.usage).toMatchObject({ prompt_tokens: 6, completion_tokens: 5, total_tokens: 11 });
  });

  it('honours max_completion_tokens and defaults to 16 tokens', async () => {
    const { client } = await start();
    const byNewName = await client.chat.completions.create({ model: 'sim-model', messages, max_completion_tokens: 3 });
    expect(byNewName.usage?.completion_tokens).toBe(3);
    const byDefault = await client.chat.completions.create({ model: 'sim-model', messages });
    expect(byDefault.usage?.completion_tokens).toBe(16);
  });

  it('answers a text completion, one choice per prompt of a batch', async () => {
    const { client } = await start();
    const res = await client.completions.create({
      model: 'sim-model',
      prompt: ['one prompt', 'another'],
      max_tokens: 7,
    });
    expect(res.object).toBe('text_completion');
    expect(res.choices.map((c) => c.index)).toEqual([0, 1]);
    expect(res.choices[0]!.text.split(' ')).toHaveLength(7);
    expect(res.choices[0]!.text, 'different prompts, different words').not.toBe(res.choices[1]!.text);
    expect(res.usage).toMatchObject({ prompt_tokens: 3 + 2, completion_tokens: 14 });
  });

  it('streams chat like OpenAI: role first, a finish chunk, a usage chunk, and the same text as unstreamed', async () => {
    const { client } = await start();
    const whole = await chatText(client);
    const stream = await client.chat.completions.create({
      model: 'sim-model',
      messages,
      max_tokens: 20,
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks[0]!.choices[0]!.delta.role, 'the first chunk carries the role').toBe('assistant');
    const content = chunks.map((c) => c.choices[0]?.delta.content ?? '').join('');
    expect(content, 'streamed and unstreamed text agree for one prompt and seed').toBe(whole);
    const finish = chunks.filter((c) => c.choices[0]?.finish_reason);
    expect(finish.map((c) => c.choices[0]!.finish_reason)).toEqual(['length']);
    const last = chunks.at(-1)!;
    expect(last.choices, 'the usage chunk has no choices').toEqual([]);
    expect(last.usage).toMatchObject({ completion_tokens: 20, prompt_tokens: 6, total_tokens: 26 });
    expect(
      chunks.slice(0, -1).every((c) => c.usage === null),
      'other chunks carry usage: null',
    ).toBe(true);
  });

  it('answers a forced tool choice with one deterministic tool call, whole or streamed (the client accumulates the same call)', async () => {
    const { client } = await start();
    const tools = [
      { type: 'function' as const, function: { name: 'lookup', parameters: { type: 'object' } } },
      { type: 'function' as const, function: { name: 'other', parameters: { type: 'object' } } },
    ];
    const whole = await client.chat.completions.create({
      model: 'sim-model',
      messages,
      tools,
      tool_choice: { type: 'function', function: { name: 'other' } },
    });
    const choice = whole.choices[0]!;
    expect(choice.finish_reason).toBe('tool_calls');
    expect(choice.message.content).toBeNull();
    const call = choice.message.tool_calls![0]! as { id: string; function: { name: string; arguments: string } };
    expect(call.function.name).toBe('other');
    expect(JSON.parse(call.function.arguments)).toEqual({ seed: expect.any(Number) });
    expect(whole.usage!.completion_tokens).toBeGreaterThan(0);
    // "required" calls the first tool; the same prompt makes the same arguments.
    const stream = client.chat.completions.stream({
      model: 'sim-model',
      messages,
      tools,
      tool_choice: 'required',
      stream_options: { include_usage: true },
    });
    const done = await stream.finalChatCompletion();
    const streamed = done.choices[0]!;
    expect(streamed.finish_reason).toBe('tool_calls');
    const streamedCall = streamed.message.tool_calls![0]! as { function: { name: string; arguments: string } };
    expect(streamedCall.function).toEqual({ name: 'lookup', arguments: call.function.arguments });
    // Text as before when no tool is forced.
    expect(await chatText(client, { tools, tool_choice: 'auto' })).not.toBe('');
    await expect(
      client.chat.completions.create({
        model: 'sim-model',
        messages,
        tools,
        tool_choice: { type: 'function', function: { name: 'nope' } },
      }),
    ).rejects.toThrow(/`nope` is not in tools/);
  });

  it('streams text completions with the same text as unstreamed, and no usage chunk unless asked', async () => {
    const { client } = await start();
    const whole = await client.completions.create({ model: 'sim-model', prompt: 'p', max_tokens: 9 });
    const stream = await client.completions.create({ model: 'sim-model', prompt: 'p', max_tokens: 9, stream: true });
    let text = '';
    let usageSeen = false;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.text ?? '';
      if (chunk.usage) usageSeen = true;
    }
    expect(text).toBe(whole.choices[0]!.text);
    expect(usageSeen).toBe(false);
  });

  it('gives n choices with different texts, streamed or not', async () => {
    const { client } = await start();
    const res = await client.chat.completions.create({ model: 'sim-model', messages, max_tokens: 6, n: 2 });
    expect(res.choices.map((c) => c.index)).toEqual([0, 1]);
    expect(res.choices[0]!.message.content).not.toBe(res.choices[1]!.message.content);
    expect(res.usage?.completion_tokens).toBe(12);
    const stream = await client.chat.completions.create({
      model: 'sim-model',
      messages,
      max_tokens: 6,
      n: 2,
      stream: true,
    });
    const texts = ['', ''];
    for await (const chunk of stream) for (const c of chunk.choices) texts[c.index] += c.delta.content ?? '';
    expect(texts).toEqual(res.choices.map((c) => c.message.content));
  });

  it('cuts the text before a stop string, even one spanning two tokens, streamed or not', async () => {
    const { client } = await start();
    const full = await chatText(client);
    const words = full.split(' ');
    for (const stop of [words[5]!, `${words[6]} ${words[7]}`]) {
      const expected = full.slice(0, full.indexOf(stop));
      const res = await client.chat.completions.create({ model: 'sim-model', messages, max_tokens: 20, stop: [stop] });
      expect(res.choices[0]!.message.content, `stop ${JSON.stringify(stop)}`).toBe(expected);
      expect(res.choices[0]!.finish_reason).toBe('stop');
      const stream = await client.chat.completions.create({
        model: 'sim-model',
        messages,
        max_tokens: 20,
        stop,
        stream: true,
      });
      let text = '';
      let reason: string | null = null;
      for await (const chunk of stream) {
        text += chunk.choices[0]?.delta.content ?? '';
        reason = chunk.choices[0]?.finish_reason ?? reason;
      }
      expect(text, `streamed, stop ${JSON.stringify(stop)}`).toBe(expected);
      expect(reason).toBe('stop');
    }
  });

  it('is deterministic: same prompt and seed give the same text, another seed gives another', async () => {
    const a = await start({ seed: 7 });
    const b = await start({ seed: 7 });
    const c = await start({ seed: 8 });
    const textA = await chatText(a.client);
    expect(await chatText(b.client), 'same seed on another engine').toBe(textA);
    expect(await chatText(c.client), 'another engine seed').not.toBe(textA);
    expect(await chatText(a.client, { seed: 99 }), "the request's own seed").not.toBe(textA);
    expect(await chatText(c.client, { seed: 99 }), "the request's seed wins over the engine's").toBe(
      await chatText(a.client, { seed: 99 }),
    );
  });

  it('embeds each input as a deterministic unit vector, in base64 (the client default) and as floats', async () => {
    const { client } = await start({ embeddingDim: 48 });
    const res = await client.embeddings.create({ model: 'sim-model', input: ['alpha', 'beta', 'alpha'] });
    expect(res.data).toHaveLength(3);
    for (const item of res.data) {
      expect(item.embedding).toHaveLength(48);
      const norm = Math.sqrt(item.embedding.reduce((s, v) => s + v * v, 0));
      expect(Math.abs(norm - 1), 'unit length').toBeLessThan(1e-5);
    }
    expect(res.data[2]!.embedding, 'same input, same vector').toEqual(res.data[0]!.embedding);
    expect(res.data[1]!.embedding).not.toEqual(res.data[0]!.embedding);
    expect(res.usage.prompt_tokens).toBe(2 + 1 + 2);
    const floats = await client.embeddings.create({ model: 'sim-model', input: 'alpha', encoding_format: 'float' });
    expect(floats.data[0]!.embedding.map((v) => Math.fround(v))).toEqual(
      res.data[0]!.embedding.map((v) => Math.fround(v)),
    );
  });

  it('refuses an unknown model with 404 in the error shape the client reads', async () => {
    const { client } = await start();
    const err = await client.chat.completions.create({ model: 'gpt-nope', messages }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NotFoundError);
    expect((err as NotFoundError).status).toBe(404);
    expect((err as NotFoundError).param).toBe('model');
    expect((err as NotFoundError).message).toContain('gpt-nope');
  });

  it('refuses malformed bodies with 400: no messages, invalid JSON, a prompt over the context', async () => {
    const { engine, client } = await start({ maxModelLen: 10 });
    const noMessages = await client.chat.completions
      .create({ model: 'sim-model', messages: [] })
      .catch((e: unknown) => e);
    expect(noMessages).toBeInstanceOf(BadRequestError);
    expect((noMessages as BadRequestError).param).toBe('messages');
    const raw = await fetch(`${engine.url}/v1/chat/completions`, { method: 'POST', body: '{not json' });
    expect(raw.status).toBe(400);
    const body = (await raw.json()) as { error: { message: string; type: string; code: number } };
    expect(body.error).toMatchObject({ type: 'BadRequestError', code: 400 });
    const long = await client.completions
      .create({ model: 'sim-model', prompt: 'x'.repeat(44) })
      .catch((e: unknown) => e);
    expect(long, '11 prompt tokens > max-model-len 10').toBeInstanceOf(BadRequestError);
    expect((long as BadRequestError).message).toContain('maximum context length is 10 tokens');
    const tooMany = await client.completions
      .create({ model: 'sim-model', prompt: 'x'.repeat(20), max_tokens: 6 })
      .catch((e: unknown) => e);
    expect(tooMany, '5 prompt + 6 completion > 10').toBeInstanceOf(BadRequestError);
    const fits = await client.completions.create({ model: 'sim-model', prompt: 'x'.repeat(20) });
    expect(fits.usage?.completion_tokens, 'the default 16 is clipped to the context left').toBe(5);
  });

  it('answers anything else with 404 in the error shape', async () => {
    const { engine } = await start();
    const res = await fetch(`${engine.url}/v1/nothing-here`);
    expect(res.status).toBe(404);
    expect(((await res.json()) as { error: { type: string } }).error.type).toBe('NotFoundError');
  });

  it('refuses with 429 and Retry-After beyond max concurrency when overflow is reject', async () => {
    const { engine, client } = await start({ maxConcurrency: 1, overflow: 'reject', ttftMs: 60_000 });
    const holder = new AbortController();
    const first = client.chat.completions
      .create({ model: 'sim-model', messages }, { signal: holder.signal })
      .catch(() => 'aborted');
    await waitFor('the first request to take the only slot', () => engine.stats().running === 1, promptly);
    const err = await client.chat.completions.create({ model: 'sim-model', messages }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RateLimitError);
    expect((err as RateLimitError).headers.get('retry-after')).toBe('1');
    expect(engine.stats().requestsRejected).toBe(1);
    holder.abort();
    expect(await first).toBe('aborted');
  });

  it('queues beyond max concurrency by default and reports running and waiting in vLLM metrics', async () => {
    const { engine, client } = await start({ maxConcurrency: 1, ttftMs: 60_000 });
    const controller = new AbortController();
    const requests = [1, 2].map(() =>
      client.chat.completions.create({ model: 'sim-model', messages }, { signal: controller.signal }).catch(() => null),
    );
    await waitFor(
      'one running, one waiting',
      () => engine.stats().running === 1 && engine.stats().waiting === 1,
      promptly,
    );
    const metrics = await (await fetch(`${engine.url}/metrics`)).text();
    expect(metrics).toContain('vllm:num_requests_running{model_name="sim-model"} 1');
    expect(metrics).toContain('vllm:num_requests_waiting{model_name="sim-model"} 1');
    controller.abort();
    await Promise.all(requests);
    await waitFor('both aborts counted', () => engine.stats().requestsAborted === 2, promptly);
    expect(engine.stats().inFlight, 'an aborted queued request leaves the queue').toBe(0);
  });

  it('fails every request with 500 at error rate 1, and a repeatable share at 0.5', async () => {
    const { client } = await start({ errorRate: 1 });
    const err = await client.chat.completions.create({ model: 'sim-model', messages }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InternalServerError);
    expect((err as InternalServerError).status).toBe(500);
    const outcomes = async (seed: number) => {
      const { engine } = await start({ errorRate: 0.5, seed });
      const statuses: number[] = [];
      for (let i = 0; i < 24; i++) {
        const res = await fetch(`${engine.url}/v1/completions`, {
          method: 'POST',
          body: '{"prompt":"x","max_tokens":1}',
        });
        await res.arrayBuffer();
        statuses.push(res.status);
      }
      return statuses;
    };
    const first = await outcomes(3);
    expect(await outcomes(3), 'same seed, same failures in arrival order').toEqual(first);
    expect(first).toContain(500);
    expect(first).toContain(200);
  });

  it('answers 503 loading on /health until the startup delay has passed on its clock', async () => {
    let nowMs = 0;
    const { engine, client } = await start({ startupDelayMs: 30_000, nowMs: () => nowMs });
    const loading = await fetch(`${engine.url}/health`);
    expect(loading.status).toBe(503);
    expect(await loading.json()).toEqual({ status: 'loading' });
    const early = await client.chat.completions.create({ model: 'sim-model', messages }).catch((e: unknown) => e);
    expect((early as { status?: number }).status, 'inference waits for the model too').toBe(503);
    nowMs = 30_000;
    await waitFor('health to answer 200', async () => (await fetch(`${engine.url}/health`)).status === 200, promptly);
    expect(await chatText(client)).not.toBe('');
  });

  it('counts a client that goes away mid-stream as aborted, and stops generating for it', async () => {
    const { engine, client } = await start({ tokensPerSecond: 50 });
    const stream = await client.chat.completions.create({
      model: 'sim-model',
      messages,
      max_tokens: 10_000,
      stream: true,
    });
    let received = 0;
    for await (const chunk of stream) {
      if (chunk.choices[0]?.delta.content) received++;
      if (received === 2) break; // leaving the loop aborts the request
    }
    await waitFor('the engine to see the abort', () => engine.stats().requestsAborted === 1, promptly);
    const stats = engine.stats();
    expect(stats.running).toBe(0);
    const generated = stats.generatedTokens;
    expect(generated, 'generation stopped long before max_tokens').toBeLessThan(10_000);
    // Generation stays stopped: later traffic (here a health check) sees no more tokens counted.
    await fetch(`${engine.url}/health`);
    expect(engine.stats().generatedTokens).toBe(generated);
  });

  it('paces tokens: the first no sooner than ttftMs, the rest at tokensPerSecond', async () => {
    const { client } = await start({ ttftMs: 100, tokensPerSecond: 100 });
    const startedMs = performance.now();
    const stream = await client.chat.completions.create({ model: 'sim-model', messages, max_tokens: 11, stream: true });
    let firstMs = 0;
    for await (const chunk of stream) if (chunk.choices[0]?.delta.content && firstMs === 0) firstMs = performance.now();
    const totalMs = performance.now() - startedMs;
    // Lower bounds only: a slow machine may be later, never earlier.
    expect(firstMs - startedMs, 'time to first token').toBeGreaterThanOrEqual(95);
    expect(totalMs, 'ttft + 10 intervals of 10 ms').toBeGreaterThanOrEqual(195);
  });

  it('hangs on purpose: /health is accepted and never answered until close', async () => {
    const { engine } = await start({ hang: true });
    let settled = false;
    const pending = fetch(`${engine.url}/health`).then(
      () => (settled = true),
      () => 'cut',
    );
    await waitFor('the request to be held', () => engine.stats().hanging === 1, promptly);
    expect(settled).toBe(false);
    await engine.close({ graceMs: 0 });
    expect(await pending, 'close cuts a held request').toBe('cut');
  });

  it('hangs after N requests when asked: the N-th is served, then even /health hangs', async () => {
    const { engine, client } = await start({ hangAfterRequests: 1 });
    expect(await chatText(client)).not.toBe('');
    const pending = fetch(`${engine.url}/health`).catch(() => 'cut');
    await waitFor('health to be held', () => engine.stats().hanging === 1, promptly);
    await engine.close({ graceMs: 0 });
    expect(await pending).toBe('cut');
  });

  it('crashes after N requests: the engine ends as crashed and refuses connections', async () => {
    const { engine, client } = await start({ crashAfterRequests: 2 });
    await chatText(client);
    await chatText(client);
    expect(await engine.ended).toBe('crashed');
    await expect(fetch(`${engine.url}/health`)).rejects.toThrow();
  });

  it('closes gracefully: a running stream finishes, then the port is closed', async () => {
    const { engine, client } = await start({ tokensPerSecond: 200 });
    const stream = await client.chat.completions.create({ model: 'sim-model', messages, max_tokens: 20, stream: true });
    const iterator = stream[Symbol.asyncIterator]();
    await iterator.next();
    const closing = engine.close({ graceMs: 60_000 });
    let tokens = 0;
    let reason: string | null = null;
    for (let r = await iterator.next(); !r.done; r = await iterator.next()) {
      if (r.value.choices[0]?.delta.content) tokens++;
      reason = r.value.choices[0]?.finish_reason ?? reason;
    }
    await closing;
    expect(reason, 'the stream ran to its end').toBe('length');
    expect(tokens).toBeGreaterThan(0);
    expect(engine.stats().requestsAborted).toBe(0);
    expect(await engine.ended).toBe('closed');
    await expect(fetch(`${engine.url}/health`)).rejects.toThrow();
  });

  // An engine on 0.0.0.0 took requests from anyone who reached its port, skipping keys, limits and accounting (issue 17).
  it("with --api-key, answers /v1/* only to its key in OpenAI's 401 shape, and leaves /health and /metrics open", async () => {
    const { engine, client } = await start({ apiKey: 'engine-secret' });
    await expect(chatText(client), 'no key (the client sends "unused")').rejects.toBeInstanceOf(AuthenticationError);
    const bare = await fetch(`${engine.url}/v1/models`);
    expect(bare.status).toBe(401);
    const body = (await bare.json()) as { error: { message: string; type: string } };
    expect(body.error.message).toMatch(/only with its API key/);
    expect(body.error.message, 'the refusal never shows the key').not.toContain('engine-secret');
    expect((await fetch(`${engine.url}/health`)).status, 'the agent probes without the key').toBe(200);
    expect((await fetch(`${engine.url}/metrics`)).status).toBe(200);
    const keyed = new OpenAI({ baseURL: `${engine.url}/v1`, apiKey: 'engine-secret', maxRetries: 0 });
    expect(await chatText(keyed)).not.toBe('');
    expect(engine.stats().requestsSeen, 'refused requests never reach the model: only the keyed one was seen').toBe(1);
  });

  // Engines spoke plain http only, so prompts crossed the fleet network in clear between router and engine (issue 17).
  it('with --tls-cert/--tls-key, serves https under that certificate and nothing over plain http', async () => {
    const pki = join(mkdtempSync(join(tmpdir(), 'llmgw-sim-tls-')), 'pki');
    await initTls({ dir: pki, controlHosts: [], nodes: [{ name: 'n1', hosts: [] }], days: 1, force: false });
    const { engine } = await start({ tlsCert: join(pki, 'node-n1.pem'), tlsKey: join(pki, 'node-n1-key.pem') });
    expect(engine.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    // A node certificate names the node, never loopback: the client asks for the node's name, as the router checks it.
    const trusting = new Agent({ connect: { ca: readFileSync(join(pki, 'ca.pem')), servername: 'n1' } });
    try {
      const res = await request(`${engine.url}/v1/chat/completions`, {
        method: 'POST',
        dispatcher: trusting,
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'sim-model', messages, max_tokens: 3 }),
      });
      expect(res.statusCode).toBe(200);
      expect(((await res.body.json()) as { choices: unknown[] }).choices).toHaveLength(1);
      await expect(
        request(engine.url.replace('https:', 'http:') + '/health'),
        'plain http gets no answer',
      ).rejects.toThrow();
      await expect(
        request(`${engine.url}/health`),
        'a client that does not trust the CA refuses the engine',
      ).rejects.toThrow(/certificate|self.signed|issuer/i);
    } finally {
      await trusting.close();
    }
    await expect(
      startSimEngine({ tlsCert: join(pki, 'node-n1.pem') }),
      'a certificate without its key',
    ).rejects.toThrow(/tlsCert: is set without tlsKey/);
  });

  it('imitates llama.cpp and SGLang metric names when its flavor says so', async () => {
    const llama = await start({ flavor: 'llamacpp' });
    const llamaMetrics = await (await fetch(`${llama.engine.url}/metrics`)).text();
    expect(llamaMetrics).toContain('llamacpp:requests_processing 0');
    expect(await (await fetch(`${llama.engine.url}/health`)).json()).toEqual({ status: 'ok' });
    const sglang = await start({ flavor: 'sglang' });
    expect(await (await fetch(`${sglang.engine.url}/metrics`)).text()).toContain(
      'sglang:num_queue_reqs{model_name="sim-model"} 0',
    );
  });
});
