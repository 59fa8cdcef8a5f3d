// Regression test: a whole /v1/messages answer parsed the engine's tool
// arguments and wrote them back with JSON.stringify, so a number JavaScript
// reads as Infinity (`1e400`) went to the client as null, breaking the
// schema the arguments were written to, and a long integer lost its digits.
// The input now goes out as the engine wrote it, as a stream's
// input_json_delta always did. Harness in test/support/gateway-messages.ts.
import { afterEach, describe, expect, it } from 'vitest';
import { chunk, closeAll, harness, scripted, weather } from '../../../../test/support/gateway-messages.js';

afterEach(closeAll);

const ARGUMENTS = '{"city": "Oslo", "big": 1e400, "tiny": -9e-8050, "id": 12345678901234567890}';

async function engineCalling(args: string) {
  return scripted((body, res) => {
    const call = { index: 0, id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: args } };
    if (body.stream === true) {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(chunk({ delta: { role: 'assistant', content: null, tool_calls: [call] } }));
      res.end(chunk({ delta: {}, finish_reason: 'tool_calls' }) + 'data: [DONE]\n\n');
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        id: 'chatcmpl-t',
        choices: [
          { index: 0, message: { role: 'assistant', content: null, tool_calls: [call] }, finish_reason: 'tool_calls' },
        ],
        usage: { prompt_tokens: 5, completion_tokens: 9 },
      }),
    );
  });
}

const params = {
  model: 'demo',
  max_tokens: 50,
  tools: [weather],
  tool_choice: { type: 'tool' as const, name: 'get_weather' },
  messages: [{ role: 'user' as const, content: 'Weather in Oslo?' }],
};

describe('POST /v1/messages tool input', () => {
  it('passes the engine’s arguments text through, never rewriting a number to null', async () => {
    const engine = await engineCalling(ARGUMENTS);
    const h = await harness(async () => [engine.replica]);
    const res = await fetch(`${h.url}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': h.secret },
      body: JSON.stringify(params),
    });
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text).toContain(`"input":${ARGUMENTS}`);
    expect(text).not.toContain('null,"tiny"');
    // The rest of the message is as JSON.stringify writes it.
    const message = JSON.parse(text) as { content: { input: Record<string, unknown> }[] };
    expect(message).toMatchObject({
      id: 'msg_t',
      type: 'message',
      role: 'assistant',
      model: 'demo',
      content: [{ type: 'tool_use', id: 'call_1', name: 'get_weather' }],
      stop_reason: 'tool_use',
      stop_sequence: null,
      usage: { input_tokens: 5, output_tokens: 9 },
    });
    // The client's parser reads the engine's numbers itself: Infinity, not a null that fails a number schema.
    expect(message.content[0]!.input.big).toBe(Infinity);
    const whole = await h.client.messages.create(params);
    expect(whole.content[0]).toMatchObject({ type: 'tool_use', input: { city: 'Oslo', big: Infinity } });
    // A stream hands on the same text, so the two agree.
    const streamed = await h.client.messages.stream(params).finalMessage();
    expect(streamed.content[0]).toMatchObject({
      type: 'tool_use',
      input: (whole.content[0] as { input: unknown }).input,
    });
  });

  it('still writes arguments that are not a JSON object under `arguments`', async () => {
    const engine = await engineCalling('[1, 2]');
    const h = await harness(async () => [engine.replica]);
    const whole = await h.client.messages.create(params);
    expect(whole.content[0]).toMatchObject({ type: 'tool_use', input: { arguments: '[1, 2]' } });
  });
});
