// Remotes that speak OpenAI's Responses API and Anthropic's Messages API,
// end to end: a second llmgw (B) on loopback serves /v1/responses and
// /v1/messages for a model of its own (a sim engine behind it), with API
// keys required; the llmgw under test (A) has two remotes pointing at B,
// `api: responses` and `api: anthropic`, each with a key B issued. An
// OpenAI client against A gets whole and streamed chat completions through
// each. Guards against: a request to such a remote sent as chat (B's usage
// then says `chat`, not `responses`/`messages`); the remote's answer or
// stream reaching the client untranslated; its usage going uncounted; the
// remote's key (the canary: a real key of B's) reaching an answer, a log
// line or A's store file.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AdminClient } from '../../src/api/index.js';
import { startControl, stopAll, type ControlUrls, type RunningProcess } from '../support/processes.js';
import { expectCanaryHidden, startControlForRemotes, startSimRemote } from '../support/remotes.js';
import { waitFor } from '../support/wait.js';

const ADMIN = 'e2e-remote-dialects-admin-0123456789abcdef';

let dir: string;
let a: RunningProcess & { urls: ControlUrls };
let b: RunningProcess & { urls: ControlUrls };
let apiA: AdminClient;
let apiB: AdminClient;
/** The key B issued to A: set as both remotes' credential, it must appear nowhere A shows or keeps. */
let canary: string;
let openai: OpenAI;

const MODELS = { responses: 'via-responses', anthropic: 'via-messages' } as const;

