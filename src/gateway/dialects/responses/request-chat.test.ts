// The Responses request translated to chat, field by field: a table of
// bodies and the chat body each becomes.
import { describe, expect, it } from 'vitest';
import { parseRequest, toChat } from './request.js';

const base = { model: 'm' };

function chatOf(body: Record<string, unknown>, previous: unknown[] = []): Record<string, unknown> {
  return toChat(parseRequest(body), previous).chat;
}

describe('toChat', () => {
  const cases: Array<[string, Record<string, unknown>, Record<string, unknown>]> = [
    [
      'a string input is one user message',
      { ...base, input: 'hi' },
      { model: 'm', stream: false, messages: [{ role: 'user', content: 'hi' }] },
    ],
    [
      'instructions go first, as a system message',
      { ...base, instructions: 'be brief', input: 'hi' },
      {
        messages: [
          { role: 'system', content: 'be brief' },
          { role: 'user', content: 'hi' },
        ],
      },
    ],
    [
      'message items with and without type; developer as system; leading system text joined',
      {
        ...base,
        input: [
          { role: 'developer', content: 'rules' },
          { type: 'message', role: 'system', content: [{ type: 'input_text', text: 'more rules' }] },
          { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'hi' }] },
          { role: 'assistant', content: 'hello' },
        ],
      },
      {
        messages: [
          { role: 'system', content: 'rules\n\nmore rules' },
          { role: 'user', content: 'hi' },
          { role: 'assistant', content: 'hello' },
        ],
      },
    ],
    [
      'instructions and leading system items are one system message; a later one stays where it is',
      {
        ...base,
        instructions: 'i',
        input: [
          { role: 'system', content: 's' },
          { role: 'user', content: 'u' },
          { role: 'developer', content: 'd' },
        ],
      },
      {
        messages: [
          { role: 'system', content: 'i\n\ns' },
          { role: 'user', content: 'u' },
          { role: 'system', content: 'd' },
        ],
      },
    ],
    [
      'images: a URL or a data URL, with their detail',
      {
        ...base,
        input: [
          {
            role: 'user',
            content: [
              { type: 'input_text', text: 'what is this' },
              { type: 'input_image', image_url: 'data:image/png;base64,AAAA', detail: 'low' },
              { type: 'input_image', image_url: 'https://example.com/a.png', detail: 'original' },
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
              { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA', detail: 'low' } },
              { type: 'image_url', image_url: { url: 'https://example.com/a.png' } },
            ],
          },
        ],
      },
    ],
    [
      "an earlier answer's output message (output_text, refusal) is the assistant's turn",
      {
        ...base,
        input: [
          { role: 'user', content: 'x' },
          {
            id: 'msg_1',
            type: 'message',
            status: 'completed',
            role: 'assistant',
            content: [
              { type: 'output_text', text: 'a', annotations: [] },
              { type: 'refusal', refusal: 'no' },
            ],
          },
          { role: 'user', content: 'y' },
        ],
      },
      {
        messages: [
          { role: 'user', content: 'x' },
          { role: 'assistant', content: 'a\nno' },
          { role: 'user', content: 'y' },
        ],
      },
    ],
    [
      'function calls join the assistant message they follow; consecutive ones are one turn; outputs are role:tool',
      {
        ...base,
        input: [
          { role: 'user', content: 'weather in Oslo and Bergen?' },
          { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'checking', annotations: [] }] },
          {
            type: 'function_call',
            id: 'fc_1',
            call_id: 'call_1',
            name: 'get_weather',
            arguments: '{"city":"Oslo"}',
            status: 'completed',
          },
          { type: 'function_call', id: 'fc_2', call_id: 'call_2', name: 'get_weather', arguments: '{"city":"Bergen"}' },
          { type: 'function_call_output', call_id: 'call_1', output: 'sunny' },
          { type: 'function_call_output', call_id: 'call_2', output: [{ type: 'input_text', text: 'rain' }] },
          { type: 'function_call', call_id: 'call_3', name: 'get_time', arguments: '{}' },
          { type: 'function_call_output', call_id: 'call_3', output: 'noon' },
        ],
      },
      {
        messages: [
          { role: 'user', content: 'weather in Oslo and Bergen?' },
          {
            role: 'assistant',
            content: 'checking',
            tool_calls: [
              { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } },
              { id: 'call_2', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Bergen"}' } },
            ],
          },
          { role: 'tool', tool_call_id: 'call_1', content: 'sunny' },
          { role: 'tool', tool_call_id: 'call_2', content: 'rain' },
          {
            role: 'assistant',
            content: null,
            tool_calls: [{ id: 'call_3', type: 'function', function: { name: 'get_time', arguments: '{}' } }],
          },
          { role: 'tool', tool_call_id: 'call_3', content: 'noon' },
        ],
      },
    ],
    [
      'reasoning items are dropped from the history',
      {
        ...base,
        input: [
          { role: 'user', content: 'x' },
          { type: 'reasoning', id: 'rs_1', summary: [], content: [{ type: 'reasoning_text', text: 'hm' }] },
          { role: 'assistant', content: 'ok' },
        ],
      },
      {
        messages: [
          { role: 'user', content: 'x' },
          { role: 'assistant', content: 'ok' },
        ],
      },
    ],
    [
      'function tools, with strict; tool_choice by name',
      {
        ...base,
        input: 'x',
        tools: [
          { type: 'function', name: 'f', description: 'does f', parameters: { type: 'object' }, strict: true },
          { type: 'function', name: 'g', parameters: null, strict: null },
        ],
        tool_choice: { type: 'function', name: 'f' },
      },
      {
        tools: [
          {
            type: 'function',
            function: { name: 'f', description: 'does f', parameters: { type: 'object' }, strict: true },
          },
          { type: 'function', function: { name: 'g' } },
        ],
        tool_choice: { type: 'function', function: { name: 'f' } },
      },
    ],
    ['tool_choice required', { ...base, input: 'x', tool_choice: 'required' }, { tool_choice: 'required' }],
    ['tool_choice none', { ...base, input: 'x', tool_choice: 'none' }, { tool_choice: 'none' }],
    [
      'text.format json_schema is response_format',
      {
        ...base,
        input: 'x',
        text: {
          format: { type: 'json_schema', name: 'out', schema: { type: 'object' }, strict: true, description: 'd' },
          verbosity: 'low',
        },
      },
      {
        response_format: {
          type: 'json_schema',
          json_schema: { name: 'out', schema: { type: 'object' }, strict: true, description: 'd' },
        },
      },
    ],
    [
      'text.format json_object',
      { ...base, input: 'x', text: { format: { type: 'json_object' } } },
      { response_format: { type: 'json_object' } },
    ],
    [
      'sampling, limits, reasoning effort and user pass; streams ask for usage',
      {
        ...base,
        input: 'x',
        max_output_tokens: 64,
        temperature: 0.5,
        top_p: 0.9,
        parallel_tool_calls: false,
        reasoning: { effort: 'low', summary: 'auto' },
        user: 'u1',
        stream: true,
      },
      {
        max_tokens: 64,
        temperature: 0.5,
        top_p: 0.9,
        parallel_tool_calls: false,
        reasoning_effort: 'low',
        user: 'u1',
        stream: true,
        stream_options: { include_usage: true },
      },
    ],
    [
      'logprobs asked by include and top_logprobs',
      { ...base, input: 'x', include: ['message.output_text.logprobs'], top_logprobs: 3 },
      { logprobs: true, top_logprobs: 3 },
    ],
  ];
  it.each(cases)('%s', (_name, body, want) => {
    const chat = chatOf(body);
    expect(chat).toMatchObject(want);
    for (const field of ['metadata', 'input', 'instructions', 'store', 'text', 'reasoning', 'max_output_tokens'])
      expect(chat, `${field} is not a chat field`).not.toHaveProperty(field);
  });
});
