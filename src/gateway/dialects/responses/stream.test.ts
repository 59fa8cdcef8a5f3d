import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseRequest, toChat } from './request.js';
import { ResponseStreamTranslator } from './stream.js';

const call = toChat(parseRequest({ model: 'alias', input: 'hi', stream: true, max_output_tokens: 50 })).call;

type Chunk = Parameters<ResponseStreamTranslator['push']>[0];

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

function translate(chunks: unknown[], t = new ResponseStreamTranslator(call, { id: 'resp_t', createdAtS: 1 })): string {
  let out = '';
  for (const c of chunks) out += t.push(c as Chunk);
  return out + t.end();
}

const usage = { choices: [], usage: { prompt_tokens: 5, completion_tokens: 2 } };
const text = [
  { id: 'chatcmpl-x', choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] },
  { choices: [{ index: 0, delta: { content: 'Hel' }, finish_reason: null }] },
  { choices: [{ index: 0, delta: { content: 'lo' }, finish_reason: null }] },
  { choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] },
  usage,
];
const tools = [
  { choices: [{ index: 0, delta: { reasoning_content: 'I should ' }, finish_reason: null }] },
  { choices: [{ index: 0, delta: { reasoning_content: 'look' }, finish_reason: null }] },
  { choices: [{ index: 0, delta: { content: 'Checking.' }, finish_reason: null }] },
  {
    choices: [
      {
        index: 0,
        delta: {
          tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '' } }],
        },
        finish_reason: null,
      },
    ],
  },
  {
    choices: [
      { index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: '{"city":' } }] }, finish_reason: null },
    ],
  },
  {
    choices: [
      { index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: '"Oslo"}' } }] }, finish_reason: null },
    ],
  },
  {
    choices: [
      {
        index: 0,
        delta: {
          tool_calls: [{ index: 1, id: 'call_2', type: 'function', function: { name: 'get_time', arguments: '{}' } }],
        },
        finish_reason: null,
      },
    ],
  },
  { choices: [{ index: 0, delta: {}, finish_reason: 'tool_calls' }] },
  usage,
];

