import { describe, expect, it } from 'vitest';
import { isLlmgwError } from '../../../errors/index.js';
import { itemReferences, parseRequest, toChat, toNative } from './request.js';

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

  it('metadata, store and an empty text format send nothing', () => {
    expect(
      chatOf({ ...base, input: 'x', metadata: { a: 'b' }, store: false, text: { format: { type: 'text' } } }),
    ).toEqual({
      model: 'm',
      stream: false,
      messages: [{ role: 'user', content: 'x' }],
    });
  });

  it('a function_call answer fed back with its output continues the conversation', () => {
    // The round trip a client makes: our function_call output item, then its function_call_output.
    const previous = [
      { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'weather?' }] },
      {
        id: 'fc_9',
        type: 'function_call',
        call_id: 'call_9',
        name: 'get_weather',
        arguments: '{"city":"Oslo"}',
        status: 'completed',
      },
    ];
    const request = parseRequest({
      ...base,
      instructions: 'be brief',
      previous_response_id: 'resp_1',
      input: [{ type: 'function_call_output', call_id: 'call_9', output: '{"temp":3}' }],
    });
    const { chat, call } = toChat(request, previous);
    expect(chat.messages).toEqual([
      { role: 'system', content: 'be brief' },
      { role: 'user', content: 'weather?' },
      {
        role: 'assistant',
        content: null,
        tool_calls: [
          { id: 'call_9', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } },
        ],
      },
      { role: 'tool', tool_call_id: 'call_9', content: '{"temp":3}' },
    ]);
    expect(call.items, 'the conversation kept: previous items, then this input').toEqual([
      ...previous,
      request.input[0],
    ]);
    expect(call.previousResponseId).toBe('resp_1');
    expect(call.echo).toMatchObject({ instructions: 'be brief', previous_response_id: 'resp_1', store: true });
  });

  it('an item_reference resolves to the item of that id in the previous conversation', () => {
    const previous = [
      { type: 'message', role: 'user', content: 'x' },
      {
        id: 'msg_7',
        type: 'message',
        role: 'assistant',
        status: 'completed',
        content: [{ type: 'output_text', text: 'seven', annotations: [] }],
      },
    ];
    const request = parseRequest({
      ...base,
      previous_response_id: 'resp_1',
      input: [
        { type: 'item_reference', id: 'msg_7' },
        { role: 'user', content: 'again' },
      ],
    });
    const { chat, call } = toChat(request, previous);
    expect(chat.messages).toEqual([
      { role: 'user', content: 'x' },
      { role: 'assistant', content: 'seven' },
      { role: 'assistant', content: 'seven' },
      { role: 'user', content: 'again' },
    ]);
    expect(call.items[2], 'kept as the item, not the reference').toEqual(previous[1]);
    expect(() => toChat(parseRequest({ ...base, input: [{ type: 'item_reference', id: 'msg_8' }] }), previous)).toThrow(
      /item_reference "msg_8" names no item this key has kept/,
    );
  });

  it('an item_reference without a previous response resolves among the items looked up by id', () => {
    // The AI SDK's second step with store on: its first answer's text comes back as a reference, with no previous_response_id.
    const request = parseRequest({
      ...base,
      input: [
        { role: 'user', content: 'weather?' },
        { type: 'item_reference', id: 'msg_1' },
        { type: 'function_call', call_id: 'call_1', name: 'get_weather', arguments: '{}' },
        { type: 'function_call_output', call_id: 'call_1', output: 'sunny' },
      ],
    });
    expect(itemReferences(request)).toEqual(['msg_1']);
    const found = new Map([
      [
        'msg_1',
        {
          id: 'msg_1',
          type: 'message',
          role: 'assistant',
          status: 'completed',
          content: [{ type: 'output_text', text: 'checking', annotations: [] }],
        },
      ],
    ]);
    expect(toChat(request, [], found).chat.messages).toEqual([
      { role: 'user', content: 'weather?' },
      {
        role: 'assistant',
        content: 'checking',
        tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{}' } }],
      },
      { role: 'tool', tool_call_id: 'call_1', content: 'sunny' },
    ]);
    expect(toNative(request, [], found).body.input, 'the native path gets the item too').toContainEqual(
      found.get('msg_1'),
    );
  });

  it('parses store, stream and previous_response_id for the router', () => {
    expect(parseRequest({ ...base, input: 'x' })).toMatchObject({
      model: 'm',
      stream: false,
      store: true,
      previousResponseId: null,
    });
    expect(
      parseRequest({ ...base, input: 'x', store: false, stream: true, previous_response_id: 'resp_2' }),
    ).toMatchObject({
      stream: true,
      store: false,
      previousResponseId: 'resp_2',
    });
    expect(
      parseRequest({ ...base, previous_response_id: 'resp_2' }).input,
      'a continuation may bring no new input',
    ).toEqual([]);
  });

  it('echoes what OpenAI echoes, with its defaults for what is absent', () => {
    expect(toChat(parseRequest({ ...base, input: 'x' })).call.echo).toEqual({
      instructions: null,
      max_output_tokens: null,
      metadata: {},
      parallel_tool_calls: true,
      previous_response_id: null,
      reasoning: { effort: null, summary: null },
      store: true,
      temperature: null,
      text: { format: { type: 'text' } },
      tool_choice: 'auto',
      tools: [],
      top_p: null,
      truncation: 'disabled',
    });
  });
});

