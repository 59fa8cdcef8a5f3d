// Client libraries that speak Anthropic's Messages API, each in the way its
// users call it, against the demo exactly as `llmgw up` makes it. Guards
// issue 35's matrix on this side: tools and the AI SDK's generateObject (a
// forced "json" tool on this provider) got context_length_exceeded out of
// the box, numbers a grammar admitted became `null` in tool input,
// message_start said `input_tokens: 0` so LangChain's ChatAnthropic streams
// counted no input, and `GET /v1/models` answered in OpenAI's shape. Random
// weights: the tests assert shape (input validates, usage is positive,
// streams end with message_stop), never words.
import { createAnthropic } from '@ai-sdk/anthropic';
import Anthropic from '@anthropic-ai/sdk';
import { ChatAnthropic } from '@langchain/anthropic';
import { tool as langchainTool } from '@langchain/core/tools';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { z } from 'zod';
import {
  forecast,
  jsonSchemaOf,
  schemaErrors,
  SHAPED_MAX_TOKENS,
  TEXT_MAX_TOKENS,
  weatherArgs,
} from '../support/client-schemas.js';
import { aiSdkCells } from '../support/ai-sdk-cells.js';
import { type DemoUp, startDemoUp } from '../support/demo-up.js';

let demo: DemoUp;

beforeAll(async () => {
  demo = await startDemoUp('anthropic-clients');
}, 240_000);

afterAll(async () => {
  if (!demo) return;
  expect(await demo.stop(), 'llmgw up stops cleanly on Ctrl-C').toEqual({ code: 0, signal: null });
  expect(demo.strayFetches, 'no client library reached beyond loopback').toEqual([]);
}, 60_000);

function anthropic(): Anthropic {
  // The SDK appends /v1 itself. No retries: every status llmgw sends must reach the test as it was sent.
  return new Anthropic({ baseURL: demo.client, apiKey: demo.apiKey, maxRetries: 0 });
}

function expectValid(schema: z.ZodType, value: unknown, what: string): void {
  expect(schemaErrors(schema, value), what).toBeNull();
}

const PROMPT = 'What will the weather be in Lisbon over the next three days?';

const weatherTool = {
  name: 'get_weather',
  description: 'the forecast for a city',
  input_schema: jsonSchemaOf(weatherArgs) as Anthropic.Tool.InputSchema,
};

describe('@anthropic-ai/sdk', () => {
  it('answers messages.create with usage, and lists the demo in Anthropic’s model shape', async () => {
    const client = anthropic();
    const reply = await client.messages.create({
      model: 'demo',
      max_tokens: TEXT_MAX_TOKENS,
      messages: [{ role: 'user', content: 'Hello' }],
    });
    expect(reply.content[0]?.type).toBe('text');
    expect(reply.usage.input_tokens).toBeGreaterThan(0);
    expect(reply.usage.output_tokens).toBeGreaterThan(0);

    const models = await client.models.list();
    const demoModel = models.data.find((m) => m.id === 'demo');
    expect(demoModel, `the demo among ${JSON.stringify(models.data)}`).toMatchObject({ type: 'model' });
    expect(typeof demoModel!.display_name).toBe('string');
    expect(Number.isNaN(Date.parse(demoModel!.created_at)), 'created_at is an RFC 3339 time').toBe(false);
  });

  it('streams with the prompt counted in message_start, and ends with message_stop', async () => {
    const stream = anthropic().messages.stream({
      model: 'demo',
      max_tokens: TEXT_MAX_TOKENS,
      messages: [{ role: 'user', content: 'Hello' }],
    });
    const types: string[] = [];
    let startInput = -1;
    for await (const event of stream) {
      types.push(event.type);
      if (event.type === 'message_start') startInput = event.message.usage.input_tokens;
    }
    const final = await stream.finalMessage();
    expect(types[0]).toBe('message_start');
    expect(types.at(-1)).toBe('message_stop');
    expect(startInput, 'message_start carries the prompt’s token count').toBeGreaterThan(0);
    expect(final.usage.input_tokens).toBe(startInput);
    expect(final.usage.output_tokens).toBeGreaterThan(0);
  });

  it('makes a forced tool call whose input validates, whole and streamed', async () => {
    const params = {
      model: 'demo',
      max_tokens: SHAPED_MAX_TOKENS,
      messages: [{ role: 'user' as const, content: PROMPT }],
      tools: [weatherTool],
      tool_choice: { type: 'tool' as const, name: 'get_weather' },
    };
    const reply = await anthropic().messages.create(params);
    expect(reply.stop_reason).toBe('tool_use');
    const uses = reply.content.filter((b) => b.type === 'tool_use');
    expect(uses.map((u) => u.name)).toEqual(['get_weather']);
    expectValid(weatherArgs, uses[0]!.input, 'the tool_use input');

    // Streamed, the input arrives as input_json_delta fragments the SDK joins and parses.
    const streamed = await anthropic().messages.stream(params).finalMessage();
    expect(streamed.stop_reason).toBe('tool_use');
    const streamedUses = streamed.content.filter((b) => b.type === 'tool_use');
    expect(streamedUses.map((u) => u.name)).toEqual(['get_weather']);
    expectValid(weatherArgs, streamedUses[0]!.input, 'the streamed tool_use input');
  });
});

describe('AI SDK with @ai-sdk/anthropic', () => {
  // The provider's base URL includes the version path, unlike the Anthropic SDK's.
  const model = () => createAnthropic({ baseURL: `${demo.client}/v1`, apiKey: demo.apiKey })('demo');
  aiSdkCells(model);
});

describe('LangChain ChatAnthropic', () => {
  const chat = (maxTokens: number): ChatAnthropic =>
    // anthropicApiUrl is the server's root: the SDK underneath appends /v1.
    new ChatAnthropic({ model: 'demo', apiKey: demo.apiKey, anthropicApiUrl: demo.client, maxTokens, maxRetries: 0 });

  it('answers invoke, and a stream whose usage counts the prompt', async () => {
    const reply = await chat(TEXT_MAX_TOKENS).invoke('Hello');
    expect(reply.text.length).toBeGreaterThan(0);
    expect(reply.usage_metadata?.input_tokens).toBeGreaterThan(0);

    let text = '';
    let input = 0;
    let output = 0;
    for await (const chunk of await chat(TEXT_MAX_TOKENS).stream('Hello')) {
      text += chunk.text;
      input += chunk.usage_metadata?.input_tokens ?? 0;
      output += chunk.usage_metadata?.output_tokens ?? 0;
    }
    expect(text.length).toBeGreaterThan(0);
    expect(input, 'the stream’s input tokens, read from message_start').toBeGreaterThan(0);
    expect(output).toBeGreaterThan(0);
  });

  it('calls a tool bound with a forced tool_choice, with args that validate', async () => {
    const getWeather = langchainTool(() => 'sunny', {
      name: 'get_weather',
      description: 'the forecast for a city',
      schema: weatherArgs,
    });
    const reply = await chat(SHAPED_MAX_TOKENS).bindTools([getWeather], { tool_choice: 'get_weather' }).invoke(PROMPT);
    expect(reply.tool_calls?.map((c) => c.name)).toEqual(['get_weather']);
    expectValid(weatherArgs, reply.tool_calls![0]!.args, 'the tool call args');
  });

  it('withStructuredOutput returns an object that validates', async () => {
    const answer = await chat(SHAPED_MAX_TOKENS).withStructuredOutput(forecast, { name: 'forecast' }).invoke(PROMPT);
    expectValid(forecast, answer, 'the structured output');
  });
});
