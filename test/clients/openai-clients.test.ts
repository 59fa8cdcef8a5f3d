// Client libraries that speak OpenAI's API, each in the way its users call
// it, against the demo exactly as `llmgw up` makes it (no catalog edited, no
// context set by hand). Guards issue 35's matrix: out of the box, every tool
// call and structured answer failed on the demo (a 256-token context), zod's
// `.int()` and `.email()` got 400s, and numbers like 9e63764 reached clients
// as Infinity. The demo has random weights: each test asserts the shape the
// grammar guarantees (arguments and objects validate against the schema sent,
// usage counts are positive, streams end with a finish), never the words.
import { createOpenAI } from '@ai-sdk/openai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { tool as langchainTool } from '@langchain/core/tools';
import { ChatOpenAI } from '@langchain/openai';
import { tool as llamaTool } from '@llamaindex/core/tools';
import { OpenAI as LlamaOpenAI } from '@llamaindex/openai';
import {
  Agent,
  OpenAIChatCompletionsModel,
  OpenAIResponsesModel,
  run,
  setTracingDisabled,
  tool as agentTool,
} from '@openai/agents';
import type { LanguageModel } from 'ai';
import OpenAI from 'openai';
import { zodFunction, zodResponseFormat, zodTextFormat } from 'openai/helpers/zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { z } from 'zod';
import {
  forecast,
  jsonSchemaOf,
  parseJson,
  schemaErrors,
  SHAPED_MAX_TOKENS,
  TEXT_MAX_TOKENS,
  weatherArgs,
} from '../support/client-schemas.js';
import { aiSdkCells } from '../support/ai-sdk-cells.js';
import { type DemoUp, startDemoUp } from '../support/demo-up.js';

let demo: DemoUp;
let baseURL = '';

beforeAll(async () => {
  demo = await startDemoUp('openai-clients');
  baseURL = `${demo.client}/v1`;
}, 240_000);

afterAll(async () => {
  if (!demo) return;
  expect(await demo.stop(), 'llmgw up stops cleanly on Ctrl-C').toEqual({ code: 0, signal: null });
  expect(demo.strayFetches, 'no client library reached beyond loopback').toEqual([]);
}, 60_000);

function openai(): OpenAI {
  // No retries: every status llmgw sends must reach the test as it was sent.
  return new OpenAI({ baseURL, apiKey: demo.apiKey, maxRetries: 0 });
}

/** Fails with ajv's reasons, and the value, when `value` does not validate against `schema`. */
function expectValid(schema: z.ZodType, value: unknown, what: string): void {
  expect(schemaErrors(schema, value), what).toBeNull();
}

const PROMPT = 'What will the weather be in Lisbon over the next three days?';

