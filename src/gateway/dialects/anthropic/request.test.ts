import { describe, expect, it } from 'vitest';
import { isLlmgwError } from '../../../errors/index.js';
import { toChatRequest } from './request.js';

const base = { model: 'm', max_tokens: 16 };

describe('toChatRequest', () => {
  const cases: Array<[string, Record<string, unknown>, Record<string, unknown>]> = [
    [
      'a string message',
      { ...base, messages: [{ role: 'user', content: 'hi' }] },
      { model: 'm', max_tokens: 16, stream: false, messages: [{ role: 'user', content: 'hi' }] },
    ],
    [
      'a string system prompt goes first',
      { ...base, system: 'be brief', messages: [{ role: 'user', content: 'hi' }] },
      {
        messages: [
          { role: 'system', content: 'be brief' },
          { role: 'user', content: 'hi' },
        ],
      },
    ],
    [
      'system text blocks are joined',
      {
        ...base,
        system: [
          { type: 'text', text: 'a' },
          { type: 'text', text: 'b' },
        ],
        messages: [{ role: 'user', content: 'hi' }],
      },
      {
        messages: [
          { role: 'system', content: 'a\nb' },
          { role: 'user', content: 'hi' },
        ],
      },
    ],
    [
      'one text block is plain content',
      { ...base, messages: [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }] },
      { messages: [{ role: 'user', content: 'hi' }] },
    ],
    [
      'images: base64 as a data URL, url as is',
      {
        ...base,
        messages: [
          {
            role: 'user',
            content: [
              { type: 'text', text: 'what is this' },
              { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AAAA' } },
              { type: 'image', source: { type: 'url', url: 'https://example.com/a.png' } },
            ],
          },
        ],
      },
      {
        messages: [
          {
            role: 'user',
            content: [
              { type: 'text', text: 'what is this' },
              { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } },
              { type: 'image_url', image_url: { url: 'https://example.com/a.png' } },
            ],
          },
        ],
      },
    ],
    [
      'a tool round trip: tool_use → tool_calls, tool_result → role:tool first',
      {
        ...base,
        messages: [
          { role: 'user', content: 'weather?' },
          {
            role: 'assistant',
            content: [
              { type: 'text', text: 'checking' },
              { type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { city: 'Oslo' } },
            ],
          },
          {
            role: 'user',
            content: [
              { type: 'tool_result', tool_use_id: 'toolu_1', content: [{ type: 'text', text: 'sunny' }] },
              { type: 'text', text: 'and tomorrow?' },
            ],
          },
          { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_2', name: 'get_weather', input: {} }] },
          {
            role: 'user',
            content: [{ type: 'tool_result', tool_use_id: 'toolu_2', content: 'no data', is_error: true }],
          },
        ],
      },
      {
        messages: [
          { role: 'user', content: 'weather?' },
          {
            role: 'assistant',
            content: 'checking',
            tool_calls: [
              { id: 'toolu_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } },
            ],
          },
          { role: 'tool', tool_call_id: 'toolu_1', content: 'sunny' },
          { role: 'user', content: 'and tomorrow?' },
          {
            role: 'assistant',
            content: null,
            tool_calls: [{ id: 'toolu_2', type: 'function', function: { name: 'get_weather', arguments: '{}' } }],
          },
          { role: 'tool', tool_call_id: 'toolu_2', content: 'Error: no data' },
        ],
      },
    ],
    [
      'thinking blocks in history are dropped',
      {
        ...base,
        messages: [
          {
            role: 'assistant',
            content: [
              { type: 'thinking', thinking: 'hm', signature: 's' },
              { type: 'text', text: 'ok' },
            ],
          },
        ],
      },
      { messages: [{ role: 'assistant', content: 'ok' }] },
    ],
    [
      'tools and the four tool choices',
      {
        ...base,
        messages: [{ role: 'user', content: 'x' }],
        tools: [{ name: 'f', description: 'does f', input_schema: { type: 'object' } }],
        tool_choice: { type: 'any' },
      },
      {
        tools: [{ type: 'function', function: { name: 'f', description: 'does f', parameters: { type: 'object' } } }],
        tool_choice: 'required',
      },
    ],
    [
      'tool_choice auto',
      { ...base, messages: [{ role: 'user', content: 'x' }], tool_choice: { type: 'auto' } },
      { tool_choice: 'auto' },
    ],
    [
      'tool_choice none',
      { ...base, messages: [{ role: 'user', content: 'x' }], tool_choice: { type: 'none' } },
      { tool_choice: 'none' },
    ],
    [
      'tool_choice tool, no parallel calls',
      {
        ...base,
        messages: [{ role: 'user', content: 'x' }],
        tool_choice: { type: 'tool', name: 'f', disable_parallel_tool_use: true },
      },
      { tool_choice: { type: 'function', function: { name: 'f' } }, parallel_tool_calls: false },
    ],
    [
      'sampling, stops and stream pass; metadata does not',
      {
        ...base,
        messages: [{ role: 'user', content: 'x' }],
        temperature: 0.5,
        top_p: 0.9,
        top_k: 40,
        stop_sequences: ['END'],
        stream: true,
        metadata: { user_id: 'u' },
      },
      { temperature: 0.5, top_p: 0.9, top_k: 40, stop: ['END'], stream: true },
    ],
  ];
  it.each(cases)('%s', (_name, body, want) => {
    const { chat } = toChatRequest(body);
    expect(chat).toMatchObject(want);
    expect(chat).not.toHaveProperty('metadata');
  });

  it('a count_tokens body has no max_tokens, and its chat body none either', () => {
    expect(toChatRequest({ model: 'm', messages: [{ role: 'user', content: 'x' }] }, true).chat).toEqual({
      model: 'm',
      messages: [{ role: 'user', content: 'x' }],
    });
    expect(() => toChatRequest({ ...base, messages: [{ role: 'user', content: 'x' }] }, true)).toThrow(
      /counts the prompt only/,
    );
  });

  it('returns what the answer is translated back with', () => {
    expect(
      toChatRequest({
        ...base,
        model: 'alias',
        stream: true,
        stop_sequences: ['a', ''],
        messages: [{ role: 'user', content: 'x' }],
      }).call,
    ).toEqual({
      model: 'alias',
      stopSequences: ['a'],
      stream: true,
    });
  });

  const refusals: Array<[string, unknown, string, RegExp]> = [
    [
      'no max_tokens',
      { model: 'm', messages: [{ role: 'user', content: 'x' }] },
      'max_tokens',
      /max_tokens: is required/,
    ],
    [
      'max_tokens 0',
      { ...base, max_tokens: 0, messages: [{ role: 'user', content: 'x' }] },
      'max_tokens',
      /at least 1/,
    ],
    ['no model', { max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }, 'model', /model: is required/],
    ['no messages', { ...base }, 'messages', /messages: is required/],
    [
      'a system role in messages',
      { ...base, messages: [{ role: 'system', content: 'x' }] },
      'messages',
      /top-level "system"/,
    ],
    [
      'a document block',
      { ...base, messages: [{ role: 'user', content: [{ type: 'document', source: {} }] }] },
      'messages',
      /"document" block is not supported/,
    ],
    [
      'a bad image source',
      { ...base, messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'file' } }] }] },
      'messages',
      /messages\[0\]\.content\[0\]\.source/,
    ],
    [
      'a server tool',
      {
        ...base,
        messages: [{ role: 'user', content: 'x' }],
        tools: [{ type: 'web_search_20250305', name: 'web_search' }],
      },
      'tools',
      /only client tools/,
    ],
    [
      'a tool without a schema',
      { ...base, messages: [{ role: 'user', content: 'x' }], tools: [{ name: 'f' }] },
      'tools',
      /input_schema/,
    ],
    [
      'an unknown tool_choice',
      { ...base, messages: [{ role: 'user', content: 'x' }], tool_choice: { type: 'some' } },
      'tool_choice',
      /"auto", "any", "tool" or "none"/,
    ],
    [
      'an unknown field',
      { ...base, messages: [{ role: 'user', content: 'x' }], container: 'c' },
      'container',
      /container: not supported/,
    ],
    [
      'stop_sequences not strings',
      { ...base, messages: [{ role: 'user', content: 'x' }], stop_sequences: [1] },
      'stop_sequences',
      /list of strings/,
    ],
    [
      'an image in a tool result',
      {
        ...base,
        messages: [
          { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't', content: [{ type: 'image' }] }] },
        ],
      },
      'messages',
      /only text blocks/,
    ],
  ];
  it.each(refusals)('refuses %s, naming the field', (_name, body, param, message) => {
    let caught: unknown;
    try {
      toChatRequest(body);
    } catch (err) {
      caught = err;
    }
    expect(isLlmgwError(caught)).toBe(true);
    if (!isLlmgwError(caught)) return;
    expect(caught.code).toBe('LLMGW_BAD_REQUEST');
    expect(caught.status).toBe(400);
    expect(caught.context.param).toBe(param);
    expect(caught.message).toMatch(message);
  });
});
