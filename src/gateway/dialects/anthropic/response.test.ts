import { describe, expect, it } from 'vitest';
import { anthropicErrorType, toAnthropicError } from './errors.js';
import { messageJson, stopReasonOf, toMessage, toolInput } from './response.js';

const call = { model: 'alias', stopSequences: ['END'], stream: false };

describe('stopReasonOf', () => {
  const cases: Array<[unknown, unknown, string, string | null]> = [
    ['stop', null, 'end_turn', null],
    ['stop', 'END', 'stop_sequence', 'END'],
    // A stop the client did not ask for (the model's end-of-turn token id) is the end of its turn.
    ['stop', 2, 'end_turn', null],
    ['length', null, 'max_tokens', null],
    ['tool_calls', null, 'tool_use', null],
    ['function_call', null, 'tool_use', null],
    ['content_filter', null, 'refusal', null],
    [null, null, 'end_turn', null],
  ];
  it.each(cases)('%s (stop_reason %s) → %s', (finish, matched, reason, sequence) => {
    expect(stopReasonOf(finish, matched, call)).toEqual({ reason, sequence });
  });
});

describe('toMessage', () => {
  it('text, usage, the client’s model name and an Anthropic id', () => {
    const m = toMessage(
      {
        id: 'chatcmpl-abc',
        choices: [{ message: { content: 'hello' }, finish_reason: 'length' }],
        usage: { prompt_tokens: 7, completion_tokens: 3 },
      },
      call,
      'req1',
    );
    expect(m).toEqual({
      id: 'msg_abc',
      type: 'message',
      role: 'assistant',
      model: 'alias',
      content: [{ type: 'text', text: 'hello' }],
      stop_reason: 'max_tokens',
      stop_sequence: null,
      usage: { input_tokens: 7, output_tokens: 3 },
    });
  });

  it('tool calls become tool_use blocks, with their arguments parsed', () => {
    const m = toMessage(
      {
        choices: [
          {
            message: {
              content: null,
              tool_calls: [
                { id: 'call_1', function: { name: 'f', arguments: '{"a":1}' } },
                { function: { name: 'g', arguments: 'oops' } },
              ],
            },
            finish_reason: 'tool_calls',
          },
        ],
      },
      call,
      'req1',
    );
    expect(m.id).toBe('msg_req1');
    expect(m.stop_reason).toBe('tool_use');
    expect(m.content).toEqual([
      { type: 'tool_use', id: 'call_1', name: 'f', input: { a: 1 } },
      { type: 'tool_use', id: 'toolu_req1_1', name: 'g', input: { arguments: 'oops' } },
    ]);
    expect(m.usage).toEqual({ input_tokens: 0, output_tokens: 0 });
  });

  it('toolInput keeps what is not an object', () => {
    expect(toolInput('')).toEqual({});
    expect(toolInput('[1]')).toEqual({ arguments: '[1]' });
    expect(toolInput(undefined)).toEqual({});
  });
});

describe('messageJson', () => {
  const completion = (args: string) => ({
    id: 'chatcmpl-j',
    choices: [
      {
        message: { content: 'ok', tool_calls: [{ id: 'call_1', function: { name: 'f', arguments: args } }] },
        finish_reason: 'tool_calls',
      },
    ],
    usage: { prompt_tokens: 2, completion_tokens: 1 },
  });

  // Regression: JSON.stringify of the parsed input wrote 1e400 (Infinity to JavaScript) as null.
  it('writes a tool input as the engine’s text, the rest as JSON.stringify would', () => {
    const args = '{ "n": 1e400, "id": 12345678901234567890 }';
    const m = toMessage(completion(args), call, 'req1');
    const text = messageJson(m);
    expect(text).toContain(`"input":${args}`);
    expect(text.replace(args, '{}')).toBe(
      JSON.stringify({ ...m, content: [m.content[0], { ...m.content[1]!, input: {} }] }),
    );
  });

  it('is JSON.stringify where there is no engine text to keep', () => {
    for (const args of ['oops', '[1]', '']) {
      const m = toMessage(completion(args), call, 'req1');
      expect(messageJson(m)).toBe(JSON.stringify(m));
    }
    const text = toMessage({ choices: [{ message: { content: 'hi' }, finish_reason: 'stop' }] }, call, 'req1');
    expect(messageJson(text)).toBe(JSON.stringify(text));
  });
});

describe('errors', () => {
  const types: Array<[number, string]> = [
    [400, 'invalid_request_error'],
    [401, 'authentication_error'],
    [403, 'permission_error'],
    [404, 'not_found_error'],
    [413, 'request_too_large'],
    [429, 'rate_limit_error'],
    [500, 'api_error'],
    [502, 'api_error'],
    [503, 'overloaded_error'],
    [504, 'api_error'],
  ];
  it.each(types)('%d → %s', (status, type) => expect(anthropicErrorType(status)).toBe(type));

  it('keeps the message of an OpenAI-shaped error, and the status otherwise', () => {
    expect(JSON.parse(toAnthropicError('{"error":{"message":"no such model","type":"x"}}', 404))).toEqual({
      type: 'error',
      error: { type: 'not_found_error', message: 'no such model' },
    });
    expect(JSON.parse(toAnthropicError('{"detail":"bad"}', 422)).error.message).toBe('bad');
    expect(JSON.parse(toAnthropicError('<html>', 500)).error).toEqual({
      type: 'api_error',
      message: 'the engine answered 500',
    });
  });
});
