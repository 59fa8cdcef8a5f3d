// The sim's pass-through endpoints over HTTP, as the router and its tests
// reach them: vLLM's shapes, deterministic answers, and token counts that
// agree with the usage chat reports for the same text.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimEngine, type SimEngine } from './index.js';

let engine: SimEngine;
beforeAll(async () => {
  engine = await startSimEngine({ models: ['m', 'm-alias'], shutdownGraceMs: 0 });
});
afterAll(async () => {
  await engine.close({ graceMs: 0 });
});

async function post(path: string, body: unknown): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await fetch(`${engine.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
}

describe('the sim engine beside generation', () => {
  it('tokenizes as it counts prompts, and detokenizes back to the text', async () => {
    const text = 'The quick brown fox — jumps over 🦊 the lazy dog.';
    const tok = await post('/tokenize', { model: 'm', prompt: text, return_token_strs: true });
    expect(tok.status).toBe(200);
    const tokens = tok.json.tokens as number[];
    expect(tok.json.count).toBe(tokens.length);
    expect((tok.json.token_strs as string[]).join(''), 'each token is its piece of the text').toBe(text);
    const chat = await post('/v1/chat/completions', {
      model: 'm',
      messages: [{ role: 'user', content: text }],
      max_tokens: 1,
    });
    expect(
      (chat.json.usage as { prompt_tokens: number }).prompt_tokens,
      "the count is chat's prompt_tokens for the same text",
    ).toBe(tokens.length);
    const messages = await post('/tokenize', {
      model: 'm-alias',
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: [{ type: 'text', text }] },
      ],
    });
    const chat2 = await post('/v1/chat/completions', {
      model: 'm',
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: text },
      ],
      max_tokens: 1,
    });
    expect(messages.json.count, 'chat messages counted as chat counts them').toBe(
      (chat2.json.usage as { prompt_tokens: number }).prompt_tokens,
    );
    expect(await post('/detokenize', { model: 'm', tokens })).toEqual({ status: 200, json: { prompt: text } });
    expect(
      (await post('/tokenize', { model: 'm', content: 'abcdefgh' })).json,
      "llama.cpp's shape for its field",
    ).toEqual({ tokens: expect.any(Array) });
    const badId = await post('/detokenize', { model: 'm', tokens: [-1] });
    expect(badId.status).toBe(400);
    expect((badId.json.error as { message: string }).message).toContain(
      'tokens[0]: -1 is no token id this engine issued',
    );
  });

  it('reranks and scores deterministically, with usage', async () => {
    const documents = ['rivers run to the sea', 'a recipe for bread', 'the sea is salt'];
    const first = await post('/v1/rerank', { model: 'm', query: 'sea', documents, top_n: 2 });
    expect(first.status).toBe(200);
    const results = first.json.results as { index: number; relevance_score: number; document: { text: string } }[];
    expect(results).toHaveLength(2);
    expect(results[0]!.relevance_score).toBeGreaterThanOrEqual(results[1]!.relevance_score);
    expect(results[0]!.document.text).toBe(documents[results[0]!.index]);
    expect(
      (await post('/rerank', { model: 'm', query: 'sea', documents, top_n: 2 })).json.results,
      'the same answer on every path, every time',
    ).toEqual(results);
    expect(first.json.usage).toEqual({
      total_tokens: documents.reduce((n, d) => n + Math.ceil(('sea'.length + d.length) / 4), 0),
    });
    const score = await post('/v1/score', { model: 'm', text_1: 'sea', text_2: documents });
    const scores = (score.json.data as { index: number; score: number }[]).map((d) => d.score);
    expect(scores).toHaveLength(3);
    expect(scores[results[0]!.index], 'a pair scores the same in rerank and score').toBe(results[0]!.relevance_score);
    expect(score.json.usage).toMatchObject({
      prompt_tokens: (first.json.usage as { total_tokens: number }).total_tokens,
      completion_tokens: 0,
    });
    const bad = await post('/v1/rerank', { model: 'm', documents });
    expect([bad.status, (bad.json.error as { message: string }).message]).toEqual([
      400,
      'query: is required, a string',
    ]);
  });

  it('hears an uploaded file by its size, name and bytes, in json or text', async () => {
    const audio = new Uint8Array(40_000).map((_, i) => i % 251);
    const form = new FormData();
    form.append('model', 'm');
    form.append('file', new Blob([audio]), 'talk.wav');
    const res = await fetch(`${engine.url}/v1/audio/transcriptions`, { method: 'POST', body: form });
    expect(res.status).toBe(200);
    const json = (await res.json()) as { text: string; usage: unknown };
    expect(json.text).toMatch(/^heard 40000 bytes of talk\.wav \(fnv1a [0-9a-f]{8}\)$/);
    expect(json.usage).toEqual({ type: 'duration', seconds: 2 });
    form.set('response_format', 'text');
    const text = await fetch(`${engine.url}/v1/audio/transcriptions`, { method: 'POST', body: form });
    expect(text.headers.get('content-type')).toMatch(/^text\/plain/);
    expect(await text.text()).toBe(json.text);
    const noFile = new FormData();
    noFile.append('model', 'm');
    const refused = await fetch(`${engine.url}/v1/audio/transcriptions`, { method: 'POST', body: noFile });
    expect(refused.status).toBe(400);
  });
});
