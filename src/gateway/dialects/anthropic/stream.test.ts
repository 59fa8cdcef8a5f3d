import { describe, expect, it } from 'vitest';
import { MessageStreamTranslator } from './stream.js';

const call = { model: 'alias', stopSequences: ['END'], stream: true };

/** The events a translator wrote, parsed: [event name, data]. */
function events(sse: string): Array<[string, Record<string, unknown>]> {
  return sse
    .split('\n\n')
    .filter((e) => e !== '')
    .map((e) => {
      const [eventLine, dataLine] = e.split('\n');
      const name = eventLine!.slice('event: '.length);
      const data = JSON.parse(dataLine!.slice('data: '.length)) as Record<string, unknown>;
      // Each event names its type twice (the SSE event and the data's type), and they agree.
      expect(data.type).toBe(name);
      return [name, data];
    });
}

function run(chunks: unknown[]): Array<[string, Record<string, unknown>]> {
  const t = new MessageStreamTranslator(call, 'req1');
  let out = '';
  for (const c of chunks) out += t.push(c as Parameters<MessageStreamTranslator['push']>[0]);
  out += t.end();
  expect(t.done).toBe(true);
  expect(t.end()).toBe('');
  return events(out);
}

const usage = { choices: [], usage: { prompt_tokens: 5, completion_tokens: 2 } };

describe('MessageStreamTranslator', () => {
  it('text: message_start, one text block, message_delta with usage, message_stop', () => {
    const got = run([
      { id: 'chatcmpl-x', choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] },
      { choices: [{ index: 0, delta: { content: 'Hel' }, finish_reason: null }] },
      { choices: [{ index: 0, delta: { content: 'lo' }, finish_reason: null }] },
      { choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] },
      usage,
    ]);
    expect(got.map(([name]) => name)).toEqual([
      'message_start',
      'content_block_start',
      'content_block_delta',
      'content_block_delta',
      'content_block_stop',
      'message_delta',
      'message_stop',
    ]);
    expect(got[0]![1].message).toMatchObject({ id: 'msg_x', model: 'alias', role: 'assistant', content: [] });
    expect(got[1]![1]).toEqual({ type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } });
    expect(got[3]![1]).toEqual({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'lo' } });
    expect(got[5]![1]).toEqual({
      type: 'message_delta',
      delta: { stop_reason: 'end_turn', stop_sequence: null },
      usage: { input_tokens: 5, output_tokens: 2 },
    });
  });

  it('text then a tool call: two blocks, the tool’s arguments as input_json_delta', () => {
    const got = run([
      { choices: [{ index: 0, delta: { content: 'let me check' } }] },
      {
        choices: [
          { index: 0, delta: { tool_calls: [{ index: 0, id: 'call_1', function: { name: 'f', arguments: '' } }] } },
        ],
      },
      { choices: [{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: '{"a":' } }] } }] },
      { choices: [{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: '1}' } }] } }] },
      {
        choices: [
          { index: 0, delta: { tool_calls: [{ index: 1, id: 'call_2', function: { name: 'g', arguments: '{}' } }] } },
        ],
      },
      { choices: [{ index: 0, delta: {}, finish_reason: 'tool_calls' }] },
    ]);
    expect(got.map(([name, d]) => `${name}${d.index === undefined ? '' : `#${String(d.index)}`}`)).toEqual([
      'message_start',
      'content_block_start#0',
      'content_block_delta#0',
      'content_block_stop#0',
      'content_block_start#1',
      'content_block_delta#1',
      'content_block_delta#1',
      'content_block_stop#1',
      'content_block_start#2',
      'content_block_delta#2',
      'content_block_stop#2',
      'message_delta',
      'message_stop',
    ]);
    expect(got[0]![1].message).toMatchObject({ id: 'msg_req1' });
    expect(got[4]![1].content_block).toEqual({ type: 'tool_use', id: 'call_1', name: 'f', input: {} });
    expect(got[6]![1].delta).toEqual({ type: 'input_json_delta', partial_json: '1}' });
    expect(got[11]![1].delta).toEqual({ stop_reason: 'tool_use', stop_sequence: null });
    // No usage chunk came: the counts are zero rather than absent, as Anthropic's clients read them.
    expect(got[11]![1].usage).toEqual({ input_tokens: 0, output_tokens: 0 });
  });

  const stops: Array<[string, Record<string, unknown>, Record<string, unknown>]> = [
    [
      'a stop sequence vLLM names',
      { finish_reason: 'stop', stop_reason: 'END' },
      { stop_reason: 'stop_sequence', stop_sequence: 'END' },
    ],
    ['max_tokens', { finish_reason: 'length' }, { stop_reason: 'max_tokens', stop_sequence: null }],
    ['no finish reason at all', {}, { stop_reason: 'end_turn', stop_sequence: null }],
  ];
  it.each(stops)('the stop reason: %s', (_name, choice, delta) => {
    const got = run([{ choices: [{ index: 0, delta: { content: 'x' }, ...choice }] }]);
    expect(got.find(([name]) => name === 'message_delta')![1].delta).toEqual(delta);
  });

  it('an empty answer is still a whole message', () => {
    expect(run([]).map(([name]) => name)).toEqual(['message_start', 'message_delta', 'message_stop']);
  });

  it('only the first choice is translated', () => {
    const got = run([
      { choices: [{ index: 1, delta: { content: 'other' } }] },
      { choices: [{ index: 0, delta: { content: 'mine' } }] },
    ]);
    const texts = got
      .filter(([name]) => name === 'content_block_delta')
      .map(([, d]) => (d.delta as { text: string }).text);
    expect(texts).toEqual(['mine']);
  });

  it('a failure is an error event, and nothing follows it', () => {
    const t = new MessageStreamTranslator(call, 'req1');
    t.push({ choices: [{ index: 0, delta: { content: 'x' } }] });
    const failed = events(t.fail('the engine stopped answering mid-response'));
    expect(failed).toEqual([
      ['error', { type: 'error', error: { type: 'api_error', message: 'the engine stopped answering mid-response' } }],
    ]);
    expect(t.end()).toBe('');
    expect(t.push({ choices: [{ index: 0, delta: { content: 'y' } }] })).toBe('');
  });
});

