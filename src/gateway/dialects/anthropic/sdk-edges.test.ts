// Two edges where Anthropic's clients read what OpenAI's do not, proven
// with the official `@anthropic-ai/sdk` against the router in process:
// message_start's input_tokens (LangChain's ChatAnthropic records the
// prompt's count from it alone) and GET /v1/models in Anthropic's Models
// API shape. Harness in test/support/gateway-messages.ts.
import Anthropic from '@anthropic-ai/sdk';
import { afterEach, describe, expect, it } from 'vitest';
import { chunk, closeAll, harness, scripted, simReplicas } from '../../../../test/support/gateway-messages.js';

afterEach(closeAll);

/** The usage message_start carried, and the final message, of one streamed request. */
async function streamed(client: Anthropic, params: Anthropic.MessageStreamParams) {
  const stream = client.messages.stream(params);
  let start: Anthropic.Usage | null = null;
  stream.on('streamEvent', (e) => {
    // A copy: the SDK adds the later events' counts to this same object as they come.
    if (e.type === 'message_start') start = { ...e.message.usage };
  });
  const final = await stream.finalMessage();
  return { start: start as Anthropic.Usage | null, final };
}

describe('message_start carries the prompt’s token count', () => {
  // Guards against message_start saying input_tokens 0 until message_delta, which clients that read the
  // prompt's count from message_start (LangChain's ChatAnthropic) recorded as a free prompt.
  it('equals the final usage’s input_tokens on the sim engine, with a system prompt and with tools', async () => {
    const h = await harness(simReplicas);
    const plain = await streamed(h.client, {
      model: 'demo-alias',
      max_tokens: 6,
      system: 'Be brief.',
      messages: [{ role: 'user', content: 'Tell me about rivers and the sea.' }],
    });
    expect(plain.start?.input_tokens).toBeGreaterThan(0);
    expect(plain.start?.input_tokens).toBe(plain.final.usage.input_tokens);
    expect(plain.start?.output_tokens).toBe(0);
    const tools = await streamed(h.client, {
      model: 'demo',
      max_tokens: 6,
      tools: [
        {
          name: 'get_weather',
          description: 'The weather in a city',
          input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
        },
      ],
      messages: [{ role: 'user', content: 'Weather in Oslo?' }],
    });
    expect(tools.start?.input_tokens).toBe(tools.final.usage.input_tokens);
    expect(tools.start!.input_tokens).toBeGreaterThan(0);
  });

  it('holds message_start, and the text after it, until the replica’s tokenizer answers', async () => {
    let firstChunkSent!: () => void;
    const chunkSent = new Promise<void>((resolve) => (firstChunkSent = resolve));
    let tokenized!: () => void;
    const counted = new Promise<void>((resolve) => (tokenized = resolve));
    const engine = await scripted((body, res, path) => {
      if (path.endsWith('/tokenize')) {
        // Answers only once the engine's first text is on its way: the gateway must wait for the count.
        void chunkSent.then(() => {
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ count: 23, max_model_len: 4096, tokens: [] }));
          tokenized();
        });
        return;
      }
      expect(body.stream).toBe(true);
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(chunk({ delta: { role: 'assistant', content: 'one' } }), () => firstChunkSent());
      void counted.then(() => {
        res.write(chunk({ delta: { content: ' two' }, finish_reason: 'stop' }));
        res.end(
          `data: ${JSON.stringify({ id: 'chatcmpl-s', choices: [], usage: { prompt_tokens: 23, completion_tokens: 2 } })}\n\n` +
            'data: [DONE]\n\n',
        );
      });
    });
    const h = await harness(async () => [{ ...engine.replica, engine: 'vllm' }]);
    const got = await streamed(h.client, { model: 'demo', max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] });
    expect(got.start).toEqual(expect.objectContaining({ input_tokens: 23, output_tokens: 0 }));
    expect(got.final.content).toMatchObject([{ type: 'text', text: 'one two' }]);
    expect(got.final.usage).toEqual(expect.objectContaining({ input_tokens: 23, output_tokens: 2 }));
    // What the tokenizer was asked: the translated messages, the chat template applied.
    const asked = engine.seen().find((b) => b.add_generation_prompt === true);
    expect(asked).toEqual({ model: 'demo', messages: [{ role: 'user', content: 'hi' }], add_generation_prompt: true });
  });

  it('asks no tokenizer of an engine that may have none, nor for an answer sent whole', async () => {
    const engine = await scripted((body, res) => {
      if (body.stream === true) {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.end(chunk({ delta: { content: 'x' }, finish_reason: 'stop' }) + 'data: [DONE]\n\n');
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          id: 'chatcmpl-w',
          choices: [{ index: 0, message: { role: 'assistant', content: 'x' }, finish_reason: 'stop' }],
          usage: { prompt_tokens: 4, completion_tokens: 1 },
        }),
      );
    });
    // An engine llmgw knows no tokenizer of.
    const h = await harness(async () => [{ ...engine.replica, engine: 'tgi' }]);
    const params = { model: 'demo', max_tokens: 5, messages: [{ role: 'user' as const, content: 'hi' }] };
    const got = await streamed(h.client, params);
    expect(got.final.content).toMatchObject([{ type: 'text', text: 'x' }]);
    await h.client.messages.create(params);
    expect(engine.seen().map((b) => b.add_generation_prompt === true)).toEqual([false, false]);
  });
});

