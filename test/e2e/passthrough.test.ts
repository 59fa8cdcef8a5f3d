// The pass-through endpoints as a user meets them: rerank, score, audio
// transcriptions (a real multipart upload, from FormData and from the
// openai client's `audio.transcriptions.create` with `toFile`), tokenize and
// detokenize, against a real `llmgw control` whose replicas are sim engines
// started by a simulated agent; usage lands in the store per endpoint and
// shows in GET /api/v1/usage and `llmgw ctl usage`. The in-process tests
// (src/gateway/passthrough.test.ts) cover each rule.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import OpenAI, { toFile } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { UsageView } from '../../src/api/index.js';
import { startOneNodeFleet, type OneNodeFleet } from '../support/one-node.js';
import { waitFor } from '../support/wait.js';
import { runCtlCli } from './ctl-support.js';

let fleet: OneNodeFleet;
let adminUrl = '';
let clientUrl = '';
let key = { id: '', secret: '' };

const api = <T>(method: string, path: string, body?: unknown) => fleet.api<T>(method, path, body);

async function post(
  path: string,
  body: unknown,
): Promise<{ status: number; json: Record<string, unknown> & { error?: { message: string; llmgw_code: string } } }> {
  const res = await fetch(`${clientUrl}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key.secret}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return {
    status: res.status,
    json: (await res.json()) as Record<string, unknown> & { error?: { message: string; llmgw_code: string } },
  };
}

beforeAll(async () => {
  fleet = await startOneNodeFleet({
    name: 'passthrough',
    portRange: '26800-26899',
    keys: ['passthrough'],
    models: (dir) => {
      const weights = join(dir, 'weights');
      mkdirSync(weights);
      return [
        {
          name: 'multi',
          aliases: ['whisper-sim'],
          source: `file://${weights}`,
          scaling: { min: 1 },
          profiles: [{ engine: 'sim' }],
        },
        {
          name: 'chat-only',
          source: `file://${weights}`,
          scaling: { min: 0, max: 1 },
          endpoints: ['chat'],
          profiles: [{ engine: 'sim' }],
        },
      ];
    },
  });
  ({ adminUrl, clientUrl } = fleet);
  key = fleet.keys.passthrough!;
}, 120_000);

afterAll(() => fleet?.stop());

describe('pass-through endpoints against a real control plane', () => {
  it('reranks and scores, tokenizes and detokenizes, as the engine answers', async () => {
    const documents = ['rivers run to the sea', 'a recipe for bread', 'the sea is salt'];
    const rerank = await post('/v1/rerank', { model: 'multi', query: 'sea', documents, top_n: 2 });
    expect(rerank.status, JSON.stringify(rerank.json)).toBe(200);
    expect(rerank.json.results).toHaveLength(2);
    const score = await post('/v1/score', { model: 'multi', text_1: 'sea', text_2: documents });
    expect(score.status).toBe(200);
    expect(score.json.data).toHaveLength(3);
    const tok = await post('/tokenize', { model: 'multi', prompt: 'The sea is salt.' });
    expect(tok.json.count).toBe(4);
    expect(await post('/detokenize', { model: 'multi', tokens: tok.json.tokens })).toEqual({
      status: 200,
      json: { prompt: 'The sea is salt.' },
    });
  });

  it('transcribes an upload from the openai client and from a plain FormData, the bytes arriving as sent', async () => {
    const audio = new Uint8Array(48_000).map((_, i) => (i * 31) % 256);
    const client = new OpenAI({ apiKey: key.secret, baseURL: `${clientUrl}/v1`, maxRetries: 0 });
    const t = await client.audio.transcriptions.create({
      model: 'whisper-sim',
      file: await toFile(Buffer.from(audio), 'meeting.wav'),
    });
    expect(t.text).toMatch(/^heard 48000 bytes of meeting\.wav \(fnv1a [0-9a-f]{8}\)$/);
    const form = new FormData();
    form.append('model', 'multi');
    form.append('response_format', 'text');
    form.append('file', new Blob([audio], { type: 'audio/wav' }), 'meeting.wav');
    const res = await fetch(`${clientUrl}/v1/audio/transcriptions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key.secret}` },
      body: form,
    });
    expect(res.status).toBe(200);
    expect(await res.text(), 'the same file heard the same way, as text').toBe(t.text);
  });

  it('refuses an endpoint the model does not serve, naming what it serves', async () => {
    const refused = await post('/v1/rerank', { model: 'chat-only', query: 'q', documents: ['d'] });
    expect(refused.status).toBe(400);
    expect(refused.json.error?.llmgw_code).toBe('LLMGW_ENDPOINT_NOT_SERVED');
    expect(refused.json.error?.message).toContain(
      'model `chat-only` does not serve rerank (POST /v1/rerank); it serves chat',
    );
  });

  it('counts usage per endpoint, in the admin API and in ctl usage', async () => {
    const rows = await waitFor(
      'usage of every endpoint',
      async () => {
        const { body } = await api<UsageView[]>('GET', '/api/v1/usage');
        const mine = body.filter((u) => u.key_id === key.id && u.model === 'multi');
        // Usage reaches the store in batches, so one flush can fall between the two
        // transcriptions; wait for both rather than for the first row of each endpoint.
        const everyEndpoint = ['rerank', 'score', 'tokenize', 'detokenize'].every((e) =>
          mine.some((u) => u.endpoint === e),
        );
        const transcribed = mine.find((u) => u.endpoint === 'transcriptions')?.requests ?? 0;
        return everyEndpoint && transcribed >= 2 ? mine : undefined;
      },
      20_000,
    );
    const of = (e: string) => rows.find((u) => u.endpoint === e)!;
    expect(of('rerank')).toMatchObject({ requests: 1, errors: 0 });
    expect(of('rerank').prompt_tokens, "rerank's total_tokens").toBeGreaterThan(0);
    expect(of('transcriptions').requests).toBe(2);
    const { body: onlyRerank } = await api<UsageView[]>('GET', '/api/v1/usage?endpoint=rerank');
    expect(new Set(onlyRerank.map((u) => u.endpoint))).toEqual(new Set(['rerank']));
    const ctl = await runCtlCli(['usage', '--model', 'multi'], {
      env: { LLMGW_ADMIN_URL: adminUrl, LLMGW_ADMIN_TOKEN: fleet.adminToken },
    });
    expect(ctl.code, ctl.stderr).toBe(0);
    expect(ctl.stdout).toContain('ENDPOINT');
    for (const e of ['rerank', 'score', 'tokenize', 'detokenize', 'transcriptions']) expect(ctl.stdout, e).toContain(e);
  });
});
