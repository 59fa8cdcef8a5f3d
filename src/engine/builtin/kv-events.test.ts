// The builtin engine telling what its KV cache holds, read by the gateway's
// own http source as a router would. Guards against the published blocks
// drifting from what the sequences really hold (other token ids than the
// engine's /tokenize, a prefix reused by the engine but told as removed),
// against a stream that asks no key while it shows prompts, and against a
// wire the gateway cannot read.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeTinyModel } from '../../dev/make-model/index.js';
import { openKvSource, type KvSource } from '../../gateway/prefix-cache/sources/index.js';
import type { KvBlock, KvEvent, KvEventBatch } from '../../protocol/kv-events.js';
import { waitFor } from '../../../test/support/wait.js';
import { startBuiltinEngine, type BuiltinEngine } from './server.js';

const MODEL = 'tiny';
const KEY = 'engine-secret';
/** Long enough to fill several 16-token blocks on its own, so two chats sharing it share whole blocks. */
const SYSTEM = `You answer questions about the ${'grey heron and the little egret, '.repeat(8)}and nothing else.`;

let dir: string;
let engine: BuiltinEngine;
let client: OpenAI;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'llmgw-builtin-kv-'));
  const modelPath = join(dir, 'tiny.gguf');
  await makeTinyModel(modelPath, { contextLength: 2048 });
  engine = await startBuiltinEngine({
    modelPath,
    aliases: [MODEL],
    threads: 1,
    parallel: 2,
    contextTokens: 2048,
    apiKey: KEY,
    log: () => undefined,
  });
  await engine.ready;
  client = new OpenAI({ baseURL: `${engine.url}/v1`, apiKey: KEY, maxRetries: 0 });
});

afterAll(async () => {
  await engine?.close();
  await rm(dir, { recursive: true, force: true });
});

type Messages = { role: 'system' | 'user'; content: string }[];

async function tokenize(messages: Messages): Promise<number[]> {
  const res = await fetch(`${engine.url}/tokenize`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${KEY}` },
    body: JSON.stringify({ model: MODEL, messages }),
  });
  expect(res.status).toBe(200);
  return ((await res.json()) as { tokens: number[] }).tokens;
}

async function chat(messages: Messages): Promise<void> {
  await client.chat.completions.create({ model: MODEL, messages, max_tokens: 4, temperature: 0 });
}

function commonPrefix(a: readonly number[], b: readonly number[]): number {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return i;
}

const stored = (events: readonly KvEvent[]) =>
  events.filter((e): e is Extract<KvEvent, { kind: 'stored' }> => e.kind === 'stored');

describe("the builtin engine's KV events", () => {
  it('asks the engine key, as /v1 does', async () => {
    const res = await fetch(`${engine.url}/kv-events`);
    expect(res.status).toBe(401);
    await res.body?.cancel();
  });

  it("publishes each sequence's blocks as its requests leave them, with the token ids of /tokenize", async () => {
    const batches: KvEventBatch[] = [];
    const sources: KvSource[] = [];
    const read = (into: KvEventBatch[]) =>
      openKvSource(
        { id: 'b1', endpoint: engine.url, engineSecret: KEY, kvEvents: { kind: 'http', path: '/kv-events' } },
        { onBatch: (b) => into.push(b), retryMs: 50 },
      );
    try {
      sources.push(read(batches));
      await waitFor('the snapshot', () => batches.length >= 1, 30_000);
      expect(batches[0]!.events, 'nothing cached yet').toEqual([{ kind: 'cleared' }]);
      expect(batches[0]!.blockSize).toBe(16);

      const first: Messages = [
        { role: 'system', content: SYSTEM },
        { role: 'user', content: 'Where does the heron nest?' },
      ];
      const second: Messages = [
        { role: 'system', content: SYSTEM },
        { role: 'user', content: 'What do egrets eat in winter?' },
      ];
      const [p1, p2] = [await tokenize(first), await tokenize(second)];
      const shared = commonPrefix(p1, p2);
      expect(shared, 'the two prompts share at least three whole blocks').toBeGreaterThanOrEqual(48);

      await chat(first);
      await waitFor('the first request', () => batches.length >= 2, 30_000);
      expect(batches[1]!.events.map((e) => e.kind)).toEqual(['stored']);
      const run1 = stored(batches[1]!.events)[0]!;
      expect(run1.parent, 'a first run starts a prompt').toBeUndefined();
      const whole = Math.floor(p1.length / 16);
      expect(run1.blocks.length, 'the prompt and the reply, in whole blocks').toBeGreaterThanOrEqual(whole);
      expect(run1.blocks.flatMap((b) => b.tokens).slice(0, whole * 16)).toEqual(p1.slice(0, whole * 16));
      expect(run1.blocks.every((b) => b.tokens.length === 16)).toBe(true);

      // The second chat finds the first one's sequence holding its system prompt: the shared blocks stay.
      await chat(second);
      await waitFor('the second request', () => batches.length >= 3, 30_000);
      const kept = Math.floor(shared / 16);
      const next = batches[2]!;
      expect(next.seq).toBe(batches[1]!.seq + 1);
      expect(next.events.map((e) => e.kind)).toEqual(['removed', 'stored']);
      expect(next.events[0]).toEqual({ kind: 'removed', hashes: run1.blocks.slice(kept).map((b) => b.hash) });
      const run2 = stored(next.events)[0]!;
      expect(run2.parent, 'chained to the last shared block').toBe(run1.blocks[kept - 1]!.hash);
      const held: KvBlock[] = [...run1.blocks.slice(0, kept), ...run2.blocks];
      const whole2 = Math.floor(p2.length / 16);
      expect(held.flatMap((b) => b.tokens).slice(0, whole2 * 16)).toEqual(p2.slice(0, whole2 * 16));

      // A prompt sharing nothing goes to the other sequence: its blocks are its own, the first sequence's stay.
      await chat([{ role: 'user', content: 'Unrelated.' }]);
      await waitFor('the third request', () => batches.length >= 4, 30_000);
      expect(batches[3]!.events.map((e) => e.kind)).toEqual(['stored']);
      const run3 = stored(batches[3]!.events)[0]!;
      const ids = new Set(held.map((b) => b.hash));
      expect(run3.blocks.some((b) => ids.has(b.hash))).toBe(false);

      // A reader joining now is told everything held, numbered as the last batch sent.
      const late: KvEventBatch[] = [];
      sources.push(read(late));
      await waitFor('the late snapshot', () => late.length >= 1, 30_000);
      expect(late[0]!.seq).toBe(batches[3]!.seq);
      expect(late[0]!.events[0]).toEqual({ kind: 'cleared' });
      const snapshot = stored(late[0]!.events).flatMap((e) => e.blocks);
      expect(new Set(snapshot.map((b) => b.hash))).toEqual(new Set([...held, ...run3.blocks].map((b) => b.hash)));
    } finally {
      await Promise.all(sources.map((s) => s.close()));
    }
  }, 120_000);

  // Guards against a reader holding the engine open: its stream never ends by itself.
  it('ends its streams when the engine stops', async () => {
    const res = await fetch(`${engine.url}/kv-events`, { headers: { authorization: `Bearer ${KEY}` } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/x-ndjson');
    const reader = res.body!.getReader();
    const first = await reader.read();
    expect(new TextDecoder().decode(first.value)).toMatch(/"events":\[\{"kind":"cleared"\}/);
    await engine.close();
    let ended = false;
    while (!ended) ended = (await reader.read()).done;
    expect(ended).toBe(true);
  }, 60_000);
});
