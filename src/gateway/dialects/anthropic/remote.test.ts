// The remote direction of the Messages translation (api: anthropic): the
// internal chat request as a Messages request, and a Messages answer, whole
// or streamed, as chat. Tables, and round trips through the client
// direction (request.ts, response.ts), so the two directions cannot drift.
import { describe, expect, it } from 'vitest';
import { toChatRequest } from './request.js';
import { messageToCompletion, MessagesToChatStream } from './remote-answer.js';
import { DEFAULT_MAX_TOKENS, toMessagesRequest } from './remote-request.js';
import { finishReasonOf, stopReasonOf, toMessage } from './response.js';

const chat = (extra: Record<string, unknown> = {}) => ({
  model: 'claude-x',
  messages: [{ role: 'user', content: 'hi' }],
  ...extra,
});

/** The chat chunks in chat SSE text, [DONE] as the string. */
function chunks(sse: string): unknown[] {
  return sse
    .split('\n\n')
    .filter((e) => e.startsWith('data: '))
    .map((e) => (e === 'data: [DONE]' ? '[DONE]' : JSON.parse(e.slice(6))));
}

describe('a chat request sent to an Anthropic remote', () => {
  it.each([
    [
      'system and developer messages become the top-level system',
      chat({
        messages: [
          { role: 'system', content: 'be brief' },
          { role: 'developer', content: [{ type: 'text', text: 'and kind' }] },
          { role: 'user', content: 'hi' },
        ],
      }),
      { system: 'be brief\n\nand kind', messages: [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }] },
    ],
    [
      'max_tokens, else max_completion_tokens, else the default Anthropic requires',
      chat({ max_completion_tokens: 7 }),
      { max_tokens: 7 },
    ],
    ['no max_tokens at all', chat(), { max_tokens: DEFAULT_MAX_TOKENS }],
    ['stop as stop_sequences', chat({ stop: 'END' }), { stop_sequences: ['END'] }],
    ['sampling and streaming', chat({ temperature: 0.5, top_p: 0.9, top_k: 5, stream: true }), { stream: true }],
    [
      'function tools and a named tool_choice, with parallel calls off',
      chat({
        tools: [{ type: 'function', function: { name: 'f', description: 'd', parameters: { type: 'object' } } }],
        tool_choice: { type: 'function', function: { name: 'f' } },
        parallel_tool_calls: false,
      }),
      {
        tools: [{ name: 'f', description: 'd', input_schema: { type: 'object' } }],
        tool_choice: { type: 'tool', name: 'f', disable_parallel_tool_use: true },
      },
    ],
    [
      'a function without parameters takes an empty schema; required is any',
      chat({ tools: [{ type: 'function', function: { name: 'g' } }], tool_choice: 'required' }),
      { tools: [{ name: 'g', input_schema: { type: 'object', properties: {} } }], tool_choice: { type: 'any' } },
    ],
    [
      "an assistant's tool calls, then the results, then the user's next words in one user turn",
      chat({
        messages: [
          { role: 'user', content: 'weather?' },
          {
            role: 'assistant',
            content: null,
            tool_calls: [{ id: 'c1', type: 'function', function: { name: 'w', arguments: '{"city":"Oslo"}' } }],
          },
          { role: 'tool', tool_call_id: 'c1', content: 'rain' },
          { role: 'user', content: 'thanks' },
        ],
      }),
      {
        messages: [
          { role: 'user', content: [{ type: 'text', text: 'weather?' }] },
          { role: 'assistant', content: [{ type: 'tool_use', id: 'c1', name: 'w', input: { city: 'Oslo' } }] },
          {
            role: 'user',
            content: [
              { type: 'tool_result', tool_use_id: 'c1', content: 'rain' },
              { type: 'text', text: 'thanks' },
            ],
          },
        ],
      },
    ],
    [
      'images: a data: URL as base64, any other URL as a url source',
      chat({
        messages: [
          {
            role: 'user',
            content: [
              { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } },
              { type: 'image_url', image_url: { url: 'https://x/y.png' } },
            ],
          },
        ],
      }),
      {
        messages: [
          {
            role: 'user',
            content: [
              { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AAAA' } },
              { type: 'image', source: { type: 'url', url: 'https://x/y.png' } },
            ],
          },
        ],
      },
    ],
    ['the user as metadata.user_id', chat({ user: 'u1' }), { metadata: { user_id: 'u1' } }],
  ])('%s', (_why, body, expected) => {
    expect(toMessagesRequest(body)).toMatchObject(expected);
  });

  it('leaves out what changes nothing the model writes, and never sends stream_options', () => {
    const out = toMessagesRequest(chat({ seed: 3, stream_options: { include_usage: true }, presence_penalty: 0 }));
    expect(Object.keys(out).sort()).toEqual(['max_tokens', 'messages', 'model']);
  });

  it.each([
    ['n above 1', chat({ n: 2 }), /n: .*Anthropic/],
    ['logprobs', chat({ logprobs: true }), /logprobs/],
    ['a JSON schema response format', chat({ response_format: { type: 'json_object' } }), /response_format/],
    ['an audio part', chat({ messages: [{ role: 'user', content: [{ type: 'input_audio' }] }] }), /input_audio/],
  ])('refuses %s, naming it', (_why, body, message) => {
    expect(() => toMessagesRequest(body)).toThrow(message);
  });

  it("round-trips a client's Messages request: Messages to chat and back says the same", () => {
    const client = {
      model: 'claude-x',
      max_tokens: 50,
      system: 'be brief',
      stop_sequences: ['END'],
      temperature: 0.2,
      messages: [
        { role: 'user', content: [{ type: 'text', text: 'weather?' }] },
        { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'w', input: { city: 'Oslo' } }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: 'rain' }] },
      ],
      tools: [{ name: 'w', description: 'weather', input_schema: { type: 'object' } }],
      tool_choice: { type: 'any' },
    };
    expect(toMessagesRequest(toChatRequest(client).chat)).toEqual({ ...client, stream: undefined });
  });
});

