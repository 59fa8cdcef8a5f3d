// Tools, structured output, n > 1 and logprobs on the builtin engine, driven by the
// official OpenAI client against the engine's HTTP server on the generated
// tiny GGUF. Its weights are random, so only grammars can make its answers
// parse: these tests check that a forced call's arguments and a json_schema
// answer validate against their schemas (with ajv, which the repository
// already has), and that n choices come back as n.
import { Ajv } from 'ajv';
import type OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { useTinyEngine } from '../../../test/support/builtin-engine.js';

const MODEL = 'tiny';

// Bounded values only: an unbounded string or number would let random
// weights write until max_tokens, and a JSON cut short does not parse.
const WEATHER_PARAMETERS = {
  type: 'object',
  properties: {
    city: { type: 'string', enum: ['Paris', 'Oslo', 'Lima'] },
    metric: { type: 'boolean' },
    note: { type: 'string', maxLength: 6 },
  },
  required: ['city', 'metric', 'note'],
  additionalProperties: false,
} as const;

const TIME_PARAMETERS = {
  type: 'object',
  properties: {
    zone: { type: 'string', enum: ['UTC', 'CET'] },
    hours: { type: 'array', items: { type: 'boolean' }, maxItems: 3 },
  },
  required: ['zone', 'hours'],
  additionalProperties: false,
} as const;

const TOOLS: OpenAI.Chat.Completions.ChatCompletionTool[] = [
  {
    type: 'function',
    function: { name: 'get_weather', description: 'The weather in a city.', parameters: WEATHER_PARAMETERS },
  },
  { type: 'function', function: { name: 'get_time', description: 'The time in a zone.', parameters: TIME_PARAMETERS } },
];

const ajv = new Ajv({ strict: false });
const validWeather = ajv.compile(WEATHER_PARAMETERS);
const validTime = ajv.compile(TIME_PARAMETERS);

function expectValid(validate: ReturnType<typeof ajv.compile>, json: string): void {
  const value: unknown = JSON.parse(json);
  expect(validate(value), `${json}: ${ajv.errorsText(validate.errors)}`).toBe(true);
}

const ASK = [{ role: 'user' as const, content: 'What is the weather in Paris?' }];

const { client } = useTinyEngine({ model: MODEL, contextTokens: 4096, parallel: 2 });

