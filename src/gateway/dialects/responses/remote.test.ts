// The remote direction of the Responses translation (api: responses): the
// internal chat request as a Responses request, and a Response, whole or
// streamed, as chat. Tables, and round trips through the client direction
// (request.ts, response.ts, stream.ts), so the two directions cannot drift.
import { describe, expect, it } from 'vitest';
import { parseRequest, toChat } from './request.js';
import { responseToCompletion, ResponsesToChatStream } from './remote-answer.js';
import { toResponsesRequest } from './remote-request.js';
import { finishOf, statusOf, toResponse } from './response.js';
import { ResponseStreamTranslator } from './stream.js';
import { takesResponsesNatively } from './native.js';

const chat = (extra: Record<string, unknown> = {}) => ({
  model: 'gpt-x',
  messages: [{ role: 'user', content: 'hi' }],
  ...extra,
});

function chunks(sse: string): unknown[] {
  return sse
    .split('\n\n')
    .filter((e) => e.startsWith('data: '))
    .map((e) => (e === 'data: [DONE]' ? '[DONE]' : JSON.parse(e.slice(6))));
}

/** SSE text's events' data, parsed. */
function events(sse: string): Record<string, unknown>[] {
  return sse
    .split('\n\n')
    .map((e) => e.split('\n').find((l) => l.startsWith('data: ')))
    .filter((l): l is string => l !== undefined)
    .map((l) => JSON.parse(l.slice(6)) as Record<string, unknown>);
}

describe('a chat request sent to a Responses remote', () => {
  it.each([
    ['a string input, store off', chat(), { input: [{ type: 'message', role: 'user', content: 'hi' }], store: false }],
    [
      'system and developer messages keep their role',
      chat({
        messages: [
          { role: 'system', content: 'be brief' },
          { role: 'user', content: 'hi' },
        ],
      }),
      { input: [{ type: 'message', role: 'system', content: 'be brief' }, expect.anything()] },
    ],
    ['max_tokens as max_output_tokens', chat({ max_tokens: 9 }), { max_output_tokens: 9 }],
    [
      'function tools, flattened, strict as chat meant it',
      chat({
        tools: [{ type: 'function', function: { name: 'f', description: 'd', parameters: { type: 'object' } } }],
        tool_choice: { type: 'function', function: { name: 'f' } },
      }),
      {
        tools: [{ type: 'function', name: 'f', description: 'd', parameters: { type: 'object' }, strict: false }],
        tool_choice: { type: 'function', name: 'f' },
      },
    ],
    [
      'a JSON schema response format as text.format',
      chat({ response_format: { type: 'json_schema', json_schema: { name: 's', schema: { type: 'object' } } } }),
      { text: { format: { type: 'json_schema', name: 's', schema: { type: 'object' } } } },
    ],
    ['reasoning effort', chat({ reasoning_effort: 'low' }), { reasoning: { effort: 'low' } }],
    [
      'logprobs as the include that asks for them',
      chat({ logprobs: true, top_logprobs: 2 }),
      { include: ['message.output_text.logprobs'], top_logprobs: 2 },
    ],
    [
      'tool calls as function_call items after the text, results as function_call_output',
      chat({
        messages: [
          {
            role: 'user',
            content: [
              { type: 'text', text: 'weather?' },
              { type: 'image_url', image_url: { url: 'u' } },
            ],
          },
          {
            role: 'assistant',
            content: 'let me look',
            tool_calls: [{ id: 'c1', type: 'function', function: { name: 'w', arguments: '{"city":"Oslo"}' } }],
          },
          { role: 'tool', tool_call_id: 'c1', content: 'rain' },
        ],
      }),
      {
        input: [
          {
            type: 'message',
            role: 'user',
            content: [
              { type: 'input_text', text: 'weather?' },
              { type: 'input_image', image_url: 'u', detail: 'auto' },
            ],
          },
          { type: 'message', role: 'assistant', content: 'let me look' },
          { type: 'function_call', call_id: 'c1', name: 'w', arguments: '{"city":"Oslo"}' },
          { type: 'function_call_output', call_id: 'c1', output: 'rain' },
        ],
      },
    ],
  ])('%s', (_why, body, expected) => {
    expect(toResponsesRequest(body)).toMatchObject(expected);
  });

  it('never sends stream_options, which is a chat field', () => {
    const out = toResponsesRequest(chat({ stream: true, stream_options: { include_usage: true }, seed: 1 }));
    expect(Object.keys(out).sort()).toEqual(['input', 'model', 'store', 'stream']);
  });

  it.each([
    ['n above 1', chat({ n: 3 }), /n: .*Responses/],
    ['a stop sequence, which the Responses API has not', chat({ stop: ['END'] }), /stop/],
    ['a tool that is not a function', chat({ tools: [{ type: 'custom' }] }), /only function tools/],
  ])('refuses %s, naming it', (_why, body, message) => {
    expect(() => toResponsesRequest(body)).toThrow(message);
  });

  it("round-trips a client's Responses request: to chat and back says the same", () => {
    const client = {
      model: 'gpt-x',
      input: [
        { type: 'message', role: 'user', content: 'weather?' },
        { type: 'function_call', call_id: 'c1', name: 'w', arguments: '{}' },
        { type: 'function_call_output', call_id: 'c1', output: 'rain' },
      ],
      max_output_tokens: 20,
      temperature: 0.3,
      tools: [{ type: 'function', name: 'w', parameters: { type: 'object' }, strict: false }],
      tool_choice: 'required',
    };
    const back = toResponsesRequest(toChat(parseRequest(client)).chat);
    expect(back).toEqual({ ...client, input: [{ ...client.input[0] }, ...client.input.slice(1)], store: false });
  });
});

