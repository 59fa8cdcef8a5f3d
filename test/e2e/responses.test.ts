// OpenAI's Responses API as users meet it: the official `openai` client, the
// Vercel AI SDK's default `openai(model)` and LangChain's ChatOpenAI with
// `useResponsesApi`, against a real `llmgw control` process (SQLite store)
// and a simulated agent running two models: `demo` on the sim engine, which
// serves the Responses API natively (the router passes requests through),
// and `tiny` on the builtin engine (node-llama-cpp on the generated GGUF),
// which does not (the router translates to chat and back). The in-process
// tests (src/gateway/responses.test.ts, src/gateway/responses/) cover each
// rule; this file proves both paths hold with real clients, keys from the
// store, replicas from the reconciler, and responses kept in the store.
//
// Nothing here may leave loopback: every fetch made in this process is
// checked (LangChain can fetch tiktoken encodings from the internet to count
// tokens), and the test fails if any went elsewhere.
import { join } from 'node:path';
import { createOpenAI } from '@ai-sdk/openai';
import { ChatOpenAI } from '@langchain/openai';
import { generateText, stepCountIs, streamText, tool } from 'ai';
import OpenAI, { BadRequestError, NotFoundError } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { UsageView } from '../../src/api/index.js';
import { makeTinyModel } from '../../src/dev/make-model/index.js';
import { startOneNodeFleet, type OneNodeFleet } from '../support/one-node.js';
import { waitFor } from '../support/wait.js';
import { weightsDir } from '../support/fleet.js';

/** Both paths: the sim serves the Responses API natively, the builtin engine through translation. */
const MODELS = ['demo', 'tiny'] as const;

let fleet: OneNodeFleet;
let clientUrl = '';
let key = { id: '', secret: '' };
let otherKey = { id: '', secret: '' };

/** URLs this process fetched beyond loopback: must stay empty. */
const strayFetches: string[] = [];
const realFetch = globalThis.fetch;

const api = <T>(method: string, path: string, body?: unknown) => fleet.api<T>(method, path, body);

function openai(apiKey = key.secret): OpenAI {
  // No retries: every status the router sends must reach the test as it was sent.
  return new OpenAI({ apiKey, baseURL: `${clientUrl}/v1`, maxRetries: 0, timeout: 60_000 });
}

beforeAll(async () => {
  globalThis.fetch = (input: Parameters<typeof fetch>[0], init?: Parameters<typeof fetch>[1]) => {
    const url = new URL(input instanceof Request ? input.url : String(input));
    if (!['127.0.0.1', 'localhost', '[::1]'].includes(url.hostname)) {
      strayFetches.push(url.href);
      return Promise.reject(new Error(`this test stays on loopback; refused ${url.href}`));
    }
    return realFetch(input, init);
  };
  fleet = await startOneNodeFleet({
    name: 'responses',
    portRange: '26900-26999',
    keys: ['responses', 'stranger'],
    readyWithinMs: 240_000,
    models: async (dir) => {
      const gguf = join(dir, 'tiny.gguf');
      await makeTinyModel(gguf, { contextLength: 4096 });
      return [
        { name: 'demo', source: weightsDir(dir), scaling: { min: 1 }, profiles: [{ engine: 'sim' }] },
        {
          name: 'tiny',
          source: `file://${gguf}`,
          scaling: { min: 1 },
          profiles: [{ engine: 'builtin', memory_gb: 1 }],
        },
      ];
    },
  });
  clientUrl = fleet.clientUrl;
  key = fleet.keys.responses!;
  otherKey = fleet.keys.stranger!;
}, 300_000);

afterAll(async () => {
  globalThis.fetch = realFetch;
  await fleet?.stop();
  expect(strayFetches, 'fetches beyond loopback').toEqual([]);
});

// Bounded values only: the builtin engine's tiny model has random weights, and only a grammar makes its call parse.
const weather = {
  type: 'function' as const,
  name: 'get_weather',
  description: 'The weather in a city.',
  parameters: {
    type: 'object',
    properties: { city: { type: 'string', enum: ['Oslo', 'Lima'] } },
    required: ['city'],
    additionalProperties: false,
  },
  strict: true,
};