describe('tool calls', () => {
  it('calls a named function with arguments that validate against its schema', async () => {
    for (const seed of [1, 2, 3]) {
      const reply = await client().chat.completions.create({
        model: MODEL,
        messages: ASK,
        tools: TOOLS,
        tool_choice: { type: 'function', function: { name: 'get_weather' } },
        max_tokens: 300,
        seed,
      });
      const choice = reply.choices[0]!;
      expect(choice.finish_reason).toBe('tool_calls');
      expect(choice.message.content).toBeNull();
      const calls = choice.message.tool_calls!;
      expect(calls).toHaveLength(1);
      const call = calls[0]!;
      expect(call.type).toBe('function');
      expect(call.id).toMatch(/^call_/);
      if (call.type !== 'function') throw new Error('not a function call');
      expect(call.function.name).toBe('get_weather');
      expectValid(validWeather, call.function.arguments);
    }
  });

  it('streams a named call as tool_calls deltas: id and name first, then pieces of the arguments', async () => {
    const stream = await client().chat.completions.create({
      model: MODEL,
      messages: ASK,
      tools: TOOLS,
      tool_choice: { type: 'function', function: { name: 'get_weather' } },
      max_tokens: 300,
      seed: 7,
      stream: true,
    });
    const chunks: OpenAI.Chat.Completions.ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks[0]!.choices[0]!.delta.role).toBe('assistant');
    const deltas = chunks.flatMap((c) => c.choices[0]?.delta.tool_calls ?? []);
    expect(deltas.length, 'the arguments arrive in more than one piece').toBeGreaterThan(1);
    expect(deltas[0]).toMatchObject({ index: 0, type: 'function', function: { name: 'get_weather' } });
    expect(deltas[0]!.id).toMatch(/^call_/);
    expect(
      deltas.slice(1).every((d) => d.id === undefined && d.function?.name === undefined),
      'later pieces carry arguments only',
    ).toBe(true);
    expectValid(validWeather, deltas.map((d) => d.function?.arguments ?? '').join(''));
    expect(chunks.map((c) => c.choices[0]?.finish_reason).filter(Boolean)).toEqual(['tool_calls']);
    // The client library's own accumulation agrees.
    const final = await client()
      .chat.completions.stream({
        model: MODEL,
        messages: ASK,
        tools: TOOLS,
        tool_choice: { type: 'function', function: { name: 'get_weather' } },
        max_tokens: 300,
        seed: 7,
      })
      .finalChatCompletion();
    const call = final.choices[0]!.message.tool_calls![0]!;
    if (call.type !== 'function') throw new Error('not a function call');
    expectValid(validWeather, call.function.arguments);
  });

  it('with tool_choice "required" calls one of the tools, its arguments matching that tool', async () => {
    const seen = new Set<string>();
    for (const seed of [1, 2, 3, 4, 5, 6]) {
      const reply = await client().chat.completions.create({
        model: MODEL,
        messages: ASK,
        tools: TOOLS,
        tool_choice: 'required',
        max_tokens: 300,
        seed,
      });
      const call = reply.choices[0]!.message.tool_calls![0]!;
      if (call.type !== 'function') throw new Error('not a function call');
      expect(['get_weather', 'get_time']).toContain(call.function.name);
      expectValid(call.function.name === 'get_weather' ? validWeather : validTime, call.function.arguments);
      expect(reply.choices[0]!.finish_reason).toBe('tool_calls');
      seen.add(call.function.name);
    }
    expect(seen.size, 'the grammar leaves the choice of function to the model').toBeGreaterThan(0);
  });

  it('answers after a tool result, with the call and result in the history', async () => {
    const reply = await client().chat.completions.create({
      model: MODEL,
      messages: [
        ...ASK,
        {
          role: 'assistant',
          content: null,
          tool_calls: [
            {
              id: 'call_1',
              type: 'function',
              function: { name: 'get_weather', arguments: '{"city":"Paris","metric":true,"note":""}' },
            },
          ],
        },
        { role: 'tool', tool_call_id: 'call_1', content: '{"celsius": 21}' },
      ],
      tools: TOOLS,
      max_tokens: 5,
    });
    expect(['length', 'stop', 'tool_calls']).toContain(reply.choices[0]!.finish_reason);
    // The call and its result are in the prompt: it is longer than the question alone.
    const bare = await client().chat.completions.create({ model: MODEL, messages: ASK, tools: TOOLS, max_tokens: 1 });
    expect(reply.usage!.prompt_tokens).toBeGreaterThan(bare.usage!.prompt_tokens);
  });

  it('refuses a named function that is not among the tools, and a tool message that answers no call', async () => {
    await expect(
      client().chat.completions.create({
        model: MODEL,
        messages: ASK,
        tools: TOOLS,
        tool_choice: { type: 'function', function: { name: 'nope' } },
      }),
    ).rejects.toMatchObject({ status: 400, param: 'tool_choice', message: expect.stringContaining('"get_weather"') });
    await expect(
      client().chat.completions.create({
        model: MODEL,
        messages: [...ASK, { role: 'tool', tool_call_id: 'call_x', content: '1' }],
      }),
    ).rejects.toMatchObject({ status: 400, param: 'messages[1].tool_call_id' });
    await expect(
      client().chat.completions.create({ model: MODEL, messages: ASK, tool_choice: 'required' }),
    ).rejects.toMatchObject({ status: 400, param: 'tool_choice' });
  });
});

