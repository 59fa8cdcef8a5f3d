// The Responses request translated to chat across turns (function calls fed
// back, item references, what the router reads of it), and sent natively.
import { describe, expect, it } from 'vitest';
import { itemReferences, parseRequest, toChat, toNative } from './request.js';

const base = { model: 'm' };

function chatOf(body: Record<string, unknown>, previous: unknown[] = []): Record<string, unknown> {
  return toChat(parseRequest(body), previous).chat;
}

describe('toChat, across turns', () => {
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