describe('POST /v1/responses through the official openai client, natively (sim) and translated (builtin)', () => {
  it.each(MODELS)(
    '%s: answers responses.create whole and streamed, with usage, kept for GET and accounted',
    async (model) => {
      const res = await openai().responses.create({
        model,
        instructions: 'Be terse.',
        input: 'Tell me about rivers.',
        max_output_tokens: 8,
      });
      expect(res.object).toBe('response');
      expect(res.model).toBe(model);
      expect(res.usage!.output_tokens, 'the engine’s own count').toBeGreaterThan(0);
      expect(res.usage!.output_tokens).toBeLessThanOrEqual(8);
      expect(res.usage!.input_tokens).toBeGreaterThan(0);
      expect((await openai().responses.retrieve(res.id)).output).toEqual(res.output);

      let deltas = '';
      const stream = openai()
        .responses.stream({ model, input: 'Tell me about stones.', max_output_tokens: 8 })
        .on('response.output_text.delta', (e) => (deltas += e.delta));
      const final = await stream.finalResponse();
      expect(deltas, 'the deltas add up to the final text').toBe(final.output_text);
      expect(final.usage!.output_tokens).toBeGreaterThan(0);
      expect((await openai().responses.retrieve(final.id)).output_text, 'a streamed response is kept too').toBe(
        final.output_text,
      );

      await waitFor(
        'usage of both calls under the model',
        async () => {
          const { body } = await api<UsageView[]>('GET', '/api/v1/usage');
          const row = body.find((u) => u.key_id === key.id && u.model === model);
          return row && row.completion_tokens >= res.usage!.output_tokens + final.usage!.output_tokens
            ? row
            : undefined;
        },
        20_000,
      );
    },
  );

  it.each(MODELS)(
    '%s: round-trips a function tool: a forced call, then its output by previous_response_id',
    async (model) => {
      const first = await openai().responses.create({
        model,
        input: 'What is the weather in Oslo?',
        tools: [weather],
        tool_choice: 'required',
        max_output_tokens: 64,
      });
      const call = first.output.find((o): o is OpenAI.Responses.ResponseFunctionToolCall => o.type === 'function_call');
      expect(call, JSON.stringify(first.output)).toBeDefined();
      expect(call!.name).toBe('get_weather');
      expect(typeof JSON.parse(call!.arguments), 'arguments are JSON').toBe('object');
      const answer = await openai().responses.create({
        model,
        tools: [weather],
        tool_choice: 'none',
        previous_response_id: first.id,
        input: [{ type: 'function_call_output', call_id: call!.call_id, output: '21 °C, sunny' }],
        max_output_tokens: 8,
      });
      // An engine serving the API natively echoes what it was sent (no previous id, store false); the translated answer says what the client asked.
      if (model === 'tiny') expect(answer.previous_response_id).toBe(first.id);
      expect(
        (await openai().responses.retrieve(answer.id)).previous_response_id,
        'the kept copy says what the client asked',
      ).toBe(first.id);
      expect(answer.output_text.length, 'answered in text').toBeGreaterThan(0);
    },
  );

  it.each(MODELS)(
    '%s: continues by previous_response_id for its key only, and deletes as OpenAI does',
    async (model) => {
      const first = await openai().responses.create({ model, input: 'My name is Ada.', max_output_tokens: 4 });
      const next = await openai().responses.create({
        model,
        input: 'What is my name?',
        previous_response_id: first.id,
        max_output_tokens: 4,
      });
      expect(next.status).not.toBe('failed');
      const stranger = await openai(otherKey.secret)
        .responses.create({ model, input: 'x', previous_response_id: first.id })
        .catch((e: unknown) => e);
      expect(stranger, 'another key’s response is not found').toBeInstanceOf(BadRequestError);
      expect((stranger as BadRequestError).code).toBe('previous_response_not_found');
      await expect(openai(otherKey.secret).responses.retrieve(first.id)).rejects.toBeInstanceOf(NotFoundError);

      await openai().responses.delete(first.id);
      await expect(openai().responses.retrieve(first.id)).rejects.toBeInstanceOf(NotFoundError);
      await expect(
        openai().responses.create({ model, input: 'x', previous_response_id: first.id }),
      ).rejects.toBeInstanceOf(BadRequestError);
      const unauthenticated = await fetch(`${clientUrl}/v1/responses/${next.id}`);
      expect(unauthenticated.status, 'GET asks a key').toBe(401);
    },
  );

  it('refuses what llmgw does not serve with 400 in OpenAI’s shape, naming it', async () => {
    const webSearch = await openai()
      .responses.create({ model: 'demo', input: 'x', tools: [{ type: 'web_search_preview' }] })
      .catch((e: unknown) => e);
    expect(webSearch).toBeInstanceOf(BadRequestError);
    expect((webSearch as BadRequestError).message).toMatch(/web_search_preview/);
    const background = await openai()
      .responses.create({ model: 'tiny', input: 'x', background: true })
      .catch((e: unknown) => e);
    expect(background).toBeInstanceOf(BadRequestError);
    expect((background as BadRequestError).message).toMatch(/background/);
    const res = await fetch(`${clientUrl}/v1/responses`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key.secret}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'demo',
        input: [{ role: 'user', content: [{ type: 'input_file', file_id: 'file-1' }] }],
      }),
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { type: string } }).error.type).toBe('invalid_request_error');
  });
});

