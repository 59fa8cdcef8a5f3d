// Parallel decoding on the generated GGUF: one context of four sequences,
// driven by the official OpenAI client. Sequences are held busy through the
// runtime itself, so what queues, what is refused and what drains is decided
// by the engine's counters, never by how fast the model happens to run.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeTinyModel } from '../../dev/make-model/index.js';
import { BuiltinRuntime } from './llama-runtime.js';
import { startBuiltinEngine, type BuiltinEngine } from './server.js';
import { waitFor } from '../../../test/support/wait.js';

const promptly = { timeoutMs: 30_000, intervalMs: 10 };
const MODEL = 'tiny';
const PARALLEL = 4;
const MAX_QUEUE = 8;

let dir: string;
let engine: BuiltinEngine;
let runtime: BuiltinRuntime;
let client: OpenAI;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'llmgw-builtin-parallel-'));
  const modelPath = join(dir, 'tiny.gguf');
  await makeTinyModel(modelPath, { contextLength: 1024 });
  engine = await startBuiltinEngine(
    {
      modelPath,
      aliases: [MODEL],
      threads: 1,
      parallel: PARALLEL,
      maxQueue: MAX_QUEUE,
      contextTokens: PARALLEL * 1024,
      log: () => undefined,
    },
    { loadRuntime: async (options, facts) => (runtime = await BuiltinRuntime.load(options, facts)) },
  );
  await engine.ready;
  client = new OpenAI({ baseURL: `${engine.url}/v1`, apiKey: 'unused', maxRetries: 0 });
});

afterAll(async () => {
  await engine?.close();
  await rm(dir, { recursive: true, force: true });
});

/** The engine's /metrics as name → value, labels dropped. */
async function metrics(): Promise<Record<string, number>> {
  const text = await (await fetch(`${engine.url}/metrics`)).text();
  const out: Record<string, number> = {};
  for (const line of text.split('\n')) {
    const m = /^([a-z_:]+)(?:\{[^}]*\})? (\S+)$/.exec(line);
    if (m) out[m[1]!] = Number(m[2]);
  }
  return out;
}

/** Holds `n` sequences busy until the returned function is called. */
async function holdSequences(n: number): Promise<() => Promise<void>> {
  let open: () => void = () => undefined;
  const gate = new Promise<void>((resolve) => {
    open = resolve;
  });
  const before = engine.stats().requestsInFlight;
  const held = Array.from({ length: n }, () => runtime.withSequence(new AbortController().signal, [], () => gate));
  await waitFor(`${n} sequences held`, () => engine.stats().requestsInFlight === before + n, promptly);
  return async () => {
    open();
    await Promise.all(held);
  };
}

const ask = (content: string) =>
  client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content }], max_tokens: 6 });