describe("an Anthropic remote's whole answer as chat", () => {
  const message = (extra: Record<string, unknown> = {}) => ({
    id: 'msg_abc',
    type: 'message',
    role: 'assistant',
    model: 'claude-x',
    content: [{ type: 'text', text: 'hello' }],
    stop_reason: 'end_turn',
    stop_sequence: null,
    usage: { input_tokens: 10, output_tokens: 3 },
    ...extra,
  });

  it('carries the text, the id, the model and the usage the router counts', () => {
    expect(messageToCompletion(message(), 1700)).toEqual({
      id: 'chatcmpl-abc',
      object: 'chat.completion',
      created: 1700,
      model: 'claude-x',
      choices: [{ index: 0, message: { role: 'assistant', content: 'hello' }, finish_reason: 'stop' }],
      usage: { prompt_tokens: 10, completion_tokens: 3, total_tokens: 13 },
    });
  });

  it('counts cache reads and writes as prompt tokens, reads as cached', () => {
    const usage = { input_tokens: 2, output_tokens: 1, cache_read_input_tokens: 5, cache_creation_input_tokens: 3 };
    expect(messageToCompletion(message({ usage }), 0).usage).toEqual({
      prompt_tokens: 10,
      completion_tokens: 1,
      total_tokens: 11,
      prompt_tokens_details: { cached_tokens: 5 },
    });
  });

  it('turns tool_use blocks into tool calls and thinking into reasoning_content', () => {
    const out = messageToCompletion(
      message({
        content: [
          { type: 'thinking', thinking: 'hmm', signature: 's' },
          { type: 'tool_use', id: 't1', name: 'w', input: { city: 'Oslo' } },
        ],
        stop_reason: 'tool_use',
      }),
      0,
    ) as { choices: [{ message: unknown; finish_reason: string }] };
    expect(out.choices[0]).toEqual({
      index: 0,
      message: {
        role: 'assistant',
        content: null,
        reasoning_content: 'hmm',
        tool_calls: [{ id: 't1', type: 'function', function: { name: 'w', arguments: '{"city":"Oslo"}' } }],
      },
      finish_reason: 'tool_calls',
    });
  });

  it.each([
    ['end_turn', 'stop'],
    ['stop_sequence', 'stop'],
    ['max_tokens', 'length'],
    ['model_context_window_exceeded', 'length'],
    ['tool_use', 'tool_calls'],
    ['refusal', 'content_filter'],
    ['pause_turn', 'stop'],
  ])('stop_reason %s is finish_reason %s, and comes back as it went where chat can say it', (stop, finish) => {
    expect(finishReasonOf(stop)).toBe(finish);
    const back = stopReasonOf(finish, stop === 'stop_sequence' ? 'END' : null, {
      model: 'm',
      stream: false,
      stopSequences: ['END'],
    });
    if (stop !== 'pause_turn' && stop !== 'model_context_window_exceeded') expect(back.reason).toBe(stop);
  });

  it('keeps the stop sequence that matched, which the Messages dialect reads back as stop_sequence', () => {
    const completion = messageToCompletion(message({ stop_reason: 'stop_sequence', stop_sequence: 'END' }), 0);
    const back = toMessage(
      completion as Parameters<typeof toMessage>[0],
      {
        model: 'claude-x',
        stream: false,
        stopSequences: ['END'],
      },
      'r',
    );
    expect([back.stop_reason, back.stop_sequence]).toEqual(['stop_sequence', 'END']);
  });
});