describe('the Responses API through the Vercel AI SDK and LangChain', () => {
  it.each(MODELS)('%s: the AI SDK’s default openai(model): generateText and streamText', async (model) => {
    const provider = createOpenAI({ baseURL: `${clientUrl}/v1`, apiKey: key.secret });
    const whole = await generateText({
      model: provider(model),
      prompt: 'Tell me about rivers.',
      maxOutputTokens: 8,
      maxRetries: 0,
    });
    expect(whole.text.length).toBeGreaterThan(0);
    expect(whole.usage.outputTokens).toBeGreaterThan(0);

    const errors: unknown[] = [];
    const streamed = streamText({
      model: provider(model),
      prompt: 'Tell me about stones.',
      maxOutputTokens: 8,
      maxRetries: 0,
      onError: ({ error }) => void errors.push(error),
    });
    let text = '';
    for await (const delta of streamed.textStream) text += delta;
    expect(errors, 'no error reached onError').toEqual([]);
    expect(text.length).toBeGreaterThan(0);
    expect((await streamed.usage).outputTokens).toBeGreaterThan(0);

    // A tool loop: the SDK sends the call back as an item_reference to the kept response's item, then the tool's result.
    // The sim makes its arguments from the prompt ({seed}); the builtin engine follows the schema's grammar.
    const inputSchema: z.ZodType<Record<string, unknown>> =
      model === 'demo' ? z.object({ seed: z.number() }) : z.object({ city: z.enum(['Oslo', 'Lima']) });
    const loop = await generateText({
      model: provider(model),
      prompt: 'What is the weather in Oslo?',
      tools: {
        get_weather: tool({ description: 'The weather in a city.', inputSchema, execute: async () => '21 °C, sunny' }),
      },
      prepareStep: ({ stepNumber }) => ({ toolChoice: stepNumber === 0 ? 'required' : 'none' }),
      stopWhen: stepCountIs(2),
      maxOutputTokens: 32,
      maxRetries: 0,
    });
    expect(loop.steps[0]!.toolCalls.map((c) => c.toolName)).toEqual(['get_weather']);
    expect(loop.steps[0]!.toolResults, 'the tool ran on valid input').toHaveLength(1);
    expect(loop.steps).toHaveLength(2);
    expect(loop.steps[1]!.finishReason, 'answered after the tool').not.toBe('error');
  });

  it.each(MODELS)('%s: LangChain’s ChatOpenAI with useResponsesApi: invoke and stream', async (model) => {
    const chat = new ChatOpenAI({
      model,
      apiKey: key.secret,
      useResponsesApi: true,
      maxTokens: 8,
      maxRetries: 0,
      configuration: { baseURL: `${clientUrl}/v1` },
    });
    const reply = await chat.invoke('Tell me about rivers.');
    expect(reply.text.length).toBeGreaterThan(0);
    expect(reply.usage_metadata?.output_tokens).toBeGreaterThan(0);
    let text = '';
    let usage = 0;
    for await (const chunk of await chat.stream('Tell me about stones.')) {
      text += chunk.text;
      usage += chunk.usage_metadata?.output_tokens ?? 0;
    }
    expect(text.length).toBeGreaterThan(0);
    expect(usage, 'the final usage reaches LangChain').toBeGreaterThan(0);
  });
});
