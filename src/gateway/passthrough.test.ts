// The pass-through endpoints (rerank, score, audio transcriptions, tokenize,
// detokenize) through a real router on loopback: answers relayed from the
// sim engine, the same key checks and limits as chat, usage per endpoint,
// a model that does not serve an endpoint refused by name, and an upload's
// bytes reaching the engine exactly as the client sent them.
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { toFile } from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import type { Model } from '../control/catalog/index.js';
import type { RouterDeps, RouterReplica } from './index.js';
import { waitFor } from '../../test/support/wait.js';
import { cleanups, closeAll, harness as routerHarness, model, simReplica } from '../../test/support/gateway-router.js';

afterEach(closeAll);

/** The shared harness with `ready` as the directory, and post as plain fetch with its key unless `headers` say otherwise. */
async function harness(models: Model[], ready: Record<string, RouterReplica[]>, overrides: Partial<RouterDeps> = {}) {
  const h = await routerHarness(models, overrides, ready);
  const post = async (
    path: string,
    body: unknown,
    headers: Record<string, string> = { authorization: `Bearer ${h.secret}` },
  ) => {
    const res = await fetch(`${h.url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
    });
    return {
      status: res.status,
      json: (await res.json()) as Record<string, unknown> & {
        error?: { message: string; code: string; llmgw_code: string };
      },
    };
  };
  return { ...h, post };
}

/** An engine stand-in that keeps every request's path, headers and bytes, and answers a transcription. */
async function recorder(): Promise<{
  replica: RouterReplica;
  seen: { path: string; contentType: string | undefined; body: Buffer }[];
}> {
  const seen: { path: string; contentType: string | undefined; body: Buffer }[] = [];
  const server = createServer((req: IncomingMessage, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      seen.push({ path: req.url ?? '', contentType: req.headers['content-type'], body: Buffer.concat(chunks) });
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"text":"recorded"}');
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
  return { replica: { id: `rec-${port}`, endpoint: `http://127.0.0.1:${port}`, draining: false }, seen };
}

/** A form as a client sends it: its bytes and its content type with the boundary. */
async function formBytes(parts: [string, string | Blob, string?][]): Promise<{ body: Buffer; type: string }> {
  const f = new FormData();
  for (const [name, value, filename] of parts) {
    if (typeof value === 'string') f.append(name, value);
    else f.append(name, value, filename);
  }
  const req = new Request('http://x/', { method: 'POST', body: f });
  return { body: Buffer.from(await req.arrayBuffer()), type: req.headers.get('content-type')! };
}

describe('pass-through endpoints', () => {
  it('relays rerank (on all three paths), score, tokenize and detokenize, and counts each apart', async () => {
    const m = model({ name: 'ranker', aliases: ['rr'] });
    const h = await harness([m], { ranker: [await simReplica(m)] });
    const documents = ['rivers run to the sea', 'a recipe for bread'];
    const rerank = await h.post('/v1/rerank', { model: 'rr', query: 'sea', documents });
    expect(rerank.status, JSON.stringify(rerank.json)).toBe(200);
    const total = (rerank.json.usage as { total_tokens: number }).total_tokens;
    expect(total).toBeGreaterThan(0);
    for (const path of ['/rerank', '/v2/rerank']) {
      const again = await h.post(path, { model: 'ranker', query: 'sea', documents });
      expect(again.json.results, `${path}: the engine's same answer`).toEqual(rerank.json.results);
    }
    const score = await h.post('/v1/score', { model: 'ranker', text_1: 'sea', text_2: documents });
    expect(score.status).toBe(200);
    expect(score.json.data).toHaveLength(2);
    const tok = await h.post('/tokenize', { model: 'ranker', prompt: 'hello there, rivers' });
    expect(tok.status).toBe(200);
    expect(tok.json.count).toBe(5);
    const detok = await h.post('/detokenize', { model: 'ranker', tokens: tok.json.tokens });
    expect(detok.json).toEqual({ prompt: 'hello there, rivers' });

    const counted = () => Object.fromEntries(h.usage.snapshot().map((u) => [u.endpoint, u]));
    await waitFor('usage of every endpoint', () => Object.keys(counted()).length === 4);
    const rows = counted();
    expect(Object.fromEntries(Object.entries(rows).map(([e, u]) => [e, u.requests])), 'one row per endpoint').toEqual({
      rerank: 3,
      score: 1,
      tokenize: 1,
      detokenize: 1,
    });
    expect(rows.rerank!.promptTokens, "rerank's total_tokens, counted as prompt").toBe(3 * total);
    expect(rows.score!.promptTokens, "score's prompt_tokens").toBe(
      (score.json.usage as { prompt_tokens: number }).prompt_tokens,
    );
    expect(rows.tokenize!.promptTokens, 'tokenizing costs no tokens').toBe(0);
  });

  it('refuses an endpoint the model does not serve, naming what it serves, before any engine is asked', async () => {
    const chatOnly = model({ name: 'chatty', endpoints: ['chat', 'completions'] });
    const rec = await recorder();
    const h = await harness([chatOnly], { chatty: [rec.replica] });
    for (const [path, body] of [
      ['/v1/rerank', { model: 'chatty', query: 'q', documents: ['d'] }],
      ['/tokenize', { model: 'chatty', prompt: 'p' }],
      ['/v1/embeddings', { model: 'chatty', input: 'x' }],
    ] as const) {
      const r = await h.post(path, body);
      expect(r.status, path).toBe(400);
      expect(r.json.error?.llmgw_code).toBe('LLMGW_ENDPOINT_NOT_SERVED');
      expect(r.json.error?.message, path).toContain(`model \`chatty\` does not serve`);
      expect(r.json.error?.message, path).toContain('it serves chat, completions');
    }
    const form = await formBytes([
      ['model', 'chatty'],
      ['file', new Blob(['x']), 'a.wav'],
    ]);
    const audio = await fetch(`${h.url}/v1/audio/transcriptions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${h.secret}`, 'content-type': form.type },
      body: new Uint8Array(form.body),
    });
    expect(audio.status).toBe(400);
    expect(((await audio.json()) as { error: { message: string } }).error.message).toContain(
      'does not serve transcriptions (POST /v1/audio/transcriptions)',
    );
    expect(rec.seen, 'no engine was asked').toEqual([]);
  });

  it('retries a dead replica before the first byte, and falls back only to a model that serves the endpoint', async () => {
    const dead = createServer();
    await new Promise<void>((resolve) => dead.listen(0, '127.0.0.1', resolve));
    const deadUrl = `http://127.0.0.1:${(dead.address() as AddressInfo).port}`;
    await new Promise<void>((resolve) => dead.close(() => resolve()));
    const primary = model({ name: 'primary', fallbacks: ['chatonly', 'backup'] });
    const chatOnly = model({ name: 'chatonly', endpoints: ['chat'] });
    const backup = model({ name: 'backup' });
    const rec = await recorder();
    const h = await harness([primary, chatOnly, backup], {
      primary: [{ id: 'dead', endpoint: deadUrl, draining: false }],
      chatonly: [rec.replica],
      backup: [await simReplica(backup)],
    });
    const r = await h.post('/v1/rerank', { model: 'primary', query: 'q', documents: ['a', 'b'] });
    expect(r.status, JSON.stringify(r.json)).toBe(200);
    expect(r.json.model, 'the fallback that reranks answered').toBe('backup');
    expect(rec.seen, 'the chat-only fallback was skipped').toEqual([]);
  });

  it('asks for a key on every pass-through path', async () => {
    const m = model({ name: 'm' });
    const h = await harness([m], { m: [await simReplica(m)] });
    for (const path of ['/v1/rerank', '/rerank', '/v2/rerank', '/v1/score', '/tokenize', '/detokenize']) {
      const r = await h.post(path, { model: 'm' }, {});
      expect(r.status, path).toBe(401);
      expect(r.json.error?.code, path).toBe('invalid_api_key');
    }
    const form = await formBytes([
      ['model', 'm'],
      ['file', new Blob(['x']), 'a.wav'],
    ]);
    const audio = await fetch(`${h.url}/v1/audio/transcriptions`, {
      method: 'POST',
      headers: { 'content-type': form.type },
      body: new Uint8Array(form.body),
    });
    expect(audio.status).toBe(401);
  });

  it('sends an upload on byte for byte, with its boundary, and only its model field changed when the engine serves another name', async () => {
    const m = model({ name: 'whisper', aliases: ['asr'] });
    const rec = await recorder();
    const h = await harness([m], { whisper: [{ ...rec.replica, servedNames: ['whisper'] }] });
    const audio = new Uint8Array(50_000).map((_, i) => (i * 7) % 256);
    const form = await formBytes([
      ['file', new Blob([audio]), 'talk.wav'],
      ['model', 'whisper'],
      ['language', 'en'],
    ]);
    const sent = await fetch(`${h.url}/v1/audio/transcriptions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${h.secret}`, 'content-type': form.type },
      body: new Uint8Array(form.body),
    });
    expect(sent.status).toBe(200);
    expect(await sent.json()).toEqual({ text: 'recorded' });
    expect(rec.seen[0]!.path).toBe('/v1/audio/transcriptions');
    expect(rec.seen[0]!.contentType, 'the same content type, boundary and all').toBe(form.type);
    expect(rec.seen[0]!.body.equals(form.body), 'the same bytes').toBe(true);

    const aliased = await formBytes([
      ['model', 'asr'],
      ['file', new Blob([audio]), 'talk.wav'],
    ]);
    await fetch(`${h.url}/v1/audio/transcriptions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${h.secret}`, 'content-type': aliased.type },
      body: new Uint8Array(aliased.body),
    });
    const expected = await formBytes([
      ['model', 'whisper'],
      ['file', new Blob([audio]), 'talk.wav'],
    ]);
    const boundaryOf = (t: string) => t.split('boundary=')[1]!;
    expect(rec.seen[1]!.body.toString('latin1'), 'the alias replaced by the served name, nothing else').toBe(
      expected.body.toString('latin1').replaceAll(boundaryOf(expected.type), boundaryOf(aliased.type)),
    );
  });

  it('answers the openai client’s audio.transcriptions.create from the sim, and refuses bad forms saying what to fix', async () => {
    const m = model({ name: 'whisper' });
    const h = await harness(
      [m],
      { whisper: [await simReplica(m)] },
      { bodyLimitBytes: 64 * 1024, uploadLimitBytes: 256 * 1024 },
    );
    const audio = Buffer.alloc(32_000, 3);
    const t = await h.client.audio.transcriptions.create({ model: 'whisper', file: await toFile(audio, 'hello.wav') });
    expect(t.text).toMatch(/^heard 32000 bytes of hello\.wav \(fnv1a [0-9a-f]{8}\)$/);
    const text = await h.client.audio.transcriptions.create({
      model: 'whisper',
      file: await toFile(audio, 'hello.wav'),
      response_format: 'text',
    });
    expect(text, 'text relayed as the engine wrote it').toBe(t.text);

    const send = async (form: { body: Buffer; type: string }) => {
      const res = await fetch(`${h.url}/v1/audio/transcriptions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${h.secret}`, 'content-type': form.type },
        body: new Uint8Array(form.body),
      });
      return { status: res.status, message: ((await res.json()) as { error: { message: string } }).error.message };
    };
    expect(await send(await formBytes([['model', 'whisper']]))).toEqual({
      status: 400,
      message: expect.stringContaining('the form has no file field'),
    });
    expect(await send(await formBytes([['file', new Blob(['x']), 'a.wav']]))).toEqual({
      status: 400,
      message: expect.stringContaining('the form has no model field'),
    });
    const longer = await h.client.audio.transcriptions.create({
      model: 'whisper',
      file: await toFile(Buffer.alloc(100 * 1024, 1), 'long.wav'),
    });
    expect(longer.text, 'an upload past the JSON body limit, within the upload limit').toMatch(/^heard 102400 bytes/);
    const big = await send(
      await formBytes([
        ['model', 'whisper'],
        ['file', new Blob([Buffer.alloc(257 * 1024)]), 'big.wav'],
      ]),
    );
    expect(big.status, 'past the upload limit').toBe(413);
    const bigJson = await h.post('/v1/chat/completions', {
      model: 'whisper',
      messages: [{ role: 'user', content: 'x'.repeat(65 * 1024) }],
    });
    expect(bigJson.status, 'JSON keeps its own, smaller limit').toBe(413);
    const json = await h.post('/v1/audio/transcriptions', { model: 'whisper' });
    expect([json.status, json.json.error?.message]).toEqual([
      415,
      expect.stringContaining('send the upload as multipart/form-data'),
    ]);
    const form = await formBytes([
      ['model', 'whisper'],
      ['file', new Blob(['x']), 'a.wav'],
    ]);
    const onChat = await fetch(`${h.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${h.secret}`, 'content-type': form.type },
      body: new Uint8Array(form.body),
    });
    expect(onChat.status, 'a form to a JSON endpoint').toBe(415);
    await waitFor('usage of the transcriptions', () =>
      h.usage.snapshot().find((u) => u.endpoint === 'transcriptions' && u.requests >= 2),
    );
  });

  it('without keys, reads an upload only with an Authorization header, which a web page cannot add without a preflight', async () => {
    const m = model({ name: 'whisper' });
    const h = await harness([m], { whisper: [await simReplica(m)] }, { authRequired: false });
    const form = await formBytes([
      ['model', 'whisper'],
      ['file', new Blob(['x']), 'a.wav'],
    ]);
    const bare = await fetch(`${h.url}/v1/audio/transcriptions`, {
      method: 'POST',
      headers: { 'content-type': form.type },
      body: new Uint8Array(form.body),
    });
    expect(bare.status).toBe(415);
    expect(((await bare.json()) as { error: { message: string } }).error.message).toContain(
      'only with an Authorization header',
    );
    const withHeader = await fetch(`${h.url}/v1/audio/transcriptions`, {
      method: 'POST',
      headers: { authorization: 'Bearer anything', 'content-type': form.type },
      body: new Uint8Array(form.body),
    });
    expect(withHeader.status).toBe(200);
  });
});
