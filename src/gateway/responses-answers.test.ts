// POST /v1/responses answering, on both paths: natively to an engine that
// serves the Responses API, and translated to chat for one that does not.
// The same words either way, whole and streamed; a streamed Response kept
// before the engine closes; what llmgw refuses by name; a failed replica
// passed over before the first byte and a broken stream ended in the
// Responses shape. Harness in test/support/gateway-responses.ts.
import type OpenAI from 'openai';
import { APIError, BadRequestError, NotFoundError } from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import { waitFor } from '../../test/support/wait.js';
import {
  closeAll,
  model,
  NATIVE,
  TRANSLATED,
  PATHS,
  simReplica,
  scripted,
  harness,
} from '../../test/support/gateway-responses.js';

afterEach(closeAll);

describe('POST /v1/responses, natively and translated', () => {
  it('answers with the same words either way, with usage, kept for GET, and accounted', async () => {
    const h = await harness();
    const texts: string[] = [];
    for (const path of PATHS) {
      const res = await h.client().responses.create({
        model: path,
        instructions: 'Be terse.',
        input: 'Tell me about rivers.',
        max_output_tokens: 6,
      });
      expect(res.object, path).toBe('response');
      expect(res.id, path).toMatch(/^resp_/);
      expect(res.output_text.split(' '), `${path}: a word per token`).toHaveLength(6);
      expect(res.status, `${path}: cut by max_output_tokens`).toBe('incomplete');
      // "Be terse." and "Tell me about rivers." are 30 characters: the sim counts ceil(30 / 4).
      expect(res.usage, path).toMatchObject({ input_tokens: 8, output_tokens: 6, total_tokens: 14 });
      texts.push(res.output_text);
      const got = await h.client().responses.retrieve(res.id);
      expect(got.output_text, `${path}: GET returns the kept response`).toBe(res.output_text);
      expect((got as unknown as { store: unknown }).store, `${path}: kept, as the client asked`).toBe(true);
      await waitFor(`${path}: the usage record`, () =>
        h.usage.snapshot().find((u) => u.model === path && u.completionTokens === 6 && u.promptTokens === 8),
      );
    }
    expect(texts[1], 'the translation kept the conversation exactly').toBe(texts[0]);
  });

  it('streams the events clients parse, numbered from 0, to the same text and usage', async () => {
    const h = await harness();
    for (const path of PATHS) {
      const whole = await h
        .client()
        .responses.create({ model: path, input: 'Tell me about rivers.', max_output_tokens: 5, store: false });
      const stream = await h
        .client()
        .responses.create({ model: path, input: 'Tell me about rivers.', max_output_tokens: 5, stream: true });
      const types: string[] = [];
      const numbers: number[] = [];
      let text = '';
      let final: OpenAI.Responses.Response | null = null;
      for await (const e of stream) {
        types.push(e.type);
        numbers.push(e.sequence_number);
        if (e.type === 'response.output_text.delta') text += e.delta;
        if (e.type === 'response.completed' || e.type === 'response.incomplete') final = e.response;
      }
      expect(numbers, path).toEqual(types.map((_, i) => i));
      expect(types.slice(0, 2), path).toEqual(['response.created', 'response.in_progress']);
      expect(types.at(-1), path).toBe('response.incomplete');
      expect(text, path).toBe(whole.output_text);
      expect(final?.usage, path).toMatchObject({ input_tokens: 6, output_tokens: 5 });
      const kept = await h.client().responses.retrieve(final!.id);
      expect(kept.output_text, `${path}: a streamed response is kept too`).toBe(text);
      await expect(
        h.client().responses.retrieve(whole.id),
        `${path}: store: false keeps nothing`,
      ).rejects.toBeInstanceOf(NotFoundError);
    }
  });

  // An engine that lingers after its last event: the client, done reading, may continue the conversation at once.
  const lastEvents: Record<(typeof PATHS)[number], (model: unknown) => string> = {
    [TRANSLATED]: (model) => {
      const chunk = (delta: object, finish: string | null, usage?: object) =>
        `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model, choices: [{ index: 0, delta, finish_reason: finish }], ...(usage ? { usage } : {}) })}\n\n`;
      return (
        chunk({ role: 'assistant', content: 'hi' }, null) +
        chunk({}, 'stop', { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 }) +
        'data: [DONE]\n\n'
      );
    },
    [NATIVE]: (model) => {
      const response = {
        id: 'resp_native_held',
        object: 'response',
        created_at: 1,
        status: 'completed',
        model,
        output: [
          {
            id: 'msg_1',
            type: 'message',
            role: 'assistant',
            status: 'completed',
            content: [{ type: 'output_text', text: 'hi', annotations: [] }],
          },
        ],
        usage: { input_tokens: 2, output_tokens: 1, total_tokens: 3 },
      };
      return `event: response.completed\ndata: ${JSON.stringify({ type: 'response.completed', sequence_number: 0, response })}\n\n`;
    },
  };

  it.each(PATHS)(
    '%s: keeps a streamed Response before its final event reaches the client, though the engine has not closed yet',
    async (path) => {
      let release = () => {};
      const held = new Promise<void>((resolve) => (release = resolve));
      const engine = await scripted(
        (body, res) => {
          res.writeHead(200, { 'content-type': 'text/event-stream' });
          res.write(lastEvents[path](body.model));
          void held.then(() => res.end());
        },
        path === NATIVE ? 'vllm' : 'llamacpp',
      );
      const h = await harness({ [path]: [engine.replica] });
      const stream = await h.client().responses.create({ model: path, input: 'Say hi', stream: true });
      let id = '';
      for await (const event of stream) {
        if (event.type !== 'response.completed') continue;
        id = event.response.id;
        break;
      }
      try {
        expect(
          (await h.client().responses.retrieve(id)).output_text,
          'kept by the time the client read response.completed',
        ).toBe('hi');
      } finally {
        release();
      }
    },
  );

  it('refuses what llmgw does not serve with 400 naming it: a built-in tool, background mode, a bad item', async () => {
    const h = await harness();
    const builtIn = await h
      .client()
      .responses.create({ model: NATIVE, input: 'x', tools: [{ type: 'web_search_preview' }] })
      .catch((e: unknown) => e);
    expect(builtIn).toBeInstanceOf(BadRequestError);
    expect((builtIn as BadRequestError).message).toMatch(/web_search_preview/);
    const background = await h
      .client()
      .responses.create({ model: NATIVE, input: 'x', background: true })
      .catch((e: unknown) => e);
    expect(background).toBeInstanceOf(BadRequestError);
    expect((background as BadRequestError).message).toMatch(/background/);
    const item = await fetch(`${h.url}/v1/responses`, {
      method: 'POST',
      headers: { authorization: `Bearer ${h.secret}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: TRANSLATED, input: [{ type: 'no_such_item' }] }),
    });
    expect(item.status).toBe(400);
    expect(((await item.json()) as { error: { type: string; param: unknown } }).error).toMatchObject({
      type: 'invalid_request_error',
      param: 'input',
    });
    await expect(h.client().responses.create({ model: 'nope', input: 'x' })).rejects.toBeInstanceOf(NotFoundError);
  });

  it('moves on from a 503 before the first byte; a translated stream broken after it ends with response.failed', async () => {
    const busy = await scripted((_body, res) => {
      res.writeHead(503, { 'content-type': 'application/json' });
      res.end('{"error":{"message":"busy"}}');
    });
    const chunk = (delta: Record<string, unknown>) =>
      `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 0, model: TRANSLATED, choices: [{ index: 0, delta, finish_reason: null }] })}\n\n`;
    const breaking = await scripted((_body, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(chunk({ role: 'assistant', content: 'one' }));
      res.write(chunk({ content: ' two' }), () => res.socket?.destroy());
    });
    const h = await harness({ [TRANSLATED]: [busy.replica, await simReplica(model(TRANSLATED), 'llamacpp')] });
    const res = await h.client().responses.create({ model: TRANSLATED, input: 'x', max_output_tokens: 2 });
    expect(res.usage?.output_tokens).toBe(2);
    expect(busy.seen).toHaveLength(1);

    const h2 = await harness({ [TRANSLATED]: [breaking.replica] });
    const stream = await h2.client().responses.create({ model: TRANSLATED, input: 'x', stream: true });
    const types: string[] = [];
    let text = '';
    let failed: OpenAI.Responses.ResponseFailedEvent | null = null;
    const err = await (async () => {
      for await (const e of stream) {
        types.push(e.type);
        if (e.type === 'response.output_text.delta') text += e.delta;
        if (e.type === 'response.failed') failed = e;
      }
    })().then(
      () => null,
      (e: unknown) => e,
    );
    expect(err === null || err instanceof APIError, 'the stream ends, or the client reports the failure').toBe(true);
    expect(types.at(-1), 'the last event says it failed').toBe('response.failed');
    expect(failed!.response.error?.message).toMatch(/stopped answering mid-response/);
    expect(text, 'what came before the break, once').toBe('one two');

    // Natively, the byte relay's own ending: the events that came whole, then one error event.
    const event = (type: string, fields: Record<string, unknown>) =>
      `event: ${type}\ndata: ${JSON.stringify({ type, ...fields })}\n\n`;
    const nativeBreaking = await scripted((_body, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(
        event('response.created', {
          sequence_number: 0,
          response: { id: 'resp_x', object: 'response', status: 'in_progress', output: [] },
        }),
      );
      res.write(
        event('response.output_text.delta', {
          sequence_number: 1,
          item_id: 'msg_1',
          output_index: 0,
          content_index: 0,
          delta: 'one',
        }),
        () => res.socket?.destroy(),
      );
    }, 'vllm');
    const h3 = await harness({ [NATIVE]: [nativeBreaking.replica] });
    const raw = await fetch(`${h3.url}/v1/responses`, {
      method: 'POST',
      headers: { authorization: `Bearer ${h3.secret}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: NATIVE, input: 'x', stream: true }),
    });
    const body = await raw.text();
    expect(body.startsWith('event: response.created'), body).toBe(true);
    expect(body, 'the delta that came whole').toContain('"delta":"one"');
    // The Responses API's own error event, numbered after the engine's two (the Chat Completions error line
    // it ended with before is no event a Responses client reads).
    const last = body.trimEnd().split('\n\n').at(-1)!;
    expect(last.startsWith('event: error\ndata: '), 'then the error event').toBe(true);
    expect(JSON.parse(last.slice('event: error\ndata: '.length))).toMatchObject({
      type: 'error',
      code: 'server_error',
      message: 'the engine stopped answering mid-response',
      sequence_number: 2,
    });
  });

  it('decides the path per replica: a fallback on another engine is served its own way', async () => {
    const busy = await scripted((_body, res) => {
      res.writeHead(503, { 'content-type': 'application/json' });
      res.end('{"error":{"message":"busy"}}');
    }, 'vllm');
    // One model whose replicas run two engines: the native one refuses before its first byte, the other is sent chat.
    const h = await harness({ [NATIVE]: [busy.replica, await simReplica(model(NATIVE), 'builtin')] });
    const res = await h
      .client()
      .responses.create({ model: NATIVE, input: 'Tell me about rivers.', max_output_tokens: 3 });
    expect(res.output_text.split(' ')).toHaveLength(3);
    expect(
      busy.seen.map((s) => s.path),
      'the first attempt went natively',
    ).toEqual(['/v1/responses']);
  });
  it("names the fields the client sent in an engine's 400 about the translated request", async () => {
    // Regression: a schema the engine refused came back naming response_format, which a Responses client never sent.
    const refusing = await scripted((_body, res) => {
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          error: {
            message: 'minLength 4 at response_format.json_schema.schema is above its maxLength 2: no string meets both',
            type: 'invalid_request_error',
            param: 'response_format.json_schema.schema.minLength',
            code: null,
          },
        }),
      );
    });
    const h = await harness({ [TRANSLATED]: [refusing.replica] });
    const err = await h
      .client()
      .responses.create({
        model: TRANSLATED,
        input: 'x',
        text: { format: { type: 'json_schema', name: 's', schema: { type: 'string', minLength: 4, maxLength: 2 } } },
      })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(BadRequestError);
    expect((err as BadRequestError).param).toBe('text.format.schema.minLength');
    expect((err as BadRequestError).message).toContain('minLength 4 at text.format.schema is above');
    expect(refusing.seen[0]!.body.response_format, "the engine was sent Chat's field").toBeDefined();
  });
});