describe('remotes speaking the Responses and Messages APIs', () => {
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'llmgw-e2e-remote-dialects-'));
    const simUrl = await startSimRemote(['--model', 'upstream']);
    b = await startControl(['--store', `sqlite:${join(dir, 'b.db')}`, '--admin-token', ADMIN]);
    apiB = new AdminClient({ baseUrl: b.urls.admin, token: ADMIN, actor: 'e2e' });
    await apiB.addModel({
      name: 'inner',
      profiles: [{ engine: 'remote', remote: { url: simUrl, model: 'upstream' } }],
    });
    const issued = await fetch(`${b.urls.admin}/api/v1/keys`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'from-a' }),
    });
    expect(issued.status).toBe(201);
    canary = ((await issued.json()) as { secret: string }).secret;

    a = await startControlForRemotes({ dir, storePath: join(dir, 'a.db'), adminToken: ADMIN, keyByte: '5a' });
    apiA = new AdminClient({ baseUrl: a.urls.admin, token: ADMIN, actor: 'e2e' });
    for (const [api, name] of Object.entries(MODELS))
      await apiA.addModel({
        name,
        profiles: [{ engine: 'remote', remote: { url: b.urls.client, model: 'inner', api, api_key: canary } }],
      });
    openai = new OpenAI({ baseURL: `${a.urls.client}/v1`, apiKey: 'unused', maxRetries: 0 });
    // Regression (issue #38): the first request after a remote with an inline api_key was added sometimes went
    // upstream with no key, and B answered 401. Each remote must serve the very first request, key attached.
    for (const name of Object.values(MODELS)) {
      const r = await fetch(`${a.urls.client}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: name, messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 }),
      });
      expect(r.status, `the first request to ${name}: ${await r.clone().text()}`).toBe(200);
      await r.body?.cancel();
    }
  }, 180_000);

  afterAll(async () => {
    await a?.stop();
    await b?.stop();
    await stopAll();
  });

  it.each(Object.entries(MODELS))(
    'answers a whole chat completion through a %s remote, its usage counted',
    async (_api, model) => {
      const answer = await openai.chat.completions.create({
        model,
        messages: [
          { role: 'system', content: 'answer briefly' },
          { role: 'user', content: 'tell me something' },
        ],
        max_tokens: 6,
      });
      expect(answer.object).toBe('chat.completion');
      expect(answer.choices[0]?.message.content, "the remote's text").toBeTruthy();
      expect(['stop', 'length']).toContain(answer.choices[0]?.finish_reason);
      expect(answer.usage?.prompt_tokens, 'the remote counted the prompt').toBeGreaterThan(0);
      expect(answer.usage?.completion_tokens).toBeGreaterThan(0);
      const record = await waitFor('the request record', async () => {
        const [r] = (await apiA.requests({ model, limit: 1 })).requests;
        return r?.prompt_tokens !== undefined ? r : undefined;
      });
      expect(record.replica).toBe(`remote:${model}`);
      expect([record.prompt_tokens, record.completion_tokens], 'A counts what the remote said').toEqual([
        answer.usage?.prompt_tokens,
        answer.usage?.completion_tokens,
      ]);
    },
  );

  it.each(Object.entries(MODELS))(
    'streams a chat completion through a %s remote, with its usage',
    async (_api, model) => {
      const stream = await openai.chat.completions.create({
        model,
        messages: [{ role: 'user', content: 'tell me something' }],
        max_tokens: 6,
        stream: true,
        stream_options: { include_usage: true },
      });
      let text = '';
      let finish: string | null = null;
      let usage: OpenAI.CompletionUsage | null | undefined;
      let chunks = 0;
      for await (const chunk of stream) {
        chunks++;
        expect(chunk.object).toBe('chat.completion.chunk');
        text += chunk.choices[0]?.delta.content ?? '';
        finish = chunk.choices[0]?.finish_reason ?? finish;
        if (chunk.usage) usage = chunk.usage;
      }
      expect(chunks, 'the answer came in pieces').toBeGreaterThan(2);
      expect(text).not.toBe('');
      expect(['stop', 'length']).toContain(finish);
      expect(usage?.completion_tokens).toBeGreaterThan(0);
      expect(usage?.prompt_tokens).toBeGreaterThan(0);
    },
  );

  it.each(Object.entries(MODELS))(
    'answers a Responses client through a %s remote, whole and streamed',
    async (_api, model) => {
      // To the Responses remote the client's request goes as it came (as to an engine serving the API); to the other, through chat.
      const whole = await openai.responses.create({ model, input: 'tell me something', max_output_tokens: 6 });
      expect(whole.object).toBe('response');
      expect(whole.output_text).not.toBe('');
      expect(whole.usage?.output_tokens).toBeGreaterThan(0);
      const record = await waitFor('the request record', async () => {
        const [r] = (await apiA.requests({ model, limit: 1 })).requests;
        return r?.completion_tokens !== undefined && r.endpoint === 'responses' ? r : undefined;
      });
      expect(record.completion_tokens, 'A counts what the remote said').toBe(whole.usage?.output_tokens);
      const stream = await openai.responses.create({ model, input: 'hi', max_output_tokens: 6, stream: true });
      let text = '';
      let done: OpenAI.Responses.Response | undefined;
      for await (const event of stream) {
        if (event.type === 'response.output_text.delta') text += event.delta;
        if (event.type === 'response.completed' || event.type === 'response.incomplete') done = event.response;
      }
      expect(text).not.toBe('');
      expect(done?.usage?.output_tokens).toBeGreaterThan(0);
    },
  );

  it("reached B in each remote's own API, not as chat", async () => {
    // B writes its usage to its store in batches: read until both have landed.
    const endpoints = await waitFor('B to record usage per endpoint', async () => {
      const usage = await apiB.usage();
      const seen = usage.filter((u) => u.model === 'inner' && u.requests > 0).map((u) => u.endpoint);
      return seen.includes('responses') && seen.includes('messages') ? seen : undefined;
    });
    expect(endpoints, 'nothing went to B as chat').not.toContain('chat');
  });

  it('serves an Anthropic client too, through chat, to the Responses remote', async () => {
    const res = await fetch(`${a.urls.client}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
      body: JSON.stringify({ model: MODELS.responses, max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(res.status).toBe(200);
    const message = (await res.json()) as {
      type: string;
      content: { type: string }[];
      usage: { output_tokens: number };
    };
    expect(message.type).toBe('message');
    expect(message.content[0]?.type).toBe('text');
    expect(message.usage.output_tokens).toBeGreaterThan(0);
  });

  it('turns away a request the remote API cannot express with a 400 naming the field', async () => {
    // The client's request is what must change (its only replica cannot express `stop`): a 502 sent SDKs retrying.
    const res = await fetch(`${a.urls.client}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODELS.responses, messages: [{ role: 'user', content: 'hi' }], stop: ['x'] }),
    });
    expect(res.status).toBe(400);
    const { error } = (await res.json()) as { error: { message: string; param: string } };
    expect(error.message).toMatch(/stop: .*Responses API/);
    expect(error.param, 'the field to change').toBe('stop');
  });

  it("passes the remote's refusal on in OpenAI's shape, its message kept", async () => {
    // B serves no model of this name: its 404 comes in Anthropic's error shape, and the client reads OpenAI's.
    await apiA.addModel({
      name: 'via-messages-missing',
      profiles: [
        { engine: 'remote', remote: { url: b.urls.client, model: 'nope', api: 'anthropic', api_key: canary } },
      ],
    });
    // The first request goes to B with the key (never a keyless 401), before any probe judged the remote.
    const err = await openai.chat.completions
      .create({ model: 'via-messages-missing', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(err, 'B refused the request').toBeInstanceOf(OpenAI.APIError);
    if (!(err instanceof OpenAI.APIError)) return;
    expect(err.status, err.message).toBe(404);
    expect(err.message).toContain('nope');
    expect((err.error as { type?: string }).type).toBe('not_found_error');
  });

  it('never shows the canary: not in an answer, a log line or the store file', async () => {
    await expectCanaryHidden({ canary, api: apiA, control: a, dir, storePrefix: 'a.db' });
  });
});
