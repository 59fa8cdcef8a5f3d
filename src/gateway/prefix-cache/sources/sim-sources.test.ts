// The sources end to end against real sim engines with a simulated KV cache:
// the vLLM-flavoured sim publishing over ZeroMQ (read by the zmq source and
// its decoder), and the HTTP stream the builtin-like engines serve. What a
// source reports must be what the engine's /tokenize gives for the prompt,
// so the index can key a request's prefix the same way.
import { afterEach, describe, expect, it } from 'vitest';
import type { KvEventBatch } from '../../../protocol/kv-events.js';
import { startSimEngine, type SimEngine } from '../../../engine/sim/index.js';
import { waitFor } from '../../../../test/support/wait.js';
import { openKvSource, type KvSource, type KvSourceStatus } from './index.js';

const engines: SimEngine[] = [];
const sources: KvSource[] = [];
afterEach(async () => {
  await Promise.all(sources.splice(0).map((s) => s.close()));
  await Promise.all(engines.splice(0).map((e) => e.close({ graceMs: 0 })));
});

const SYSTEM = 'You are a careful assistant who answers in short sentences. '.repeat(4);

async function chat(engine: SimEngine, text: string, key?: string): Promise<void> {
  const res = await fetch(`${engine.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) },
    body: JSON.stringify({
      messages: [
        { role: 'system', content: SYSTEM },
        { role: 'user', content: text },
      ],
    }),
  });
  expect(res.status).toBe(200);
  await res.text();
}

async function tokenize(engine: SimEngine, text: string): Promise<number[]> {
  const res = await fetch(`${engine.url}/tokenize`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ prompt: text }),
  });
  return ((await res.json()) as { tokens: number[] }).tokens;
}

const storedTokens = (batches: KvEventBatch[]) =>
  batches.flatMap((b) => b.events.flatMap((e) => (e.kind === 'stored' ? e.blocks.flatMap((x) => x.tokens) : [])));

describe('KV event sources on sim engines', () => {
  it("reads a vLLM-flavoured sim's ZeroMQ events, replaying what it published before the subscription took", async () => {
    const engine = await startSimEngine({
      kvCacheBlocks: 256,
      kvBlockSize: 4,
      kvEventsEndpoint: 'tcp://127.0.0.1:*',
      kvEventsReplayEndpoint: 'tcp://127.0.0.1:*',
    });
    engines.push(engine);
    expect(engine.kvEvents?.endpoint).toMatch(/^tcp:\/\/127\.0\.0\.1:\d+$/);
    // Published before anyone listens: only the replay can bring it back.
    await chat(engine, 'first question');
    const batches: KvEventBatch[] = [];
    const source = openKvSource(
      { id: 'sim-1', endpoint: engine.url, kvEvents: { kind: 'zmq', ...engine.kvEvents! } },
      { onBatch: (b) => batches.push(b) },
    );
    sources.push(source);
    let n = 0;
    // Each probe stores a new tail; the first one that arrives makes the source replay from 0.
    await waitFor(
      'events from the sim',
      async () => {
        await chat(engine, `probe ${n++}: a question long enough to fill a whole block or two`);
        return batches.length >= 2;
      },
      { timeoutMs: 15_000, intervalMs: 200 },
    );
    expect(batches[0]!.seq, 'replayed from the first batch').toBe(0);
    expect(batches[0]!.events[0]).toEqual({ kind: 'cleared' });
    expect(batches[0]!.blockSize).toBe(4);
    const text = `${SYSTEM}first question`;
    const tokens = await tokenize(engine, text);
    const whole = tokens.slice(0, Math.floor(tokens.length / 4) * 4);
    expect(storedTokens([batches[0]!]), "the first prompt's whole blocks, as /tokenize gives them").toEqual(whole);

    await chat(engine, 'first question');
    const stats = engine.stats();
    expect(stats.prefixCacheHits, 'the repeated prompt is served from the cache').toBeGreaterThanOrEqual(
      whole.length - 1,
    );
    const metrics = await (await fetch(`${engine.url}/metrics`)).text();
    expect(metrics).toMatch(/^vllm:prefix_cache_hits_total\{model_name="sim"\} [1-9]\d*$/m);
    expect(metrics).toMatch(/^vllm:prefix_cache_queries_total\{model_name="sim"\} [1-9]\d*$/m);
  });

  it("reads the HTTP stream with the engine's key: a snapshot first, then each change", async () => {
    const engine = await startSimEngine({ kvCacheBlocks: 64, kvBlockSize: 8, apiKey: 'k1', flavor: 'llamacpp' });
    engines.push(engine);
    await chat(engine, 'before anyone listens', 'k1');
    const batches: KvEventBatch[] = [];
    const source = openKvSource(
      { id: 'sim-2', endpoint: engine.url, engineSecret: 'k1', kvEvents: { kind: 'http', path: '/kv-events' } },
      { onBatch: (b) => batches.push(b) },
    );
    sources.push(source);
    await waitFor('the snapshot', () => batches.length >= 1, 10_000);
    expect(batches[0]!.events[0]).toEqual({ kind: 'cleared' });
    expect(storedTokens([batches[0]!]).length, 'the snapshot holds the earlier prompt').toBeGreaterThan(0);
    await chat(engine, 'a new question', 'k1');
    await waitFor('the change', () => batches.length >= 2, 10_000);
    expect(batches[1]!.seq).toBe(batches[0]!.seq + 1);
    expect(batches[1]!.events[0]?.kind).toBe('stored');
  });

  it('is refused without the key, and says so while it retries', async () => {
    const engine = await startSimEngine({ kvCacheBlocks: 64, apiKey: 'k1' });
    engines.push(engine);
    const statuses: KvSourceStatus[] = [];
    const batches: KvEventBatch[] = [];
    sources.push(
      openKvSource(
        { id: 'sim-3', endpoint: engine.url, kvEvents: { kind: 'http', path: '/kv-events' } },
        { onBatch: (b) => batches.push(b), onStatus: (s) => statuses.push(s), retryMs: 50 },
      ),
    );
    const down = await waitFor('a refusal', () => statuses.find((s) => s.kind === 'down'), 10_000);
    expect(down).toMatchObject({ detail: expect.stringMatching(/answered 401/) });
    expect(batches).toEqual([]);
  });

  it('serves no stream and no cache metrics when the cache is off (the default)', async () => {
    const engine = await startSimEngine({});
    engines.push(engine);
    expect((await fetch(`${engine.url}/kv-events`)).status).toBe(404);
    expect(await (await fetch(`${engine.url}/metrics`)).text()).not.toMatch(/prefix_cache/);
    expect(engine.kvEvents).toBeUndefined();
  });
});