describe('structured output', () => {
  it('writes a json_schema answer that validates, streamed or not', async () => {
    const format = {
      type: 'json_schema' as const,
      json_schema: { name: 'weather', schema: WEATHER_PARAMETERS, strict: true },
    };
    for (const seed of [11, 12]) {
      const reply = await client().chat.completions.create({
        model: MODEL,
        messages: ASK,
        response_format: format,
        max_tokens: 300,
        seed,
      });
      expect(reply.choices[0]!.finish_reason).toBe('stop');
      expectValid(validWeather, reply.choices[0]!.message.content!);
    }
    const stream = await client().chat.completions.create({
      model: MODEL,
      messages: ASK,
      response_format: format,
      max_tokens: 300,
      seed: 13,
      stream: true,
    });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
    expectValid(validWeather, text);
  });

  it('writes JSON for json_object', async () => {
    const reply = await client().chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'Answer in JSON.' }],
      response_format: { type: 'json_object' },
      max_tokens: 400,
      temperature: 0,
    });
    // Random weights under a bare JSON grammar may write until max_tokens; only a finished answer is sure to parse.
    if (reply.choices[0]!.finish_reason === 'stop')
      expect(() => JSON.parse(reply.choices[0]!.message.content!)).not.toThrow();
    expect(reply.choices[0]!.message.content!.trimStart()).toMatch(/^[[{"\-\dtfn]/);
  });

  it('refuses a schema llama.cpp grammars cannot express, naming the field', async () => {
    await expect(
      client().chat.completions.create({
        model: MODEL,
        messages: ASK,
        response_format: {
          type: 'json_schema',
          json_schema: { name: 'bad', schema: { type: 'object', properties: { a: { type: 'no-such-type' } } } },
        },
      }),
    ).rejects.toMatchObject({ status: 400, param: 'response_format.json_schema.schema.properties.a.type' });
  });
});

describe('n choices', () => {
  it('returns n=3 choices, indexed, each its own generation, with usage over all of them', async () => {
    const reply = await client().chat.completions.create({ model: MODEL, messages: ASK, n: 3, max_tokens: 6, seed: 5 });
    expect(reply.choices.map((c) => c.index)).toEqual([0, 1, 2]);
    expect(reply.choices.every((c) => c.finish_reason === 'length' && c.message.content!.length > 0)).toBe(true);
    expect(
      new Set(reply.choices.map((c) => c.message.content)).size,
      'each choice samples with its own seed',
    ).toBeGreaterThan(1);
    expect(reply.usage!.completion_tokens).toBe(18);
    const one = await client().chat.completions.create({ model: MODEL, messages: ASK, max_tokens: 6, seed: 5 });
    expect(reply.usage!.prompt_tokens, 'the prompt is counted once').toBe(one.usage!.prompt_tokens);
    expect(reply.choices[0]!.message.content, 'choice 0 is what the seed alone gives').toBe(
      one.choices[0]!.message.content,
    );
  });

  it('streams n=3 choices, each with its own role, deltas and finish', async () => {
    const stream = await client().chat.completions.create({
      model: MODEL,
      messages: ASK,
      n: 3,
      max_tokens: 4,
      stream: true,
    });
    const finishes = new Map<number, string>();
    const roles = new Set<number>();
    for await (const chunk of stream) {
      for (const choice of chunk.choices) {
        if (choice.delta.role) roles.add(choice.index);
        if (choice.finish_reason) finishes.set(choice.index, choice.finish_reason);
      }
    }
    expect([...roles].sort()).toEqual([0, 1, 2]);
    expect([...finishes.entries()].sort()).toEqual([
      [0, 'length'],
      [1, 'length'],
      [2, 'length'],
    ]);
  });

  it('gives each of n forced calls arguments that validate', async () => {
    const reply = await client().chat.completions.create({
      model: MODEL,
      messages: ASK,
      tools: TOOLS,
      tool_choice: { type: 'function', function: { name: 'get_time' } },
      n: 3,
      max_tokens: 300,
      seed: 9,
    });
    expect(reply.choices).toHaveLength(3);
    for (const choice of reply.choices) {
      const call = choice.message.tool_calls![0]!;
      if (call.type !== 'function') throw new Error('not a function call');
      expectValid(validTime, call.function.arguments);
    }
  });
});