describe('ResponseStreamTranslator', () => {
  it('text: created, in_progress, one message item with its part, completed with usage; sequence numbers count from 0', () => {
    const t = new ResponseStreamTranslator(call, { id: 'resp_t', createdAtS: 1 });
    const got = events(translate(text, t));
    expect(got.map(([name]) => name)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.delta',
      'response.output_text.delta',
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.completed',
    ]);
    expect(got.map(([, d]) => d.sequence_number)).toEqual(got.map((_, i) => i));
    expect(got[0]![1].response).toMatchObject({
      id: 'resp_t',
      status: 'in_progress',
      model: 'alias',
      output: [],
      max_output_tokens: 50,
    });
    expect(got[6]![1]).toMatchObject({ output_index: 0, content_index: 0, text: 'Hello' });
    const done = got.at(-1)![1].response as Record<string, unknown>;
    expect(done).toMatchObject({
      id: 'resp_t',
      status: 'completed',
      usage: { input_tokens: 5, output_tokens: 2, total_tokens: 7 },
    });
    expect(done.output).toEqual([
      {
        id: got[2]![1].item && (got[2]![1].item as { id: string }).id,
        type: 'message',
        status: 'completed',
        role: 'assistant',
        content: [{ type: 'output_text', text: 'Hello', annotations: [] }],
      },
    ]);
    expect(t.done).toBe(true);
    expect(t.response, 'the final response is kept for the store').toEqual(done);
    expect(t.end(), 'the end is written once').toBe('');
    expect(t.fail('late'), 'nothing fails after the end').toBe('');
  });

  it('reasoning, text, then two function calls: one item each, in order', () => {
    const got = events(translate(tools));
    expect(got.map(([name]) => name)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
      'response.reasoning_text.delta',
      'response.reasoning_text.delta',
      'response.reasoning_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.delta',
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.output_item.added',
      'response.function_call_arguments.delta',
      'response.function_call_arguments.delta',
      'response.function_call_arguments.done',
      'response.output_item.done',
      'response.output_item.added',
      'response.function_call_arguments.delta',
      'response.function_call_arguments.done',
      'response.output_item.done',
      'response.completed',
    ]);
    expect(got[18]![1]).toMatchObject({ output_index: 2, name: 'get_weather', arguments: '{"city":"Oslo"}' });
    const output = (got.at(-1)![1].response as { output: unknown[] }).output;
    expect(output).toMatchObject([
      { type: 'reasoning', content: [{ type: 'reasoning_text', text: 'I should look' }] },
      { type: 'message', content: [{ type: 'output_text', text: 'Checking.' }] },
      {
        type: 'function_call',
        call_id: 'call_1',
        name: 'get_weather',
        arguments: '{"city":"Oslo"}',
        status: 'completed',
      },
      { type: 'function_call', call_id: 'call_2', name: 'get_time', arguments: '{}', status: 'completed' },
    ]);
  });

  it('a stream cut by max tokens ends response.incomplete', () => {
    const got = events(
      translate([{ choices: [{ index: 0, delta: { content: 'a' }, finish_reason: 'length' }] }, usage]),
    );
    expect(got.at(-1)![0]).toBe('response.incomplete');
    expect(got.at(-1)![1].response).toMatchObject({
      status: 'incomplete',
      incomplete_details: { reason: 'max_output_tokens' },
      output: [{ status: 'incomplete' }],
    });
  });

  it('a stream that breaks ends response.failed, with what was written so far', () => {
    const t = new ResponseStreamTranslator(call);
    const out = t.push(text[1] as Chunk) + t.fail('the engine stopped answering');
    const got = events(out);
    expect(got.at(-1)![0]).toBe('response.failed');
    expect(got.at(-1)![1].response).toMatchObject({
      status: 'failed',
      error: { code: 'server_error', message: 'the engine stopped answering' },
      output: [{ type: 'message', status: 'incomplete', content: [{ text: 'Hel' }] }],
    });
    expect(t.response?.status).toBe('failed');
    expect(t.end()).toBe('');
  });

  it('a stream that fails before any chunk still opens with response.created', () => {
    const got = events(new ResponseStreamTranslator(call).fail('no engine'));
    expect(got.map(([name]) => name)).toEqual(['response.created', 'response.in_progress', 'response.failed']);
  });
});

describe('the openai SDK reads the translated stream', () => {
  // The strongest check that clients parse it: the SDK's own ResponseStream
  // rebuilds the response from the events and throws on one it cannot place.
  let server: Server;
  let client: OpenAI;
  let chunks: unknown[] = [];
  beforeAll(async () => {
    server = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.end(translate(chunks, new ResponseStreamTranslator(call)));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    client = new OpenAI({
      baseURL: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
      apiKey: 'unused',
      maxRetries: 0,
    });
  });
  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
  });

  it('responses.stream(): text deltas and the final response with output_text', async () => {
    chunks = text;
    const stream = client.responses.stream({ model: 'alias', input: 'hi' });
    const deltas: string[] = [];
    stream.on('response.output_text.delta', (e) => deltas.push(e.delta));
    const final = await stream.finalResponse();
    expect(deltas).toEqual(['Hel', 'lo']);
    expect(final.output_text).toBe('Hello');
    expect(final.status).toBe('completed');
    expect(final.usage?.output_tokens).toBe(2);
  });

  it('responses.stream(): reasoning and function calls', async () => {
    chunks = tools;
    const final = await client.responses.stream({ model: 'alias', input: 'hi' }).finalResponse();
    const calls = final.output.filter((o) => o.type === 'function_call');
    expect(calls.map((c) => [c.call_id, c.name, c.arguments])).toEqual([
      ['call_1', 'get_weather', '{"city":"Oslo"}'],
      ['call_2', 'get_time', '{}'],
    ]);
    expect(final.output_text).toBe('Checking.');
  });

  it('responses.create({stream: true}): every event type is one the SDK knows, ending completed', async () => {
    chunks = text;
    const stream = await client.responses.create({ model: 'alias', input: 'hi', stream: true });
    const types: string[] = [];
    for await (const event of stream) types.push(event.type);
    expect(types[0]).toBe('response.created');
    expect(types.at(-1)).toBe('response.completed');
  });
});
