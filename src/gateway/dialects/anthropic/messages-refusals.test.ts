// POST /v1/messages in process, refusing and failing: keys, bad input, no
// ready replica, a replica that refuses or breaks, an engine that refuses
// stream_options, each read by the official `@anthropic-ai/sdk` as its own
// error classes (Anthropic's shape, from whichever part refused). Harness in
// test/support/gateway-messages.ts.
import Anthropic, {
  APIError,
  AuthenticationError,
  BadRequestError,
  InternalServerError,
  NotFoundError,
  PermissionDeniedError,
  RateLimitError,
} from '@anthropic-ai/sdk';
import { afterEach, describe, expect, it } from 'vitest';
import {
  chunk,
  closeAll,
  closedEndpoint,
  harness,
  scripted,
  simReplicas,
  weather,
} from '../../../../test/support/gateway-messages.js';

afterEach(closeAll);

describe('POST /v1/messages refusals and failures', () => {
  it('takes the key as x-api-key or as a bearer token, and refuses none in Anthropic’s shape', async () => {
    const h = await harness(simReplicas);
    const body = JSON.stringify({ model: 'demo', max_tokens: 2, messages: [{ role: 'user', content: 'hi' }] });
    const post = (headers: Record<string, string>) =>
      fetch(`${h.url}/v1/messages`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01', ...headers },
        body,
      });
    expect((await post({ 'x-api-key': h.secret })).status).toBe(200);
    const bearer = new Anthropic({ authToken: h.secret, apiKey: null, baseURL: h.url, maxRetries: 0 });
    expect(
      (await bearer.messages.create({ model: 'demo', max_tokens: 2, messages: [{ role: 'user', content: 'hi' }] }))
        .type,
    ).toBe('message');
    const none = await post({});
    expect(none.status).toBe(401);
    expect(await none.json()).toEqual({
      type: 'error',
      error: { type: 'authentication_error', message: expect.stringMatching(/no API key/) },
    });
    // x-api-key is this endpoint's alone: the OpenAI routes still ask for a bearer token.
    const chat = await fetch(`${h.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': h.secret },
      body,
    });
    expect(chat.status).toBe(401);
    expect(((await chat.json()) as { error: { code: string } }).error.code).toBe('invalid_api_key');
  });

  it('refuses bad input in Anthropic’s shape and status, as the SDK’s own error classes', async () => {
    const h = await harness(simReplicas);
    const refused = async (p: Promise<unknown>) => {
      const err = await p.then(
        () => null,
        (e: unknown) => e,
      );
      expect(err, 'the call was refused').not.toBeNull();
      return err as { status: number; error: { type: string; error: { type: string; message: string } } };
    };
    const noMax = await refused(
      h.client.messages.create({
        model: 'demo',
        messages: [{ role: 'user', content: 'x' }],
      } as unknown as Anthropic.MessageCreateParamsNonStreaming),
    );
    expect(noMax).toBeInstanceOf(BadRequestError);
    expect(noMax.error).toEqual({
      type: 'error',
      error: { type: 'invalid_request_error', message: expect.stringMatching(/max_tokens: is required/) },
    });
    const unknown = await refused(
      h.client.messages.create({ model: 'demoo', max_tokens: 2, messages: [{ role: 'user', content: 'x' }] }),
    );
    expect(unknown).toBeInstanceOf(NotFoundError);
    expect(unknown.error.error).toEqual({
      type: 'not_found_error',
      message: expect.stringMatching(/`demoo` does not exist. Did you mean `demo`/),
    });
    const badKey = await refused(
      new Anthropic({ apiKey: 'sk-nope', baseURL: h.url, maxRetries: 0 }).messages.create({
        model: 'demo',
        max_tokens: 2,
        messages: [{ role: 'user', content: 'x' }],
      }),
    );
    expect(badKey).toBeInstanceOf(AuthenticationError);
    const forbidden = await refused(
      new Anthropic({ apiKey: h.demoOnly, baseURL: h.url, maxRetries: 0 }).messages.create({
        model: 'demo',
        max_tokens: 2,
        messages: [{ role: 'user', content: 'x' }],
      }),
    );
    expect(forbidden).toBeInstanceOf(PermissionDeniedError);
    expect(forbidden.error.error.type).toBe('permission_error');
    const limited = new Anthropic({ apiKey: h.onePerMinute, baseURL: h.url, maxRetries: 0 });
    await limited.messages.create({ model: 'demo', max_tokens: 1, messages: [{ role: 'user', content: 'x' }] });
    const tooMany = await refused(
      limited.messages.create({ model: 'demo', max_tokens: 1, messages: [{ role: 'user', content: 'x' }] }),
    );
    expect(tooMany).toBeInstanceOf(RateLimitError);
    expect(tooMany.error.error).toEqual({
      type: 'rate_limit_error',
      message: expect.stringMatching(/1 requests per minute/),
    });
    expect((tooMany as unknown as { headers: Headers }).headers.get('retry-after')).toMatch(/^\d+$/);
    // The engine's own refusal (a forced tool that is not listed) reaches the client in Anthropic's shape too.
    const engine = await refused(
      h.client.messages.create({
        model: 'demo',
        max_tokens: 2,
        tools: [weather],
        tool_choice: { type: 'tool', name: 'nope' },
        messages: [{ role: 'user', content: 'x' }],
      }),
    );
    expect(engine.status).toBe(400);
    expect(engine.error.error).toEqual({
      type: 'invalid_request_error',
      message: expect.stringMatching(/`nope` is not in tools/),
    });
    // Bad JSON, from the router's checks.
    const badJson = await fetch(`${h.url}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': h.secret },
      body: '{"model":',
    });
    expect(badJson.status).toBe(400);
    expect(((await badJson.json()) as { type: string; error: { type: string } }).error.type).toBe(
      'invalid_request_error',
    );
    // Fastify's own refusals (a body that is not JSON by its type) leave in the same shape.
    const notJson = await fetch(`${h.url}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'text/plain', 'x-api-key': h.secret },
      body: 'hi',
    });
    expect(notJson.status).toBe(415);
    expect(await notJson.json()).toEqual({
      type: 'error',
      error: { type: 'invalid_request_error', message: expect.stringMatching(/Content-Type: application\/json/) },
    });
    // The sim's /tokenize takes chat messages, as vLLM's does: count_tokens agrees with the answer's input_tokens.
    const asked = {
      model: 'demo',
      system: 'Be brief.',
      messages: [{ role: 'user' as const, content: 'Tell me about rivers.' }],
    };
    const count = await h.client.messages.countTokens(asked);
    const answered = await h.client.messages.create({ ...asked, max_tokens: 1 });
    expect(count.input_tokens, 'the same count as the usage of the answer').toBe(answered.usage.input_tokens);
  });

  it('moves to another replica when one refuses the connection, before any byte', async () => {
    const h = await harness(async (m) => [
      { id: 'dead', endpoint: await closedEndpoint(), draining: false },
      ...(await simReplicas(m)).map((r) => ({ ...r, id: 'live' })),
    ]);
    for (let i = 0; i < 3; i++) {
      const msg = await h.client.messages.create({
        model: 'demo',
        max_tokens: 3,
        messages: [{ role: 'user', content: `try ${i}` }],
      });
      expect(msg.usage.output_tokens).toBe(3);
    }
  });

  it('answers 503 with no ready replica as overloaded_error', async () => {
    const h = await harness(async () => []);
    const res = await fetch(`${h.url}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': h.secret },
      body: JSON.stringify({ model: 'demo', max_tokens: 2, messages: [{ role: 'user', content: 'x' }] }),
    });
    expect(res.status).toBe(503);
    expect(await res.json()).toEqual({
      type: 'error',
      error: { type: 'overloaded_error', message: expect.stringMatching(/0 ready replicas/) },
    });
    const count = await fetch(`${h.url}/v1/messages/count_tokens`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': h.secret },
      body: JSON.stringify({ model: 'demo', messages: [{ role: 'user', content: 'x' }] }),
    });
    expect(count.status).toBe(503);
    expect(((await count.json()) as { error: { type: string } }).error.type).toBe('overloaded_error');
  });

  it('moves on from a 503 before the first byte, and never after it: a broken stream ends with an error event', async () => {
    const busy = await scripted((_body, res) => {
      res.writeHead(503, { 'content-type': 'application/json' });
      res.end('{"error":{"message":"busy"}}');
    });
    const breaking = await scripted((_body, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(chunk({ delta: { content: 'one' } }));
      res.write(chunk({ delta: { content: ' two' } }), () => res.socket?.destroy());
    });
    const h = await harness(async (m) => [busy.replica, ...(await simReplicas(m))]);
    const msg = await h.client.messages.create({
      model: 'demo',
      max_tokens: 3,
      messages: [{ role: 'user', content: 'x' }],
    });
    expect(msg.usage.output_tokens).toBe(3);
    expect(busy.seen()).toHaveLength(1);

    const h2 = await harness(async () => [breaking.replica]);
    let text = '';
    const failed = await h2.client.messages
      .stream({ model: 'demo', max_tokens: 30, messages: [{ role: 'user', content: 'x' }] })
      .on('text', (d) => (text += d))
      .finalMessage()
      .then(
        () => null,
        (e: unknown) => e,
      );
    expect(failed, 'the client sees an error').toBeInstanceOf(APIError);
    expect(String((failed as Error).message)).toMatch(/stopped answering mid-response/);
    expect(text, 'what came before the break, once').toBe('one two');
    expect(breaking.seen()).toHaveLength(1);
  });

  it('resends a stream without stream_options to an engine that refuses it, and passes an engine’s 500 on as api_error', async () => {
    const strict = await scripted((body, res) => {
      if ('stream_options' in body) {
        res.writeHead(400, { 'content-type': 'application/json' });
        res.end('{"error":{"message":"unknown field stream_options"}}');
        return;
      }
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end(chunk({ delta: { content: 'ok' } }) + chunk({ delta: {}, finish_reason: 'length' }) + 'data: [DONE]\n\n');
    });
    const h = await harness(async () => [strict.replica]);
    const final = await h.client.messages
      .stream({ model: 'demo', max_tokens: 1, messages: [{ role: 'user', content: 'x' }] })
      .finalMessage();
    expect(final).toMatchObject({ stop_reason: 'max_tokens', content: [{ type: 'text', text: 'ok' }] });
    expect(strict.seen().map((b) => 'stream_options' in b)).toEqual([true, false]);

    const failing = await scripted((_body, res) => {
      res.writeHead(500, { 'content-type': 'application/json' });
      res.end('{"error":{"message":"CUDA out of memory"}}');
    });
    const h2 = await harness(async () => [failing.replica]);
    const err = await h2.client.messages
      .create({ model: 'demo', max_tokens: 1, messages: [{ role: 'user', content: 'x' }] })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InternalServerError);
    expect((err as { error: unknown }).error).toEqual({
      type: 'error',
      error: { type: 'api_error', message: 'CUDA out of memory' },
    });
  });
});