describe("a Responses remote's whole answer as chat", () => {
  const response = (extra: Record<string, unknown> = {}) => ({
    id: 'resp_1',
    object: 'response',
    status: 'completed',
    model: 'gpt-x',
    output: [{ type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'hello' }] }],
    usage: { input_tokens: 8, output_tokens: 2, input_tokens_details: { cached_tokens: 4 } },
    ...extra,
  });

  it('carries the text, the id, the model and the usage the router counts', () => {
    expect(responseToCompletion(response(), 9)).toEqual({
      id: 'chatcmpl-1',
      object: 'chat.completion',
      created: 9,
      model: 'gpt-x',
      choices: [{ index: 0, message: { role: 'assistant', content: 'hello' }, finish_reason: 'stop' }],
      usage: {
        prompt_tokens: 8,
        completion_tokens: 2,
        total_tokens: 10,
        prompt_tokens_details: { cached_tokens: 4 },
        completion_tokens_details: { reasoning_tokens: 0 },
      },
    });
  });

  it('turns function_call items into tool calls, reasoning into reasoning_content, refusals into refusal', () => {
    const out = responseToCompletion(
      response({
        output: [
          { type: 'reasoning', content: [{ type: 'reasoning_text', text: 'hmm' }], summary: [] },
          { type: 'message', content: [{ type: 'refusal', refusal: 'no' }] },
          { type: 'function_call', call_id: 'c1', name: 'w', arguments: '{"a":1}' },
        ],
      }),
      0,
    ) as { choices: [unknown] };
    expect(out.choices[0]).toEqual({
      index: 0,
      message: {
        role: 'assistant',
        content: null,
        refusal: 'no',
        reasoning_content: 'hmm',
        tool_calls: [{ id: 'c1', type: 'function', function: { name: 'w', arguments: '{"a":1}' } }],
      },
      finish_reason: 'tool_calls',
    });
  });

  it.each([
    ['stop', { status: 'completed', output: [] }],
    ['length', { status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' } }],
    ['content_filter', { status: 'incomplete', incomplete_details: { reason: 'content_filter' } }],
  ] as const)('finish_reason %s comes back as it went', (finish, expected) => {
    expect(statusOf(finish)).toMatchObject(finish === 'stop' ? { status: 'completed' } : expected);
    expect(finishOf(expected)).toBe(finish);
  });

  it("round-trips the client direction's answer: a chat completion as a Response and back", () => {
    const completion = {
      choices: [
        {
          message: {
            content: 'hi',
            tool_calls: [{ id: 'c1', function: { name: 'w', arguments: '{}' } }],
          },
          finish_reason: 'tool_calls',
        },
      ],
      usage: { prompt_tokens: 3, completion_tokens: 4 },
    };
    const call = toChat(parseRequest({ model: 'm', input: 'x' })).call;
    const back = responseToCompletion(toResponse(completion, call), 0) as { choices: unknown[]; usage: unknown };
    expect(back.choices[0]).toMatchObject({
      message: { content: 'hi', tool_calls: [{ id: 'c1', function: { name: 'w', arguments: '{}' } }] },
      finish_reason: 'tool_calls',
    });
    expect(back.usage).toMatchObject({ prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 });
  });
});