describe('message_start on llama.cpp', () => {
  // Guards against message_start saying input_tokens 0 on llama.cpp, whose /tokenize takes text only: its chat
  // template is applied first (/apply-template), then the text counted with the special tokens chat adds.
  it('applies the template, counts it with special tokens, and says that count at once', async () => {
    const asked: { path: string; body: Record<string, unknown> }[] = [];
    let tokenized!: () => void;
    const counted = new Promise<void>((resolve) => (tokenized = resolve));
    const engine = await scripted(async (body, res, path) => {
      asked.push({ path, body });
      res.writeHead(200, { 'content-type': path.endsWith('/completions') ? 'text/event-stream' : 'application/json' });
      if (path.endsWith('/apply-template')) return res.end(JSON.stringify({ prompt: '<|user|>hi<|assistant|>' }));
      if (path.endsWith('/tokenize')) return res.end(JSON.stringify({ tokens: [1, 2, 3, 4, 5, 6, 7] }), tokenized);
      // Prefill outlasts counting, as it does on a real engine: the answer starts once the count is back.
      await counted;
      res.end(
        chunk({ delta: { role: 'assistant', content: 'x' }, finish_reason: 'stop' }) +
          `data: ${JSON.stringify({ id: 'chatcmpl-l', choices: [], usage: { prompt_tokens: 7, completion_tokens: 1 } })}\n\n` +
          'data: [DONE]\n\n',
      );
    });
    const h = await harness(async () => [{ ...engine.replica, engine: 'llamacpp' }]);
    const got = await streamed(h.client, { model: 'demo', max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] });
    expect(got.start).toEqual(expect.objectContaining({ input_tokens: 7, output_tokens: 0 }));
    expect(got.final.usage.input_tokens).toBe(7);
    const template = asked.find((a) => a.path.endsWith('/apply-template'));
    expect(template?.body).toEqual({ messages: [{ role: 'user', content: 'hi' }] });
    expect(asked.find((a) => a.path.endsWith('/tokenize'))?.body).toEqual({
      content: '<|user|>hi<|assistant|>',
      add_special: true,
    });
  });
});

describe('GET /v1/models for Anthropic clients', () => {
  // Guards against Anthropic clients (anthropic-version) getting OpenAI's list, which their SDKs cannot read.
  it('lists, pages and retrieves in Anthropic’s Models API shape through the official SDK', async () => {
    const h = await harness(simReplicas);
    const all: Anthropic.ModelInfo[] = [];
    for await (const m of h.client.models.list()) all.push(m);
    expect(all.map((m) => m.id)).toEqual(['demo', 'demo-alias', 'other']);
    for (const m of all) {
      expect(m).toEqual({ type: 'model', id: m.id, display_name: m.id, created_at: expect.any(String) });
      expect(m.created_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
      expect(Math.abs(Date.parse(m.created_at) - Date.now())).toBeLessThan(3_600_000);
    }
    // Two at a time: the SDK follows has_more and last_id to the end.
    const page = await h.client.models.list({ limit: 2 });
    expect(page.data.map((m) => m.id)).toEqual(['demo', 'demo-alias']);
    expect(page).toMatchObject({ has_more: true, first_id: 'demo', last_id: 'demo-alias' });
    const paged: string[] = [];
    for await (const m of h.client.models.list({ limit: 2 })) paged.push(m.id);
    expect(paged).toEqual(['demo', 'demo-alias', 'other']);
    const before = await h.client.models.list({ before_id: 'other', limit: 1 });
    expect(before.data.map((m) => m.id)).toEqual(['demo-alias']);
    expect(before.has_more).toBe(true);
    expect(await h.client.models.retrieve('demo-alias')).toEqual({
      type: 'model',
      id: 'demo-alias',
      display_name: 'demo-alias',
      created_at: all[0]!.created_at,
    });
  });

  it('lists only what the key may use, and refuses in Anthropic’s error shape', async () => {
    const h = await harness(simReplicas);
    const limited = new Anthropic({ apiKey: h.demoOnly, baseURL: h.url, maxRetries: 0 });
    const ids: string[] = [];
    for await (const m of limited.models.list()) ids.push(m.id);
    expect(ids).toEqual(['other']);
    const missing = await limited.models.retrieve('demo').catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(Anthropic.NotFoundError);
    expect((missing as InstanceType<typeof Anthropic.NotFoundError>).error).toMatchObject({
      type: 'error',
      error: { type: 'not_found_error' },
    });
    const badLimit = await h.client.models.list({ limit: 0 }).catch((e: unknown) => e);
    expect(badLimit).toBeInstanceOf(Anthropic.BadRequestError);
    expect((badLimit as Error).message).toMatch(/limit: want an integer from 1 to 1000/);
    const badKey = new Anthropic({ apiKey: 'sk-nope', baseURL: h.url, maxRetries: 0 });
    const refused = await badKey.models.list().catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(Anthropic.AuthenticationError);
    expect((refused as InstanceType<typeof Anthropic.AuthenticationError>).error).toMatchObject({ type: 'error' });
  });

  it('answers OpenAI’s shape to a request without anthropic-version, as before', async () => {
    const h = await harness(simReplicas);
    const res = await fetch(`${h.url}/v1/models`, { headers: { authorization: `Bearer ${h.secret}` } });
    const body = (await res.json()) as { object: string; data: { id: string; object: string }[] };
    expect(body.object).toBe('list');
    expect(body.data.map((m) => [m.id, m.object])).toEqual([
      ['demo', 'model'],
      ['demo-alias', 'model'],
      ['other', 'model'],
    ]);
    const one = await fetch(`${h.url}/v1/models/demo`, { headers: { authorization: `Bearer ${h.secret}` } });
    expect(await one.json()).toMatchObject({ id: 'demo', object: 'model', owned_by: 'llmgw' });
  });
});
