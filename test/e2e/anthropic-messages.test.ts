// Anthropic's Messages API as a user meets it: the official
// `@anthropic-ai/sdk` against a real `llmgw control` process whose replicas
// are sim engines started by a simulated agent. The in-process tests
// (src/gateway/messages.test.ts, src/gateway/anthropic/) cover each rule; this
// file proves the endpoint holds with keys from the store, replicas from the
// reconciler and usage through the store's accounting.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { UsageView } from '../../src/api/index.js';
import { startOneNodeFleet, type OneNodeFleet } from '../support/one-node.js';
import { waitFor } from '../support/wait.js';

let fleet: OneNodeFleet;
let clientUrl = '';
let key = { id: '', secret: '' };

const api = <T>(method: string, path: string, body?: unknown) => fleet.api<T>(method, path, body);

function anthropic(apiKey: string): Anthropic {
  // No retries: every status the router sends must reach the test as it was sent.
  return new Anthropic({ apiKey, baseURL: clientUrl, maxRetries: 0 });
}

beforeAll(async () => {
  fleet = await startOneNodeFleet({
    name: 'messages',
    portRange: '26700-26799',
    keys: ['messages'],
    models: (dir) => {
      const weights = join(dir, 'weights');
      mkdirSync(weights);
      return [
        {
          name: 'demo',
          aliases: ['claude-demo'],
          source: `file://${weights}`,
          scaling: { min: 1 },
          profiles: [{ engine: 'sim' }],
        },
      ];
    },
  });
  clientUrl = fleet.clientUrl;
  key = fleet.keys.messages!;
}, 120_000);

afterAll(() => fleet?.stop());

const weather = {
  name: 'get_weather',
  description: 'the weather in a city',
  input_schema: { type: 'object' as const, properties: { city: { type: 'string' } } },
};

describe('POST /v1/messages through @anthropic-ai/sdk, against a real control plane', () => {
  it('answers messages.create with a system prompt, and messages.stream with the same text and its usage', async () => {
    const client = anthropic(key.secret);
    const params = {
      model: 'claude-demo',
      max_tokens: 10,
      system: 'You are terse.',
      messages: [{ role: 'user' as const, content: 'Tell me about rivers.' }],
    };
    const msg = await client.messages.create(params);
    expect(msg.model).toBe('claude-demo');
    expect(msg.stop_reason).toBe('max_tokens');
    expect(msg.usage.output_tokens).toBe(10);
    const text = (msg.content[0] as Anthropic.TextBlock).text;
    expect(text.length).toBeGreaterThan(0);

    let streamed = '';
    let startTokens: number | null = null;
    const stream = client.messages
      .stream(params)
      .on('text', (delta) => (streamed += delta))
      .on('streamEvent', (e) => {
        if (e.type === 'message_start') startTokens = e.message.usage.input_tokens;
      });
    const final = await stream.finalMessage();
    expect(streamed).toBe(text);
    expect(final.usage.output_tokens).toBe(10);
    expect(final.usage.input_tokens).toBe(msg.usage.input_tokens);
    // The SDK's model list reads llmgw's (Anthropic's shape, for the anthropic-version header it sends).
    const ids: string[] = [];
    for await (const m of client.models.list()) ids.push(m.id);
    expect(ids).toContain('claude-demo');
    expect((await client.models.retrieve('claude-demo')).type).toBe('model');
    // message_start has the prompt's count too (the replica's tokenizer asked), not 0: clients record it from there.
    expect(startTokens).toBe(msg.usage.input_tokens);

    // Both are in the key's usage, with the engine's counts, under the model's name.
    await waitFor(
      'usage of both calls',
      async () => {
        const { body } = await api<UsageView[]>('GET', '/api/v1/usage');
        const row = body.find((u) => u.key_id === key.id && u.model === 'demo');
        return row && row.completion_tokens >= 20 ? row : undefined;
      },
      20_000,
    );
  });

  it('round-trips a tool: tool_use, then tool_result answered in text', async () => {
    const client = anthropic(key.secret);
    const ask = { role: 'user' as const, content: 'What is the weather in Oslo?' };
    const first = await client.messages.create({
      model: 'demo',
      max_tokens: 32,
      tools: [weather],
      tool_choice: { type: 'tool', name: 'get_weather' },
      messages: [ask],
    });
    expect(first.stop_reason).toBe('tool_use');
    const use = first.content.find((b): b is Anthropic.ToolUseBlock => b.type === 'tool_use')!;
    expect(use.name).toBe('get_weather');
    expect(typeof use.input).toBe('object');
    const answer = await client.messages.create({
      model: 'demo',
      max_tokens: 5,
      tools: [weather],
      messages: [
        ask,
        { role: 'assistant', content: first.content },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: '21 °C, sunny' }] },
      ],
    });
    expect(answer.content[0]!.type).toBe('text');
    expect(answer.usage.output_tokens).toBe(5);
  });

  it('refuses bad input in Anthropic’s error shape and status', async () => {
    const post = (headers: Record<string, string>, body: unknown) =>
      fetch(`${clientUrl}/v1/messages`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01', ...headers },
        body: JSON.stringify(body),
      });
    const noMax = await post(
      { 'x-api-key': key.secret },
      { model: 'demo', messages: [{ role: 'user', content: 'x' }] },
    );
    expect(noMax.status).toBe(400);
    expect(await noMax.json()).toEqual({
      type: 'error',
      error: { type: 'invalid_request_error', message: expect.stringContaining('max_tokens') },
    });

    const unknown = await anthropic(key.secret)
      .messages.create({ model: 'dmeo', max_tokens: 2, messages: [{ role: 'user', content: 'x' }] })
      .catch((e: unknown) => e);
    expect(unknown).toBeInstanceOf(Anthropic.NotFoundError);
    expect((unknown as InstanceType<typeof Anthropic.NotFoundError>).error).toEqual({
      type: 'error',
      error: { type: 'not_found_error', message: expect.stringContaining('Did you mean `demo`?') },
    });

    const noKey = await post({}, { model: 'demo', max_tokens: 2, messages: [{ role: 'user', content: 'x' }] });
    expect(noKey.status).toBe(401);
    expect(((await noKey.json()) as { error: { type: string } }).error.type).toBe('authentication_error');
    await expect(
      anthropic('sk-not-a-key').messages.create({
        model: 'demo',
        max_tokens: 2,
        messages: [{ role: 'user', content: 'x' }],
      }),
    ).rejects.toBeInstanceOf(Anthropic.AuthenticationError);
  });
});
