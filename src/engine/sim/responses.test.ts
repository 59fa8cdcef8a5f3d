// The sim's Responses API through the official OpenAI client: the router's
// native path and its e2e tests stand on these shapes, so if they drift from
// what `openai` parses, "native" would be tested against no real engine.
import OpenAI, { BadRequestError, NotFoundError } from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import { startSimEngine, type SimEngine } from './index.js';

const engines: SimEngine[] = [];

async function start(): Promise<OpenAI> {
  const engine = await startSimEngine({ models: ['sim-model'] });
  engines.push(engine);
  return new OpenAI({ baseURL: `${engine.url}/v1`, apiKey: 'unused', maxRetries: 0 });
}

afterEach(async () => {
  await Promise.all(engines.splice(0).map((e) => e.close({ graceMs: 0 })));
});

const weather = {
  type: 'function' as const,
  name: 'get_weather',
  description: 'the weather in a city',
  parameters: { type: 'object', properties: { city: { type: 'string' } } },
  strict: false,
};

describe('sim engine, POST /v1/responses as the OpenAI client sees it', () => {
  it('answers with the same words as a chat of the same conversation, usage in input/output tokens', async () => {
    const client = await start();
    const res = await client.responses.create({
      model: 'sim-model',
      instructions: 'Be terse.',
      input: 'Tell me about rivers.',
      max_output_tokens: 5,
    });
    expect(res.object).toBe('response');
    expect(res.output_text.split(' '), 'one word per token').toHaveLength(5);
    expect(res.status, 'cut by max_output_tokens').toBe('incomplete');
    expect(res.incomplete_details).toEqual({ reason: 'max_output_tokens' });
    expect((res as unknown as { store: unknown }).store, 'the sim keeps nothing').toBe(false);
    // "Be terse." and "Tell me about rivers." are 30 characters: ceil(30 / 4).
    expect(res.usage).toMatchObject({ input_tokens: 8, output_tokens: 5, total_tokens: 13 });
    const chat = await client.chat.completions.create({
      model: 'sim-model',
      max_tokens: 5,
      messages: [
        { role: 'system', content: 'Be terse.' },
        { role: 'user', content: 'Tell me about rivers.' },
      ],
    });
    expect(res.output_text, 'hashed as chat hashes its messages').toBe(chat.choices[0]!.message.content);
    const unbounded = await client.responses.create({
      model: 'sim-model',
      input: [{ role: 'user', content: [{ type: 'input_text', text: 'hi' }] }],
    });
    expect(unbounded.status, 'the default budget stands for a natural end').toBe('completed');
  });

  it('streams the events clients parse, numbered from 0, to the same text and usage as unstreamed', async () => {
    const client = await start();
    const whole = await client.responses.create({
      model: 'sim-model',
      input: 'Tell me about rivers.',
      max_output_tokens: 6,
    });
    const stream = await client.responses.create({
      model: 'sim-model',
      input: 'Tell me about rivers.',
      max_output_tokens: 6,
      stream: true,
    });
    const types: string[] = [];
    const sequence: number[] = [];
    let deltas = '';
    let last: OpenAI.Responses.Response | null = null;
    for await (const e of stream) {
      types.push(e.type);
      sequence.push(e.sequence_number);
      if (e.type === 'response.output_text.delta') deltas += e.delta;
      if (e.type === 'response.incomplete' || e.type === 'response.completed') last = e.response;
    }
    expect(sequence, 'numbered 0, 1, 2, ...').toEqual(types.map((_, i) => i));
    expect(types.slice(0, 4)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
    ]);
    expect(types.slice(-4)).toEqual([
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.incomplete',
    ]);
    expect(
      types.filter((t) => t === 'response.output_text.delta'),
      'a delta per token',
    ).toHaveLength(6);
    expect(deltas).toBe(whole.output_text);
    expect(last?.usage).toEqual(whole.usage);
  });

  it('answers a forced function tool with one deterministic call, whole or streamed', async () => {
    const client = await start();
    const ask = { model: 'sim-model', input: 'Weather in Oslo?', tools: [weather], tool_choice: 'required' as const };
    const res = await client.responses.create(ask);
    const call = res.output[0] as OpenAI.Responses.ResponseFunctionToolCall;
    expect(call.type).toBe('function_call');
    expect(call.name).toBe('get_weather');
    expect(call.call_id).toMatch(/^call_/);
    expect(JSON.parse(call.arguments), 'arguments made from the prompt').toEqual({ seed: expect.any(Number) });
    const streamed = client.responses.stream({ ...ask, tool_choice: { type: 'function', name: 'get_weather' } });
    const final = await streamed.finalResponse();
    expect(
      (final.output[0] as OpenAI.Responses.ResponseFunctionToolCall).arguments,
      'the same prompt, the same call',
    ).toBe(call.arguments);

    // Continuing with the call's output as input: answered in text.
    const next = await client.responses.create({
      model: 'sim-model',
      tools: [weather],
      input: [
        { role: 'user', content: 'Weather in Oslo?' },
        call,
        { type: 'function_call_output', call_id: call.call_id, output: '21 °C' },
      ],
      max_output_tokens: 4,
    });
    expect(next.output_text.split(' ')).toHaveLength(4);
  });

  it('refuses what it cannot serve: a previous_response_id (it keeps nothing), a built-in tool, background, a bad item', async () => {
    const client = await start();
    await expect(
      client.responses.create({ model: 'sim-model', input: 'x', previous_response_id: 'resp_1' }),
    ).rejects.toBeInstanceOf(NotFoundError);
    const builtIn = await client.responses
      .create({ model: 'sim-model', input: 'x', tools: [{ type: 'web_search_preview' }] })
      .catch((e: unknown) => e);
    expect(builtIn).toBeInstanceOf(BadRequestError);
    expect((builtIn as BadRequestError).message).toMatch(/function tools only/);
    await expect(client.responses.create({ model: 'sim-model', input: 'x', background: true })).rejects.toBeInstanceOf(
      BadRequestError,
    );
    await expect(
      client.responses.create({ model: 'sim-model', input: [{ type: 'item_reference', id: 'x' }] }),
    ).rejects.toBeInstanceOf(BadRequestError);
    await expect(client.responses.create({ model: 'other', input: 'x' })).rejects.toBeInstanceOf(NotFoundError);
  });
});
