// POST /v1/responses over several turns, on both paths: a conversation
// continued by previous_response_id and kept per key, llmgw's own ids
// whatever the engine answers, function tools round-tripped, a response's
// items listed, the AI SDK's item references resolved, and deletes. Harness
// in test/support/gateway-responses.ts.
import { createOpenAI } from '@ai-sdk/openai';
import { generateText, stepCountIs, tool } from 'ai';
import { z } from 'zod';
import type OpenAI from 'openai';
import { AuthenticationError, BadRequestError, NotFoundError } from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import {
  closeAll,
  NATIVE,
  TRANSLATED,
  PATHS,
  scripted,
  harness,
  weather,
} from '../../test/support/gateway-responses.js';

afterEach(closeAll);

describe('POST /v1/responses, natively and translated', () => {
  it('continues by previous_response_id, per key: the engine gets the whole conversation, another key gets 400', async () => {
    const native = await scripted((body, res) => {
      const usage = { input_tokens: 1, output_tokens: 1, total_tokens: 2 };
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          id: `resp_n${Math.random().toString(36).slice(2)}`,
          object: 'response',
          status: 'completed',
          model: body.model,
          output: [
            {
              id: 'msg_1',
              type: 'message',
              role: 'assistant',
              status: 'completed',
              content: [{ type: 'output_text', text: 'hello', annotations: [] }],
            },
          ],
          usage,
        }),
      );
    }, 'vllm');
    const h = await harness({ [NATIVE]: [native.replica] });
    const first = await h.client().responses.create({ model: NATIVE, input: 'My name is Ada.' });
    const second = await h
      .client()
      .responses.create({ model: NATIVE, input: 'What is my name?', previous_response_id: first.id });
    expect(second.output_text).toBe('hello');
    const sent = native.seen[1]!;
    expect(sent.path, 'passed through to the engine’s own route').toBe('/v1/responses');
    expect(sent.body.store, 'the engine keeps nothing').toBe(false);
    expect('previous_response_id' in sent.body, 'the engine never sees an id it does not know').toBe(false);
    expect(
      JSON.stringify(sent.body.input),
      'the whole conversation: the first input, its answer, the new input',
    ).toMatch(/My name is Ada\..*hello.*What is my name\?/);

    for (const path of PATHS) {
      const a = await h.client().responses.create({
        model: path === NATIVE ? TRANSLATED : path,
        input: 'Tell me about rivers.',
        max_output_tokens: 3,
      });
      const b = await h.client().responses.create({
        model: TRANSLATED,
        input: 'And stones?',
        previous_response_id: a.id,
        max_output_tokens: 3,
      });
      expect(b.previous_response_id, path).toBe(a.id);
      const stranger = await h
        .client(h.other)
        .responses.create({ model: TRANSLATED, input: 'x', previous_response_id: a.id })
        .catch((e: unknown) => e);
      expect(stranger, 'another key’s response does not exist for this key').toBeInstanceOf(BadRequestError);
      expect((stranger as BadRequestError).code).toBe('previous_response_not_found');
      expect((stranger as BadRequestError).message).toContain(a.id);
      await expect(h.client(h.other).responses.retrieve(a.id)).rejects.toBeInstanceOf(NotFoundError);
    }
  });

  it("keeps its own ids whatever the engine answers: two keys given one engine id keep apart, and the engine's id still continues", async () => {
    // Kept responses were keyed by the engine's id alone: an engine answering key B with the id it gave key A made
    // B's answer take A's kept one (owner and body). The router's own random ids now name what it keeps.
    const native = await scripted((body, res) => {
      const text = JSON.stringify(body.input).includes('from A') ? 'answer for A' : 'answer for B';
      const response = {
        id: 'resp_engine_same',
        object: 'response',
        status: 'completed',
        model: body.model,
        output: [
          {
            id: 'msg_1',
            type: 'message',
            role: 'assistant',
            status: 'completed',
            content: [{ type: 'output_text', text, annotations: [] }],
          },
        ],
        usage: { input_tokens: 1, output_tokens: 1, total_tokens: 2 },
      };
      if (body.stream === true) {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        const event = (type: string, n: number) =>
          `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: n, response })}\n\n`;
        res.end(event('response.created', 0) + event('response.completed', 1));
        return;
      }
      const whole = JSON.stringify(response);
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(whole) });
      res.end(whole);
    }, 'vllm');
    const h = await harness({ [NATIVE]: [native.replica] });
    const a = await h.client().responses.create({ model: NATIVE, input: 'from A' });
    const b = await h.client(h.other).responses.create({ model: NATIVE, input: 'from B' });
    expect(a.id, "the router's own id, not the engine's").toMatch(/^resp_[0-9a-f]{32}$/);
    expect(b.id).toMatch(/^resp_[0-9a-f]{32}$/);
    expect(a.id).not.toBe(b.id);
    expect((await h.client().responses.retrieve(a.id)).output_text, "A's kept answer is A's").toBe('answer for A');
    await expect(h.client(h.other).responses.retrieve(a.id), "B cannot read A's").rejects.toBeInstanceOf(NotFoundError);
    // A stream has every event's response id replaced, and what is kept under it is the streamed answer.
    const stream = await h.client().responses.create({ model: NATIVE, input: 'from A, streamed', stream: true });
    const ids = new Set<string>();
    for await (const e of stream) if ('response' in e) ids.add(e.response.id);
    expect(ids.size, 'one id throughout the stream').toBe(1);
    const [streamed] = [...ids];
    expect(streamed).toMatch(/^resp_[0-9a-f]{32}$/);
    expect((await h.client().responses.retrieve(streamed!)).output_text).toBe('answer for A');
    // A client that holds the engine's id (from before this version, or an answer too big to rewrite) continues its own key's newest.
    const next = await h
      .client(h.other)
      .responses.create({ model: NATIVE, input: 'and then?', previous_response_id: 'resp_engine_same' });
    expect(next.output_text).toBe('answer for B');
    expect(
      JSON.stringify(native.seen.at(-1)!.body.input),
      "B's engine id continues B's conversation, never A's",
    ).toMatch(/from B/);
    expect(JSON.stringify(native.seen.at(-1)!.body.input)).not.toMatch(/from A/);
  });

  it('round-trips a function tool on both paths: a forced call, then its output by previous_response_id', async () => {
    const h = await harness();
    for (const path of PATHS) {
      const first = await h
        .client()
        .responses.create({ model: path, input: 'Weather in Oslo?', tools: [weather], tool_choice: 'required' });
      const call = first.output.find((o): o is OpenAI.Responses.ResponseFunctionToolCall => o.type === 'function_call');
      expect(call?.name, path).toBe('get_weather');
      expect(JSON.parse(call!.arguments), path).toEqual({ seed: expect.any(Number) });
      const answer = await h.client().responses.create({
        model: path,
        tools: [weather],
        previous_response_id: first.id,
        input: [{ type: 'function_call_output', call_id: call!.call_id, output: '21 °C, sunny' }],
        max_output_tokens: 4,
      });
      expect(answer.output_text.split(' '), path).toHaveLength(4);
    }
  });

  it('lists the items a response answered, the previous conversation included, pages and all', async () => {
    const h = await harness();
    const first = await h
      .client()
      .responses.create({ model: TRANSLATED, input: 'My name is Ada.', max_output_tokens: 2 });
    const second = await h.client().responses.create({
      model: TRANSLATED,
      input: [{ role: 'user', content: 'What is my name?' }],
      previous_response_id: first.id,
      max_output_tokens: 2,
    });
    const text = (item: unknown) => JSON.stringify(item);
    const all: unknown[] = [];
    for await (const item of h.client().responses.inputItems.list(second.id, { order: 'asc', limit: 1 }))
      all.push(item);
    expect(all, 'the first input, its answer, the second input: not the second answer').toHaveLength(3);
    expect(text(all[0])).toContain('My name is Ada.');
    expect(text(all[1])).toContain(first.output_text);
    expect(text(all[2])).toContain('What is my name?');
    const newest = await h.client().responses.inputItems.list(second.id);
    expect(text(newest.data[0]), 'newest first by default').toContain('What is my name?');
    await expect(h.client(h.other).responses.inputItems.list(second.id), 'another key’s').rejects.toBeInstanceOf(
      NotFoundError,
    );
    // The query is declared on the route: a page past 100 or an order of its own is refused, naming the field.
    for (const [query, param] of [
      ['limit=101', 'limit'],
      ['limit=0', 'limit'],
      ['order=newest', 'order'],
    ] as const) {
      const res = await fetch(`${h.url}/v1/responses/${second.id}/input_items?${query}`, {
        headers: { authorization: `Bearer ${h.secret}` },
      });
      expect(res.status, query).toBe(400);
      const body = (await res.json()) as { error: { param: string | null; message: string } };
      expect(body.error.param, query).toBe(param);
      expect(body.error.message, query).toMatch(new RegExp(`^${param}: want `));
    }
  });

  it('resolves the item references the AI SDK sends for earlier answers: a second turn and a tool loop, on both paths', async () => {
    const h = await harness();
    const provider = createOpenAI({ baseURL: `${h.url}/v1`, apiKey: h.secret });
    for (const path of PATHS) {
      const first = await generateText({
        model: provider(path),
        prompt: 'My name is Ada.',
        maxOutputTokens: 3,
        maxRetries: 0,
      });
      // With store (its default) the SDK sends the assistant turn back as an item_reference to its id.
      const second = await generateText({
        model: provider(path),
        messages: [
          { role: 'user', content: 'My name is Ada.' },
          ...first.response.messages,
          { role: 'user', content: 'What is my name?' },
        ],
        maxOutputTokens: 3,
        maxRetries: 0,
      });
      expect(second.text.split(' '), path).toHaveLength(3);
      const loop = await generateText({
        model: provider(path),
        prompt: 'Weather in Oslo?',
        tools: {
          get_weather: tool({
            description: 'the weather',
            inputSchema: z.object({ seed: z.number() }),
            execute: async () => '21 °C',
          }),
        },
        prepareStep: ({ stepNumber }) => ({ toolChoice: stepNumber === 0 ? 'required' : 'none' }),
        stopWhen: stepCountIs(2),
        maxOutputTokens: 3,
        maxRetries: 0,
      });
      expect(
        loop.steps.map((step) => step.finishReason),
        path,
      ).toEqual(['tool-calls', expect.any(String)]);
      expect(loop.text.split(' '), `${path}: answered after the tool`).toHaveLength(3);
    }
  });

  it('deletes by key as OpenAI answers, and asks a key on every Responses route', async () => {
    const h = await harness();
    const res = await h.client().responses.create({ model: TRANSLATED, input: 'x', max_output_tokens: 1 });
    const strangerDelete = await fetch(`${h.url}/v1/responses/${res.id}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${h.other}` },
    });
    expect(strangerDelete.status, 'another key cannot delete it').toBe(404);
    const deleted = await fetch(`${h.url}/v1/responses/${res.id}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${h.secret}` },
    });
    expect(await deleted.json()).toEqual({ id: res.id, object: 'response', deleted: true });
    await expect(h.client().responses.retrieve(res.id)).rejects.toBeInstanceOf(NotFoundError);
    for (const [method, path] of [
      ['POST', '/v1/responses'],
      ['GET', `/v1/responses/${res.id}`],
      ['GET', `/v1/responses/${res.id}/input_items`],
      ['DELETE', `/v1/responses/${res.id}`],
    ] as const) {
      const r = await fetch(`${h.url}${path}`, {
        method,
        headers: { 'content-type': 'application/json' },
        ...(method === 'POST' ? { body: '{}' } : {}),
      });
      expect(r.status, `${method} ${path} without a key`).toBe(401);
    }
    await expect(h.client('sk-wrong').responses.create({ model: NATIVE, input: 'x' })).rejects.toBeInstanceOf(
      AuthenticationError,
    );
  });
});