describe('builtin engine, parallel decoding', () => {
  it('reports its sequences in /health and its load in vLLM and llama.cpp names', async () => {
    expect(await (await fetch(`${engine.url}/health`)).json()).toMatchObject({ status: 'ok', sequences: PARALLEL });
    const res = await fetch(`${engine.url}/metrics`);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
    const text = await res.text();
    expect(text).toContain(`vllm:num_requests_running{model_name="${MODEL}"} 0`);
    for (const name of [
      'vllm:num_requests_waiting',
      'vllm:kv_cache_usage_perc',
      'vllm:prompt_tokens_total',
      'vllm:generation_tokens_total',
      'llamacpp:requests_processing',
      'llamacpp:requests_deferred',
      'llamacpp:prompt_tokens_total',
      'llamacpp:tokens_predicted_total',
    ]) {
      expect(text, name).toMatch(new RegExp(`^# TYPE ${name} (gauge|counter)$`, 'm'));
    }
  });

  it('serves 8 concurrent requests on 4 sequences: all succeed, and the token counters add them up', async () => {
    const before = await metrics();
    const replies = await Promise.all(Array.from({ length: 8 }, (_, i) => ask(`Request ${i}.`)));
    for (const reply of replies) {
      expect(reply.choices[0]!.message.content, 'each reply has text').toEqual(expect.any(String));
      expect(reply.usage!.completion_tokens).toBeGreaterThan(0);
    }
    const after = await metrics();
    const generated = replies.reduce((sum, r) => sum + r.usage!.completion_tokens, 0);
    const prompted = replies.reduce((sum, r) => sum + r.usage!.prompt_tokens, 0);
    expect(after['vllm:generation_tokens_total']! - before['vllm:generation_tokens_total']!).toBe(generated);
    expect(after['llamacpp:tokens_predicted_total']! - before['llamacpp:tokens_predicted_total']!).toBe(generated);
    expect(after['vllm:prompt_tokens_total']! - before['vllm:prompt_tokens_total']!).toBe(prompted);
    expect(after).toMatchObject({
      'vllm:num_requests_running': 0,
      'vllm:num_requests_waiting': 0,
      'vllm:kv_cache_usage_perc': 0,
    });
  });

  it('queues requests while every sequence is busy, refuses the one past --max-queue with 429 and Retry-After, then drains', async () => {
    const release = await holdSequences(PARALLEL);
    const queued = Array.from({ length: MAX_QUEUE }, (_, i) => ask(`Queued ${i}.`));
    await waitFor(
      'the requests wait for a sequence',
      async () => (await metrics())['vllm:num_requests_waiting'] === MAX_QUEUE,
      promptly,
    );
    expect(await metrics()).toMatchObject({
      'vllm:num_requests_running': PARALLEL,
      'llamacpp:requests_deferred': MAX_QUEUE,
    });

    const refused = await fetch(`${engine.url}/v1/chat/completions`, {
      method: 'POST',
      body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'One too many.' }], max_tokens: 6 }),
    });
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBe('1');
    expect(await refused.json()).toMatchObject({
      error: {
        type: 'rate_limit_error',
        llmgw_code: 'LLMGW_ENGINE_BUSY',
        message: expect.stringContaining('--max-queue 8'),
      },
    });
    await expect(ask('Through the SDK.')).rejects.toMatchObject({
      status: 429,
      error: { llmgw_code: 'LLMGW_ENGINE_BUSY' },
    });
    expect((await metrics())['llmgw_engine_requests_refused_busy_total']).toBeGreaterThanOrEqual(2);

    await release();
    const replies = await Promise.all(queued);
    expect(
      replies.map((r) => r.choices[0]!.finish_reason === 'length' || r.choices[0]!.finish_reason === 'stop'),
    ).toEqual(Array(MAX_QUEUE).fill(true));
    expect(await metrics()).toMatchObject({ 'vllm:num_requests_running': 0, 'vllm:num_requests_waiting': 0 });
  });

  it("frees an aborted request's sequence at once, for the request waiting on it", async () => {
    const release = await holdSequences(PARALLEL - 1);
    try {
      const gone = new AbortController();
      const long = await client.chat.completions.create(
        { model: MODEL, messages: [{ role: 'user', content: 'Talk for a long time.' }], max_tokens: 900, stream: true },
        { signal: gone.signal },
      );
      await long[Symbol.asyncIterator]().next();
      expect((await metrics())['vllm:kv_cache_usage_perc'], 'the generating request holds KV cells').toBeGreaterThan(0);
      const next = ask('Me next.');
      await waitFor(
        'the next request waits for the last sequence',
        () => engine.stats().requestsWaiting === 1,
        promptly,
      );
      const abortedBefore = engine.stats().requestsAborted;
      gone.abort();
      const reply = await next;
      expect(reply.usage!.completion_tokens, 'served while the other three sequences are still held').toBeGreaterThan(
        0,
      );
      expect(engine.stats()).toMatchObject({
        requestsAborted: abortedBefore + 1,
        requestsInFlight: PARALLEL - 1,
        requestsWaiting: 0,
      });
    } finally {
      await release();
    }
  });

  it('gives a prompt back the sequence that holds its history, so llama.cpp reuses it, and others a sequence used least recently', async () => {
    const first = 'Tell me about the first topic, in great and careful detail please.';
    const second = 'Something else entirely: what is the weather like today where you are?';
    await client.completions.create({ model: MODEL, prompt: first, max_tokens: 4, temperature: 0 });
    await client.completions.create({ model: MODEL, prompt: second, max_tokens: 4, temperature: 0 });
    for (const prompt of [first, second]) {
      const tokens = runtime.textTokens(prompt, true);
      const held = await runtime.withSequence(new AbortController().signal, tokens, async (sequence) =>
        sequence.contextTokens.slice(0, tokens.length),
      );
      expect(held, `the sequence handed to a repeat of "${prompt.slice(0, 20)}…" still holds it`).toEqual(tokens);
    }
  });
});