describe("an Anthropic remote's stream as chat", () => {
  const events = [
    {
      type: 'message_start',
      message: { id: 'msg_1', model: 'claude-x', usage: { input_tokens: 9, output_tokens: 1 } },
    },
    { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } },
    { type: 'ping' },
    { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Hel' } },
    { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'lo' } },
    { type: 'content_block_stop', index: 0 },
    { type: 'content_block_start', index: 1, content_block: { type: 'tool_use', id: 't1', name: 'w', input: {} } },
    { type: 'content_block_delta', index: 1, delta: { type: 'input_json_delta', partial_json: '{"city":' } },
    { type: 'content_block_delta', index: 1, delta: { type: 'input_json_delta', partial_json: '"Oslo"}' } },
    { type: 'content_block_stop', index: 1 },
    { type: 'message_delta', delta: { stop_reason: 'tool_use', stop_sequence: null }, usage: { output_tokens: 12 } },
    { type: 'message_stop' },
  ];

  it('turns each event into the chat chunk that says the same, and ends with the usage and [DONE]', () => {
    const t = new MessagesToChatStream(true, 5);
    const out = chunks(events.map((e) => t.push(e)).join('') + t.end());
    const deltas = out.map((c) =>
      c === '[DONE]' ? c : ((c as { choices: [{ delta: unknown; finish_reason: unknown }] }).choices[0] ?? c),
    );
    expect(deltas).toEqual(
      [
        { index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null },
        { index: 0, delta: { content: 'Hel' }, finish_reason: null },
        { index: 0, delta: { content: 'lo' }, finish_reason: null },
        {
          index: 0,
          delta: { tool_calls: [{ index: 0, id: 't1', type: 'function', function: { name: 'w', arguments: '' } }] },
          finish_reason: null,
        },
        { index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: '{"city":' } }] }, finish_reason: null },
        { index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: '"Oslo"}' } }] }, finish_reason: null },
        { index: 0, delta: {}, finish_reason: 'tool_calls' },
        // The usage chunk: no choices.
        { choices: [], usage: { prompt_tokens: 9, completion_tokens: 12, total_tokens: 21 } },
        '[DONE]',
      ].map((d) => (typeof d === 'object' && 'usage' in d ? expect.objectContaining(d) : d)),
    );
    expect(out[0]).toMatchObject({ id: 'chatcmpl-1', object: 'chat.completion.chunk', model: 'claude-x', created: 5 });
  });

  it('sends no usage chunk when the request did not ask for one', () => {
    const t = new MessagesToChatStream(false, 0);
    const out = chunks(events.map((e) => t.push(e)).join(''));
    expect(out.at(-1)).toBe('[DONE]');
    expect(out.some((c) => typeof c === 'object' && (c as { usage?: unknown }).usage)).toBe(false);
  });

  it("turns the remote's error event into chat's error chunk, and writes nothing after it", () => {
    const t = new MessagesToChatStream(true, 0);
    t.push(events[0]!);
    const err = t.push({ type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } });
    expect(chunks(err)).toEqual([{ error: { message: 'Overloaded', type: 'overloaded_error' } }]);
    expect(t.end()).toBe('');
  });

  it('streams thinking as reasoning_content', () => {
    const t = new MessagesToChatStream(false, 0);
    const out = t.push({ type: 'content_block_delta', index: 0, delta: { type: 'thinking_delta', thinking: 'so' } });
    expect(chunks(out)).toMatchObject([{ choices: [{ delta: { reasoning_content: 'so' } }] }]);
  });
});