describe('schemas with ranges and patterns', () => {
  // Regression: a forced call or json_schema whose schema had a pattern or a minimum was refused with a 400
  // (`z.number().int()` sends both bounds); the grammar now holds them.
  it('are served for forced calls and json_schema, and their answers validate; one no answer could meet is a 400 naming where', async () => {
    const coded = {
      type: 'object',
      properties: { code: { type: 'string', pattern: '^[A-Z]{3}$' } },
      required: ['code'],
      additionalProperties: false,
    };
    const forced = await client().chat.completions.create({
      model: MODEL,
      messages: ASK,
      tools: [{ type: 'function', function: { name: 'f', parameters: coded } }],
      tool_choice: 'required',
      max_tokens: 50,
    });
    const call = forced.choices[0]!.message.tool_calls![0]!;
    if (call.type !== 'function') throw new Error('not a function call');
    expectValid(ajv.compile(coded), call.function.arguments);
    const ranged = { type: 'integer', minimum: 3, maximum: 7 };
    const json = await client().chat.completions.create({
      model: MODEL,
      messages: ASK,
      response_format: { type: 'json_schema', json_schema: { name: 'x', schema: ranged } },
      max_tokens: 10,
    });
    expectValid(ajv.compile(ranged), json.choices[0]!.message.content!);
    await expect(
      client().chat.completions.create({
        model: MODEL,
        messages: ASK,
        response_format: {
          type: 'json_schema',
          json_schema: { name: 'x', schema: { type: 'string', minLength: 4, maxLength: 2 } },
        },
      }),
    ).rejects.toMatchObject({ status: 400, param: 'response_format.json_schema.schema.minLength' });
    const auto = await client().chat.completions.create({
      model: MODEL,
      messages: ASK,
      tools: [{ type: 'function', function: { name: 'f', parameters: coded } }],
      max_tokens: 3,
    });
    expect(auto.choices).toHaveLength(1);
  });
});

describe('logprobs', () => {
  it('reports each token of a chat reply with its logprob and the top alternatives; greedy picks the first', async () => {
    const reply = await client().chat.completions.create({
      model: MODEL,
      messages: ASK,
      max_tokens: 8,
      temperature: 0,
      logprobs: true,
      top_logprobs: 3,
    });
    const choice = reply.choices[0]!;
    const content = choice.logprobs!.content!;
    expect(content.map((t) => t.token).join(''), 'the tokens spell the reply').toBe(choice.message.content);
    expect(content.length).toBeGreaterThan(0);
    for (const t of content) {
      expect(t.logprob).toBeLessThanOrEqual(0);
      expect(t.top_logprobs).toHaveLength(3);
      const tops = t.top_logprobs.map((a) => a.logprob);
      expect(tops, 'most likely first').toEqual([...tops].sort((a, b) => b - a));
      expect(tops.reduce((sum, lp) => sum + Math.exp(lp), 0)).toBeLessThanOrEqual(1 + 1e-6);
      // At temperature 0 the sampler takes the most likely token, so the reply's token is the first alternative.
      expect(t.top_logprobs[0]!.token).toBe(t.token);
      expect(t.logprob).toBeCloseTo(t.top_logprobs[0]!.logprob, 5);
      expect(Buffer.from(t.bytes!).toString('utf8')).toBe(t.token);
    }
    const plain = await client().chat.completions.create({ model: MODEL, messages: ASK, max_tokens: 2 });
    expect(plain.choices[0]!.logprobs, 'none unless asked').toBeNull();
  });

  it("puts a streamed reply's logprobs on its finish chunk, and answers /v1/completions in its legacy shape", async () => {
    const stream = await client().chat.completions.create({
      model: MODEL,
      messages: ASK,
      max_tokens: 6,
      logprobs: true,
      stream: true,
      seed: 3,
    });
    let text = '';
    const tokens: string[] = [];
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? '';
      for (const t of chunk.choices[0]?.logprobs?.content ?? []) tokens.push(t.token);
    }
    expect(tokens.join('')).toBe(text);
    const completion = await client().completions.create({
      model: MODEL,
      prompt: 'Once upon a time',
      max_tokens: 6,
      logprobs: 2,
      temperature: 0,
    });
    const lp = completion.choices[0]!.logprobs!;
    expect(lp.tokens!.join('')).toBe(completion.choices[0]!.text);
    expect(lp.token_logprobs!.every((v) => v <= 0)).toBe(true);
    expect(lp.top_logprobs!.every((alts) => Object.keys(alts).length >= 1 && Object.keys(alts).length <= 2)).toBe(true);
    expect(lp.text_offset![0]).toBe(0);
  });

  it('refuses top_logprobs without logprobs, naming it', async () => {
    await expect(
      client().chat.completions.create({ model: MODEL, messages: ASK, top_logprobs: 2 }),
    ).rejects.toMatchObject({ status: 400, param: 'top_logprobs' });
  });
});