describe("a Responses remote's stream as chat", () => {
  it("reads back the client direction's own stream: the same text, tool call, finish and usage", () => {
    // The events llmgw's Responses dialect writes for a chat stream: a real remote's sequence, made here.
    const call = toChat(parseRequest({ model: 'm', input: 'x', stream: true })).call;
    const forward = new ResponseStreamTranslator(call, { id: 'resp_abc', createdAtS: 1 });
    const sse =
      forward.push({ choices: [{ index: 0, delta: { content: 'Hel' } }] }) +
      forward.push({ choices: [{ index: 0, delta: { content: 'lo' } }] }) +
      forward.push({
        choices: [
          {
            index: 0,
            delta: { tool_calls: [{ index: 0, id: 'c1', function: { name: 'w', arguments: '{"a"' } }] },
          },
        ],
      }) +
      forward.push({ choices: [{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: ':1}' } }] } }] }) +
      forward.push({ choices: [{ index: 0, delta: {}, finish_reason: 'tool_calls' }] }) +
      forward.push({ choices: [], usage: { prompt_tokens: 5, completion_tokens: 6 } }) +
      forward.end();
    const t = new ResponsesToChatStream(true, 2);
    const out = chunks(
      events(sse)
        .map((e) => t.push(e))
        .join('') + t.end(),
    );
    const text = out.map((c) => (c as { choices?: [{ delta?: { content?: string } }] }).choices?.[0]?.delta?.content);
    expect(text.filter((s) => s).join('')).toBe('Hello');
    const args = out
      .flatMap((c) => (c as { choices?: [{ delta?: { tool_calls?: [{ function: { arguments: string } }] } }] }).choices)
      .flatMap((ch) => ch?.delta?.tool_calls ?? [])
      .map((tc) => tc.function.arguments)
      .join('');
    expect(args).toBe('{"a":1}');
    expect(out).toContainEqual(
      expect.objectContaining({ choices: [{ index: 0, delta: {}, finish_reason: 'tool_calls' }] }),
    );
    expect(out.at(-2)).toMatchObject({
      id: 'chatcmpl-abc',
      choices: [],
      usage: { prompt_tokens: 5, completion_tokens: 6 },
    });
    expect(out.at(-1)).toBe('[DONE]');
    expect(out[0]).toMatchObject({ choices: [{ delta: { role: 'assistant', content: '' } }] });
  });

  it('writes a function call whose arguments came only whole, at its item end', () => {
    const t = new ResponsesToChatStream(false, 0);
    t.push({
      type: 'response.output_item.added',
      output_index: 0,
      item: { type: 'function_call', call_id: 'c', name: 'f' },
    });
    const out = t.push({ type: 'response.output_item.done', output_index: 0, item: { arguments: '{"x":2}' } });
    expect(chunks(out)).toMatchObject([
      { choices: [{ delta: { tool_calls: [{ index: 0, function: { arguments: '{"x":2}' } }] } }] },
    ]);
  });

  it.each([
    ['response.failed', { type: 'response.failed', response: { error: { message: 'boom' } } }, 'boom'],
    ['error', { type: 'error', message: 'rate' }, 'rate'],
  ])("turns %s into chat's error chunk, and writes nothing after it", (_t, event, message) => {
    const t = new ResponsesToChatStream(true, 0);
    expect(chunks(t.push(event))).toEqual([{ error: { message, type: 'api_error' } }]);
    expect(t.end()).toBe('');
  });

  it('sends no usage chunk for a stream cut before its last event', () => {
    const t = new ResponsesToChatStream(true, 0);
    t.push({ type: 'response.output_text.delta', delta: 'a' });
    expect(chunks(t.end())).toEqual(['[DONE]']);
  });
});

describe('a Responses request to a Responses remote', () => {
  it.each([
    [
      'a remote speaking the Responses API',
      { engine: 'remote', remote: { kind: 'endpoint', timeoutMs: 0, api: 'responses' } },
      true,
    ],
    [
      'a remote speaking Messages',
      { engine: 'remote', remote: { kind: 'endpoint', timeoutMs: 0, api: 'anthropic' } },
      false,
    ],
    ['a chat remote', { engine: 'remote', remote: { kind: 'endpoint', timeoutMs: 0 } }, false],
    ['vLLM', { engine: 'vllm' }, true],
  ] as const)('goes as the client wrote it to %s: %s', (_why, replica, native) => {
    expect(takesResponsesNatively(replica)).toBe(native);
  });
});