describe('toNative', () => {
  it('sends the whole conversation, keeps nothing at the engine and names no previous response', () => {
    const previous = [{ type: 'message', role: 'user', content: 'x' }];
    const { body, call } = toNative(
      parseRequest({ ...base, input: 'y', previous_response_id: 'resp_1', instructions: 'i', prompt_cache_key: 'k' }),
      previous,
    );
    expect(body).toEqual({
      model: 'm',
      instructions: 'i',
      prompt_cache_key: 'k',
      store: false,
      input: [previous[0], { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'y' }] }],
    });
    expect(call.items).toEqual(body.input);
  });
});

describe('parseRequest refusals', () => {
  const refusals: Array<[string, unknown, string, RegExp]> = [
    ['a body that is not an object', [1], 'body', /JSON object/],
    ['no model', { input: 'x' }, 'model', /model/],
    ['no input and no previous response', { ...base }, 'input', /input: is required/],
    ['input of the wrong type', { ...base, input: 5 }, 'input', /string or a list of input items/],
    [
      'max_output_tokens 0',
      { ...base, input: 'x', max_output_tokens: 0 },
      'max_output_tokens',
      /max_output_tokens: want at least 1/,
    ],
    ['temperature above 2', { ...base, input: 'x', temperature: 3 }, 'temperature', /temperature: want 0 to 2/],
    ['background mode', { ...base, input: 'x', background: true }, 'background', /background mode is not supported/],
    ['a conversation', { ...base, input: 'x', conversation: 'conv_1' }, 'conversation', /previous_response_id instead/],
    ['a stored prompt', { ...base, input: 'x', prompt: { id: 'pmpt_1' } }, 'prompt', /stored prompt templates/],
    ['truncation auto', { ...base, input: 'x', truncation: 'auto' }, 'truncation', /"auto" is not supported/],
    [
      'an include of a built-in tool',
      { ...base, input: 'x', include: ['file_search_call.results'] },
      'include',
      /"file_search_call.results" is not supported/,
    ],
    [
      'web search',
      { ...base, input: 'x', tools: [{ type: 'web_search' }] },
      'tools',
      /tools\[0\]\.type: "web_search" is a tool OpenAI runs.*only function tools/,
    ],
    [
      'web search preview',
      { ...base, input: 'x', tools: [{ type: 'web_search_preview' }] },
      'tools',
      /"web_search_preview"/,
    ],
    [
      'file search',
      {
        ...base,
        input: 'x',
        tools: [
          { type: 'function', name: 'f' },
          { type: 'file_search', vector_store_ids: [] },
        ],
      },
      'tools',
      /tools\[1\]\.type: "file_search"/,
    ],
    [
      'code interpreter',
      { ...base, input: 'x', tools: [{ type: 'code_interpreter', container: { type: 'auto' } }] },
      'tools',
      /"code_interpreter"/,
    ],
    [
      'computer use',
      { ...base, input: 'x', tools: [{ type: 'computer_use_preview' }] },
      'tools',
      /"computer_use_preview"/,
    ],
    ['image generation', { ...base, input: 'x', tools: [{ type: 'image_generation' }] }, 'tools', /"image_generation"/],
    ['mcp', { ...base, input: 'x', tools: [{ type: 'mcp', server_label: 's' }] }, 'tools', /"mcp"/],
    ['local shell', { ...base, input: 'x', tools: [{ type: 'local_shell' }] }, 'tools', /"local_shell"/],
    ['a custom tool', { ...base, input: 'x', tools: [{ type: 'custom', name: 'c' }] }, 'tools', /"custom"/],
    [
      'a function tool without a name',
      { ...base, input: 'x', tools: [{ type: 'function', parameters: {} }] },
      'tools',
      /tools\[0\]\.name/,
    ],
    [
      'a hosted tool_choice',
      { ...base, input: 'x', tool_choice: { type: 'web_search_preview' } },
      'tool_choice',
      /"web_search_preview".*not supported/,
    ],
    [
      'an unknown tool_choice',
      { ...base, input: 'x', tool_choice: 'any' },
      'tool_choice',
      /"auto", "none", "required"/,
    ],
    [
      'a json_schema without a schema',
      { ...base, input: 'x', text: { format: { type: 'json_schema', name: 'n' } } },
      'text',
      /text\.format\.schema/,
    ],
    [
      'an image by file id',
      { ...base, input: [{ role: 'user', content: [{ type: 'input_image', file_id: 'file_1', detail: 'auto' }] }] },
      'input',
      /input\[0\]\.content\[0\]\.file_id: files are not supported/,
    ],
    [
      'a file',
      { ...base, input: [{ role: 'user', content: [{ type: 'input_file', file_data: 'x' }] }] },
      'input',
      /files are not supported/,
    ],
    [
      'an image in a system message',
      { ...base, input: [{ role: 'system', content: [{ type: 'input_image', image_url: 'https://x/a.png' }] }] },
      'input',
      /only in a user message/,
    ],
    ['an unknown role', { ...base, input: [{ role: 'tool', content: 'x' }] }, 'input', /input\[0\]\.role/],
    [
      'a web search call item',
      { ...base, input: [{ type: 'web_search_call', id: 'ws_1' }] },
      'input',
      /"web_search_call" item is not supported/,
    ],
    [
      'a function_call without call_id',
      { ...base, input: [{ type: 'function_call', name: 'f', arguments: '{}' }] },
      'input',
      /input\[0\]\.call_id/,
    ],
    [
      'function arguments not a string',
      { ...base, input: [{ type: 'function_call', call_id: 'c', name: 'f', arguments: {} }] },
      'input',
      /arguments as a JSON string/,
    ],
    [
      'an image in a function output',
      {
        ...base,
        input: [{ type: 'function_call_output', call_id: 'c', output: [{ type: 'input_image', image_url: 'u' }] }],
      },
      'input',
      /only input_text parts/,
    ],
    [
      'input that is only instructions',
      { ...base, input: [{ role: 'system', content: 'x' }] },
      'input',
      /no message to answer/,
    ],
  ];
  it.each(refusals)('refuses %s, naming the field', (_name, body, param, message) => {
    let caught: unknown;
    try {
      const request = parseRequest(body);
      toChat(request);
    } catch (err) {
      caught = err;
    }
    expect(isLlmgwError(caught), 'an LlmgwError').toBe(true);
    if (!isLlmgwError(caught)) return;
    expect(caught.code).toBe('LLMGW_BAD_REQUEST');
    expect(caught.status).toBe(400);
    expect(caught.context.param).toBe(param);
    expect(caught.message).toMatch(message);
  });
});
