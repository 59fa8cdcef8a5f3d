import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { parseRequest, toChat } from './request.js';
import { keptItems, toResponse, usageOf } from './response.js';

const call = toChat(
  parseRequest({
    model: 'alias',
    input: 'hi',
    instructions: 'be brief',
    max_output_tokens: 32,
    metadata: { a: 'b' },
    user: 'u',
  }),
).call;

describe('toResponse', () => {
  it('text becomes a message item, usage the Responses names, the request its echoes', () => {
    const r = toResponse(
      {
        choices: [{ message: { content: 'hello' }, finish_reason: 'stop' }],
        usage: {
          prompt_tokens: 5,
          completion_tokens: 2,
          prompt_tokens_details: { cached_tokens: 3 },
          completion_tokens_details: { reasoning_tokens: 1 },
        },
      },
      call,
      { id: 'resp_x', createdAtS: 1700000000 },
    );
    expect(r).toMatchObject({
      id: 'resp_x',
      object: 'response',
      created_at: 1700000000,
      status: 'completed',
      error: null,
      incomplete_details: null,
      model: 'alias',
      instructions: 'be brief',
      max_output_tokens: 32,
      metadata: { a: 'b' },
      user: 'u',
      store: true,
      previous_response_id: null,
      usage: {
        input_tokens: 5,
        input_tokens_details: { cached_tokens: 3 },
        output_tokens: 2,
        output_tokens_details: { reasoning_tokens: 1 },
        total_tokens: 7,
      },
    });
    expect(r.output).toEqual([
      {
        id: expect.stringMatching(/^msg_[0-9a-f]{32}$/),
        type: 'message',
        status: 'completed',
        role: 'assistant',
        content: [{ type: 'output_text', text: 'hello', annotations: [] }],
      },
    ]);
  });

  it('a new id and the present time when none is given', () => {
    const before = Math.floor(Date.now() / 1000);
    const r = toResponse({ choices: [{ message: { content: 'x' }, finish_reason: 'stop' }] }, call);
    expect(r.id).toMatch(/^resp_[0-9a-f]{32}$/);
    expect(r.created_at).toBeGreaterThanOrEqual(before);
  });

  it('tool calls become function_call items with the chat call id; reasoning comes first', () => {
    const r = toResponse(
      {
        choices: [
          {
            message: {
              content: null,
              reasoning_content: 'think',
              tool_calls: [
                { id: 'call_1', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } },
                { id: 'call_2', function: { name: 'get_time', arguments: '{}' } },
              ],
            },
            finish_reason: 'tool_calls',
          },
        ],
      },
      call,
    );
    expect(r.status).toBe('completed');
    expect(r.output).toEqual([
      {
        id: expect.stringMatching(/^rs_/),
        type: 'reasoning',
        summary: [],
        content: [{ type: 'reasoning_text', text: 'think' }],
        status: 'completed',
      },
      {
        id: expect.stringMatching(/^fc_/),
        type: 'function_call',
        call_id: 'call_1',
        name: 'get_weather',
        arguments: '{"city":"Oslo"}',
        status: 'completed',
      },
      {
        id: expect.stringMatching(/^fc_/),
        type: 'function_call',
        call_id: 'call_2',
        name: 'get_time',
        arguments: '{}',
        status: 'completed',
      },
    ]);
  });

  it("vLLM's reasoning field is read as well", () => {
    const r = toResponse({ choices: [{ message: { content: 'a', reasoning: 'why' }, finish_reason: 'stop' }] }, call);
    expect(r.output[0]).toMatchObject({ type: 'reasoning', content: [{ text: 'why' }] });
  });

  const statuses: Array<[string, string, unknown]> = [
    ['stop', 'completed', null],
    ['tool_calls', 'completed', null],
    ['length', 'incomplete', { reason: 'max_output_tokens' }],
    ['content_filter', 'incomplete', { reason: 'content_filter' }],
  ];
  it.each(statuses)('finish %s is status %s', (finish, status, details) => {
    const r = toResponse({ choices: [{ message: { content: 'x' }, finish_reason: finish }] }, call);
    expect(r.status).toBe(status);
    expect(r.incomplete_details).toEqual(details);
    expect(r.output[0]?.status, 'the cut message is incomplete too').toBe(status);
  });

  it('a refusal is a refusal part', () => {
    const r = toResponse({ choices: [{ message: { content: null, refusal: 'no' }, finish_reason: 'stop' }] }, call);
    expect(r.output[0]).toMatchObject({ type: 'message', content: [{ type: 'refusal', refusal: 'no' }] });
  });

  it('logprobs are carried on the text part', () => {
    const r = toResponse(
      {
        choices: [
          {
            message: { content: 'a' },
            finish_reason: 'stop',
            logprobs: {
              content: [
                { token: 'a', logprob: -0.5, bytes: [97], top_logprobs: [{ token: 'a', logprob: -0.5, bytes: [97] }] },
              ],
            },
          },
        ],
      },
      call,
    );
    expect(r.output[0]).toMatchObject({
      content: [
        {
          logprobs: [
            { token: 'a', logprob: -0.5, bytes: [97], top_logprobs: [{ token: 'a', logprob: -0.5, bytes: [97] }] },
          ],
        },
      ],
    });
  });

  it('absent usage counts zero', () => {
    expect(usageOf(undefined)).toEqual({
      input_tokens: 0,
      input_tokens_details: { cached_tokens: 0 },
      output_tokens: 0,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: 0,
    });
  });
});

describe('keptItems', () => {
  it('is the previous conversation, this input, then this output', () => {
    const previous = [{ type: 'message', role: 'user', content: 'first' }];
    const { call: next } = toChat(
      parseRequest({ model: 'm', input: 'second', previous_response_id: 'resp_1' }),
      previous,
    );
    const r = toResponse({ choices: [{ message: { content: 'answer' }, finish_reason: 'stop' }] }, next);
    expect(keptItems(next, r)).toEqual([
      previous[0],
      { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'second' }] },
      r.output[0],
    ]);
    // And the kept items continue the conversation as chat messages.
    const { chat } = toChat(
      parseRequest({ model: 'm', input: 'third', previous_response_id: r.id }),
      keptItems(next, r),
    );
    expect(chat.messages).toEqual([
      { role: 'user', content: 'first' },
      { role: 'user', content: 'second' },
      { role: 'assistant', content: 'answer' },
      { role: 'user', content: 'third' },
    ]);
  });
});

describe('the openai SDK reads a translated answer', () => {
  it('responses.create(): output_text from the message item, and the function calls', async () => {
    const answer = toResponse(
      {
        choices: [
          {
            message: {
              content: 'Checking.',
              tool_calls: [{ id: 'call_1', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } }],
            },
            finish_reason: 'tool_calls',
          },
        ],
        usage: { prompt_tokens: 4, completion_tokens: 3 },
      },
      call,
    );
    const server = createServer((req, res) => {
      req.resume();
      req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answer)));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const client = new OpenAI({
        baseURL: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
        apiKey: 'unused',
        maxRetries: 0,
      });
      const r = await client.responses.create({ model: 'alias', input: 'hi' });
      expect(r.output_text).toBe('Checking.');
      expect(
        r.output
          .filter((o) => o.type === 'function_call')
          .map((o) => [o.call_id, o.name, JSON.parse(o.arguments) as unknown]),
      ).toEqual([['call_1', 'get_weather', { city: 'Oslo' }]]);
      expect(r.usage?.total_tokens).toBe(7);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