describe('openai (Chat Completions)', () => {
  it('answers create and a stream with usage, and the stream ends with a finish reason', async () => {
    const client = openai();
    const reply = await client.chat.completions.create({
      model: 'demo',
      messages: [{ role: 'user', content: 'Hello' }],
      max_tokens: TEXT_MAX_TOKENS,
    });
    expect(reply.choices[0]!.message.content, 'a completion').toBeTruthy();
    expect(reply.usage!.prompt_tokens).toBeGreaterThan(0);
    expect(reply.usage!.completion_tokens).toBeGreaterThan(0);

    const stream = await client.chat.completions.create({
      model: 'demo',
      messages: [{ role: 'user', content: 'Hello' }],
      max_tokens: TEXT_MAX_TOKENS,
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = '';
    const finishes: string[] = [];
    let usage: OpenAI.CompletionUsage | undefined;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? '';
      if (chunk.choices[0]?.finish_reason) finishes.push(chunk.choices[0].finish_reason);
      if (chunk.usage) usage = chunk.usage;
    }
    expect(text.length, 'streamed text').toBeGreaterThan(0);
    expect(finishes, 'one finish reason').toHaveLength(1);
    expect(usage?.prompt_tokens).toBeGreaterThan(0);
    expect(usage?.completion_tokens).toBeGreaterThan(0);
  });

  it('makes a forced tool call whose arguments validate (zodFunction, strict)', async () => {
    const reply = await openai().chat.completions.parse({
      model: 'demo',
      messages: [{ role: 'user', content: PROMPT }],
      tools: [zodFunction({ name: 'get_weather', parameters: weatherArgs, description: 'the forecast for a city' })],
      tool_choice: { type: 'function', function: { name: 'get_weather' } },
      max_tokens: SHAPED_MAX_TOKENS,
    });
    const choice = reply.choices[0]!;
    expect(choice.finish_reason).toBe('tool_calls');
    expect(choice.message.tool_calls, 'one tool call').toHaveLength(1);
    const call = choice.message.tool_calls![0]!;
    expect(call.type === 'function' && call.function.name).toBe('get_weather');
    if (call.type !== 'function') return;
    expectValid(weatherArgs, parseJson(call.function.arguments, 'the arguments'), 'the tool call arguments');
    expect(call.function.parsed_arguments, 'the SDK parsed them with the zod schema').toBeTruthy();
  });

  it('answers response_format json_schema with an object that validates (zodResponseFormat)', async () => {
    const reply = await openai().chat.completions.parse({
      model: 'demo',
      messages: [{ role: 'user', content: PROMPT }],
      response_format: zodResponseFormat(forecast, 'forecast'),
      max_tokens: SHAPED_MAX_TOKENS,
    });
    expect(reply.choices[0]!.finish_reason).toBe('stop');
    expectValid(forecast, parseJson(reply.choices[0]!.message.content, 'the answer'), 'the structured answer');
    expect(reply.choices[0]!.message.parsed, 'the SDK parsed it with the zod schema').toBeTruthy();
  });
});

describe('openai (Responses)', () => {
  it('answers create and a stream that ends with response.completed and its usage', async () => {
    const client = openai();
    const reply = await client.responses.create({ model: 'demo', input: 'Hello', max_output_tokens: TEXT_MAX_TOKENS });
    expect(reply.output_text, 'a completion').toBeTruthy();
    expect(reply.usage!.input_tokens).toBeGreaterThan(0);
    expect(reply.usage!.output_tokens).toBeGreaterThan(0);

    const stream = await client.responses.create({
      model: 'demo',
      input: 'Hello',
      max_output_tokens: TEXT_MAX_TOKENS,
      stream: true,
    });
    let text = '';
    const types: string[] = [];
    let usage: OpenAI.Responses.ResponseUsage | undefined;
    for await (const event of stream) {
      types.push(event.type);
      if (event.type === 'response.output_text.delta') text += event.delta;
      // A reply cut off by max_output_tokens ends `incomplete`, with its usage all the same.
      if (event.type === 'response.completed' || event.type === 'response.incomplete') usage = event.response.usage;
    }
    expect(text.length, 'streamed text').toBeGreaterThan(0);
    expect(types[0]).toBe('response.created');
    expect(types.at(-1), 'the stream ends with its completion').toMatch(/^response\.(completed|incomplete)$/);
    expect(usage?.input_tokens).toBeGreaterThan(0);
    expect(usage?.output_tokens).toBeGreaterThan(0);
  });

  it('makes a forced function call whose arguments validate', async () => {
    const reply = await openai().responses.create({
      model: 'demo',
      input: PROMPT,
      tools: [
        {
          type: 'function',
          name: 'get_weather',
          description: 'the forecast for a city',
          parameters: jsonSchemaOf(weatherArgs),
          strict: true,
        },
      ],
      tool_choice: { type: 'function', name: 'get_weather' },
      max_output_tokens: SHAPED_MAX_TOKENS,
    });
    const calls = reply.output.filter((item) => item.type === 'function_call');
    expect(calls.map((c) => c.name)).toEqual(['get_weather']);
    expectValid(weatherArgs, parseJson(calls[0]!.arguments, 'the arguments'), 'the function call arguments');
  });

  it('answers text.format json_schema with an object that validates (zodTextFormat)', async () => {
    const reply = await openai().responses.parse({
      model: 'demo',
      input: PROMPT,
      text: { format: zodTextFormat(forecast, 'forecast') },
      max_output_tokens: SHAPED_MAX_TOKENS,
    });
    expect(reply.status).toBe('completed');
    expectValid(forecast, parseJson(reply.output_text, 'the answer'), 'the structured answer');
    expect(reply.output_parsed, 'the SDK parsed it with the zod schema').toBeTruthy();
  });
});

describe('@openai/agents', () => {
  // The SDK exports traces to api.openai.com unless told not to; against llmgw there is nowhere to send them.
  beforeAll(() => setTracingDisabled(true));

  it.each(['responses', 'chat_completions'] as const)(
    'runs an agent whose model must call its tool, on the %s model',
    async (api) => {
      const calls: unknown[] = [];
      const getWeather = agentTool({
        name: 'get_weather',
        description: 'the forecast for a city',
        parameters: weatherArgs,
        execute: (args) => {
          calls.push(args);
          return 'sunny';
        },
      });
      const client = openai();
      const agent = new Agent({
        name: 'forecaster',
        instructions: 'Answer weather questions with the get_weather tool.',
        model:
          api === 'responses'
            ? new OpenAIResponsesModel(client, 'demo')
            : new OpenAIChatCompletionsModel(client, 'demo'),
        tools: [getWeather],
        modelSettings: { toolChoice: 'get_weather', maxTokens: SHAPED_MAX_TOKENS },
        // The tool's result is the answer: one model turn, whatever the random weights would say next.
        toolUseBehavior: 'stop_on_first_tool',
      });
      const result = await run(agent, PROMPT, { maxTurns: 2 });
      // A call whose arguments failed the SDK's own zod check would reach the model as an error, not run the tool.
      expect(calls, 'the tool ran once').toHaveLength(1);
      expectValid(weatherArgs, calls[0], 'the arguments the agent called its tool with');
      expect(result.finalOutput, "the tool's result ends the run").toBe('sunny');
    },
  );
});

/** The AI SDK's OpenAI providers; the Anthropic one is in anthropic-clients.test.ts. */
const aiSdkModels: [string, () => LanguageModel][] = [
  // The default `openai(model)` is the Responses API.
  ['@ai-sdk/openai', () => createOpenAI({ baseURL, apiKey: demo.apiKey })('demo')],
  [
    '@ai-sdk/openai-compatible',
    () =>
      createOpenAICompatible({
        name: 'llmgw',
        baseURL,
        apiKey: demo.apiKey,
        // Without it generateObject sends `json_object` with no schema, so nothing holds the answer to it.
        supportsStructuredOutputs: true,
        includeUsage: true,
      })('demo'),
  ],
];

describe.each(aiSdkModels)('AI SDK with %s', (_name, model) => aiSdkCells(model));

describe('LangChain ChatOpenAI', () => {
  const chat = (): ChatOpenAI =>
    new ChatOpenAI({
      model: 'demo',
      apiKey: demo.apiKey,
      configuration: { baseURL },
      maxTokens: SHAPED_MAX_TOKENS,
      maxRetries: 0,
    });

  it('calls a tool bound with a forced tool_choice, with arguments that validate', async () => {
    const getWeather = langchainTool(() => 'sunny', {
      name: 'get_weather',
      description: 'the forecast for a city',
      schema: weatherArgs,
    });
    const reply = await chat().bindTools([getWeather], { tool_choice: 'get_weather' }).invoke(PROMPT);
    expect(reply.tool_calls?.map((c) => c.name)).toEqual(['get_weather']);
    expectValid(weatherArgs, reply.tool_calls![0]!.args, 'the tool call args');
    expect(reply.usage_metadata?.input_tokens).toBeGreaterThan(0);
  });

  // jsonSchema is what ChatOpenAI picks for a model it does not know; functionCalling is what issue 35 saw break.
  it.each(['jsonSchema', 'functionCalling'] as const)(
    'withStructuredOutput (%s) returns an object that validates',
    async (method) => {
      const answer = await chat().withStructuredOutput(forecast, { name: 'forecast', method }).invoke(PROMPT);
      expectValid(forecast, answer, 'the structured output');
    },
  );

  it('streams text with usage', async () => {
    let text = '';
    let input = 0;
    let output = 0;
    const model = new ChatOpenAI({
      model: 'demo',
      apiKey: demo.apiKey,
      configuration: { baseURL },
      maxTokens: TEXT_MAX_TOKENS,
      maxRetries: 0,
    });
    for await (const chunk of await model.stream('Hello')) {
      text += typeof chunk.content === 'string' ? chunk.content : '';
      input += chunk.usage_metadata?.input_tokens ?? 0;
      output += chunk.usage_metadata?.output_tokens ?? 0;
    }
    expect(text.length).toBeGreaterThan(0);
    expect(input).toBeGreaterThan(0);
    expect(output).toBeGreaterThan(0);
  });
});

describe('LlamaIndex (@llamaindex/openai)', () => {
  const llm = (maxTokens: number): LlamaOpenAI =>
    // LlamaIndex samples at 0.1 unless told; near-greedy, the demo's random weights repeat one phrase
    // inside a string until max_tokens cuts the JSON off. A trained model needs no such setting.
    new LlamaOpenAI({ model: 'demo', apiKey: demo.apiKey, baseURL, maxTokens, maxRetries: 0, temperature: 1 });

  it('answers chat and a stream', async () => {
    const reply = await llm(TEXT_MAX_TOKENS).chat({ messages: [{ role: 'user', content: 'Hello' }] });
    expect(reply.message.content, 'a completion').toBeTruthy();

    let text = '';
    let chunks = 0;
    const stream = await llm(TEXT_MAX_TOKENS).chat({ messages: [{ role: 'user', content: 'Hello' }], stream: true });
    for await (const chunk of stream) {
      text += chunk.delta;
      chunks++;
    }
    expect(chunks).toBeGreaterThan(1);
    expect(text.length).toBeGreaterThan(0);
  });

  it('calls a tool when the request requires one, with arguments that validate', async () => {
    const getWeather = llamaTool({
      name: 'get_weather',
      description: 'the forecast for a city',
      parameters: weatherArgs,
      execute: () => 'sunny',
    });
    const reply = await llm(SHAPED_MAX_TOKENS).chat({
      messages: [{ role: 'user', content: PROMPT }],
      tools: [getWeather],
      additionalChatOptions: { tool_choice: 'required' },
    });
    const options = reply.message.options as { toolCall?: { name: string; input: unknown }[] } | undefined;
    expect(options?.toolCall?.map((c) => c.name)).toEqual(['get_weather']);
    const input = options!.toolCall![0]!.input;
    expectValid(weatherArgs, typeof input === 'string' ? parseJson(input, 'the input') : input, 'the tool call input');
  });

  it('answers a responseFormat zod schema with an object that validates', async () => {
    const reply = await llm(SHAPED_MAX_TOKENS).chat({
      messages: [{ role: 'user', content: PROMPT }],
      responseFormat: forecast,
    });
    expectValid(forecast, parseJson(String(reply.message.content), 'the answer'), 'the structured answer');
  });
});
