// POST /v1/messages in process, answering: the official `@anthropic-ai/sdk`
// against the router with real sim engines (or scripted stand-ins) as
// replicas, so the translation is proven where a client reads it: the SDK's
// own parsing of answers, streams, tool calls and token counts. Harness in
// test/support/gateway-messages.ts.
import { afterEach, describe, expect, it } from 'vitest';
import { chunk, closeAll, harness, scripted, simReplicas, weather } from '../../../../test/support/gateway-messages.js';
import { waitFor } from '../../../../test/support/wait.js';

afterEach(closeAll);

describe('POST /v1/messages answers', () => {
  it('answers a message with a system prompt: text, usage, the name asked for, and max_tokens as the stop reason', async () => {
    const h = await harness(simReplicas);
    const msg = await h.client.messages.create({
      model: 'demo-alias',
      max_tokens: 8,
      system: 'Be brief.',
      messages: [{ role: 'user', content: 'Tell me about rivers.' }],
    });
    expect(msg.type).toBe('message');
    expect(msg.role).toBe('assistant');
    expect(msg.id).toMatch(/^msg_/);
    expect(msg.model).toBe('demo-alias');
    expect(msg.stop_reason).toBe('max_tokens');
    expect(msg.content).toHaveLength(1);
    expect(msg.content[0]!.type).toBe('text');
    expect((msg.content[0] as { text: string }).text.length).toBeGreaterThan(0);
    expect(msg.usage.output_tokens).toBe(8);
    expect(msg.usage.input_tokens).toBeGreaterThan(0);
    // The usage record has the engine's counts, under the model's canonical name.
    await waitFor('the usage record', () =>
      h.usage.snapshot().find((u) => u.model === 'demo' && u.completionTokens === 8),
    );
    // The SDK's request id is llmgw's, the one its logs name.
    const withResponse = await h.client.messages
      .create(
        { model: 'demo', max_tokens: 1, messages: [{ role: 'user', content: 'x' }] },
        { headers: { 'x-request-id': 'my-request-7' } },
      )
      .withResponse();
    expect(withResponse.request_id).toBe('my-request-7');
  });

  it('streams the same text as it answers whole, with the usage in the final message', async () => {
    const h = await harness(simReplicas);
    const params = {
      model: 'demo',
      max_tokens: 12,
      messages: [{ role: 'user' as const, content: 'Tell me about rivers.' }],
    };
    const whole = await h.client.messages.create(params);
    const stream = h.client.messages.stream(params);
    const types: string[] = [];
    let text = '';
    stream.on('streamEvent', (e) => types.push(e.type));
    stream.on('text', (delta) => (text += delta));
    const final = await stream.finalMessage();
    expect(text).toBe((whole.content[0] as { text: string }).text);
    expect(final.usage).toEqual(expect.objectContaining({ input_tokens: whole.usage.input_tokens, output_tokens: 12 }));
    expect(final.stop_reason).toBe('max_tokens');
    expect(types[0]).toBe('message_start');
    expect(types.slice(-2)).toEqual(['message_delta', 'message_stop']);
    // The usage chunk the router asked for is not passed on as anything else.
    expect(new Set(types)).toEqual(
      new Set([
        'message_start',
        'content_block_start',
        'content_block_delta',
        'content_block_stop',
        'message_delta',
        'message_stop',
      ]),
    );
    await waitFor('the stream counted', () =>
      h.usage.snapshot().find((u) => u.model === 'demo' && u.completionTokens === 24),
    );
  });

  it('round-trips a tool: a forced tool_use (whole and streamed), then a tool_result answered in text', async () => {
    const h = await harness(simReplicas);
    const ask = { role: 'user' as const, content: 'Weather in Oslo?' };
    const first = await h.client.messages.create({
      model: 'demo',
      max_tokens: 16,
      tools: [weather],
      tool_choice: { type: 'tool', name: 'get_weather' },
      messages: [ask],
    });
    expect(first.stop_reason).toBe('tool_use');
    const use = first.content.find((b) => b.type === 'tool_use')!;
    expect(use).toMatchObject({ type: 'tool_use', name: 'get_weather', input: { seed: expect.any(Number) } });
    const streamed = await h.client.messages
      .stream({ model: 'demo', max_tokens: 16, tools: [weather], tool_choice: { type: 'any' }, messages: [ask] })
      .finalMessage();
    expect(streamed.stop_reason).toBe('tool_use');
    expect(streamed.content).toEqual([
      expect.objectContaining({ type: 'tool_use', name: 'get_weather', input: (use as { input: unknown }).input }),
    ]);
    const answer = await h.client.messages.create({
      model: 'demo',
      max_tokens: 6,
      tools: [weather],
      messages: [
        ask,
        { role: 'assistant', content: first.content },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: (use as { id: string }).id, content: 'sunny' }] },
      ],
    });
    expect(answer.stop_reason).toBe('max_tokens');
    expect(answer.content[0]!.type).toBe('text');
  });

  it('counts tokens with the engine’s tokenizer, from the translated messages', async () => {
    const seen: Array<{ path: string; body: Record<string, unknown> }> = [];
    const tokenizer = await scripted((body, res, path) => {
      seen.push({ path, body });
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ count: 42, max_model_len: 4096, tokens: [] }));
    });
    const h = await harness(async () => [tokenizer.replica]);
    const counted = await h.client.messages.countTokens({
      model: 'demo-alias',
      system: 'Be brief.',
      tools: [weather],
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(counted).toEqual({ input_tokens: 42 });
    expect(seen.map((x) => x.path)).toEqual(['/tokenize']);
    expect(seen[0]!.body).toEqual({
      model: 'demo-alias',
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'hi' },
      ],
      tools: [
        {
          type: 'function',
          function: { name: 'get_weather', description: weather.description, parameters: weather.input_schema },
        },
      ],
      add_generation_prompt: true,
    });
    const withMax = await fetch(`${h.url}/v1/messages/count_tokens`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': h.secret },
      body: JSON.stringify({ model: 'demo', max_tokens: 3, messages: [{ role: 'user', content: 'x' }] }),
    });
    expect(withMax.status).toBe(400);
    expect(((await withMax.json()) as { error: { message: string } }).error.message).toMatch(/counts the prompt only/);
  });

  it('says which stop sequence ended the answer where the engine tells (vLLM’s stop_reason), whole and streamed', async () => {
    const engine = await scripted((body, res) => {
      if (body.stream === true) {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write(chunk({ delta: { role: 'assistant', content: '' } }) + chunk({ delta: { content: 'one two' } }));
        res.end(chunk({ delta: {}, finish_reason: 'stop', stop_reason: 'END' }) + 'data: [DONE]\n\n');
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          id: 'chatcmpl-w',
          choices: [
            { index: 0, message: { role: 'assistant', content: 'one two' }, finish_reason: 'stop', stop_reason: 'END' },
          ],
          usage: { prompt_tokens: 4, completion_tokens: 2 },
        }),
      );
    });
    const h = await harness(async () => [engine.replica]);
    const params = {
      model: 'demo',
      max_tokens: 9,
      stop_sequences: ['END'],
      temperature: 0.2,
      metadata: { user_id: 'u1' },
      messages: [{ role: 'user' as const, content: 'count' }],
    };
    const whole = await h.client.messages.create(params);
    expect(whole).toMatchObject({
      id: 'msg_w',
      stop_reason: 'stop_sequence',
      stop_sequence: 'END',
      usage: { input_tokens: 4, output_tokens: 2 },
    });
    const streamed = await h.client.messages.stream(params).finalMessage();
    expect(streamed).toMatchObject({
      id: 'msg_s',
      stop_reason: 'stop_sequence',
      stop_sequence: 'END',
      content: [{ type: 'text', text: 'one two' }],
    });
    // What the engine heard: a chat request, the stops as `stop`, metadata left out, and the stream asked for its usage.
    const [first, second] = engine.seen();
    expect(first).toEqual({
      model: 'demo',
      messages: [{ role: 'user', content: 'count' }],
      max_tokens: 9,
      stream: false,
      temperature: 0.2,
      stop: ['END'],
    });
    expect(second).toMatchObject({ stream: true, stream_options: { include_usage: true } });
  });
});