// Guards against message_start saying input_tokens 0 (LangChain's ChatAnthropic records the prompt's count from
// message_start alone): a translator told to hold keeps message_start, and all after it, until the count is known.
describe('MessageStreamTranslator holding message_start for the prompt’s count', () => {
  const text = (t: string) => ({
    id: 'chatcmpl-h',
    choices: [{ index: 0, delta: { content: t }, finish_reason: null }],
  });
  const startUsage = (evs: Array<[string, Record<string, unknown>]>) =>
    (evs[0]![1].message as { usage: unknown; id: string }).usage;

  it('keeps every event until count(), then sends message_start carrying it first, in order', () => {
    const t = new MessageStreamTranslator(call, 'req1');
    t.holdForCount();
    expect(t.push(text('Hel'))).toBe('');
    expect(t.push(text('lo'))).toBe('');
    const released = events(t.count(17));
    expect(released.map(([name]) => name)).toEqual([
      'message_start',
      'content_block_start',
      'content_block_delta',
      'content_block_delta',
    ]);
    expect(startUsage(released)).toEqual({ input_tokens: 17, output_tokens: 0 });
    expect((released[0]![1].message as { id: string }).id).toBe('msg_h');
    // Released once: what comes next goes out as it comes.
    expect(t.count(99)).toBe('');
    expect(events(t.push(text('!'))).map(([name]) => name)).toEqual(['content_block_delta']);
  });

  it('a count that comes before the first chunk is written with message_start at that chunk', () => {
    const t = new MessageStreamTranslator(call, 'req1');
    t.holdForCount();
    expect(t.count(9)).toBe('');
    const first = events(t.push(text('x')));
    expect(first[0]![0]).toBe('message_start');
    expect(startUsage(first)).toEqual({ input_tokens: 9, output_tokens: 0 });
  });

  it('a chunk that carries the engine’s usage ends the hold with the engine’s count (vLLM’s continuous usage)', () => {
    const t = new MessageStreamTranslator(call, 'req1');
    t.holdForCount();
    expect(t.push(text('a'))).toBe('');
    const withUsage = { ...text('b'), usage: { prompt_tokens: 31, completion_tokens: 2 } };
    const out = events(t.push(withUsage));
    expect(out.map(([name]) => name)).toEqual([
      'message_start',
      'content_block_start',
      'content_block_delta',
      'content_block_delta',
    ]);
    expect(startUsage(out)).toEqual({ input_tokens: 31, output_tokens: 0 });
  });

  it('a stream that ends while held is sent whole, message_start with the usage chunk’s count', () => {
    const t = new MessageStreamTranslator(call, 'req1');
    t.holdForCount();
    let out = t.push(text('a'));
    out += t.push({ choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] });
    expect(out).toBe('');
    out += t.push({ choices: [], usage: { prompt_tokens: 12, completion_tokens: 1 } });
    out += t.end();
    const got = events(out);
    expect(got.map(([name]) => name)).toEqual([
      'message_start',
      'content_block_start',
      'content_block_delta',
      'content_block_stop',
      'message_delta',
      'message_stop',
    ]);
    expect(startUsage(got)).toEqual({ input_tokens: 12, output_tokens: 0 });
    expect(t.count(5)).toBe('');
  });

  it('no count (the tokenizer failed): message_start says 0 and the rest follows at once', () => {
    const t = new MessageStreamTranslator(call, 'req1');
    t.holdForCount();
    expect(t.push(text('a'))).toBe('');
    const out = events(t.count(null));
    expect(out[0]![0]).toBe('message_start');
    expect(startUsage(out)).toEqual({ input_tokens: 0, output_tokens: 0 });
  });

  it('an engine error while held sends what was held, then the error event', () => {
    const t = new MessageStreamTranslator(call, 'req1');
    t.holdForCount();
    t.push(text('a'));
    const out = events(t.fail('the engine failed mid-response'));
    expect(out.map(([name]) => name)).toEqual(['message_start', 'content_block_start', 'content_block_delta', 'error']);
    expect(t.count(3)).toBe('');
  });

  it('not told to hold, message_start goes out at the first chunk, with that chunk’s count when it has one', () => {
    const t = new MessageStreamTranslator(call, 'req1');
    const out = events(t.push({ ...text('a'), usage: { prompt_tokens: 8, completion_tokens: 0 } }));
    expect(startUsage(out)).toEqual({ input_tokens: 8, output_tokens: 0 });
  });
});
