// The wiring for remotes that speak another API: the interceptor that sends
// the internal chat call as the remote's request (path, body, key header),
// and the handler that hands the dialect's relay a chat answer however the
// remote's arrives (split across reads, whole, an error). A relay stand-in
// records what it is given; no socket is needed.
import { describe, expect, it } from 'vitest';
import type { Dispatcher } from 'undici';
import { attachSecret, upstreamRelay, type Attempt } from '../core/dispatch.js';
import type { Outcome } from '../core/relay.js';
import type { RouterReplica } from '../ports/index.js';
import { chatErrorBody, foreignApis, remoteKeyHeaders } from './foreign.js';
import { SSE_EVENT_LIMIT_BYTES } from '../core/sse-events.js';

const replica = (api?: 'responses' | 'anthropic'): RouterReplica =>
  ({
    id: 'remote:r',
    endpoint: 'http://127.0.0.1:1',
    draining: false,
    engine: 'remote',
    engineSecret: 'sk-canary',
    remote: { kind: 'endpoint', timeoutMs: 0, ...(api ? { api } : {}) },
  }) as RouterReplica;

function attempt(r: RouterReplica, chat: object, path = '/v1/chat/completions'): Attempt {
  return {
    ex: {} as Attempt['ex'],
    model: {} as Attempt['model'],
    replica: r,
    path,
    passThrough: false,
    body: Buffer.from(JSON.stringify(chat)),
    headers: { 'content-type': 'application/json' },
  };
}

/** Runs the interceptor; returns the attempt as the send would see it, or the outcome it settled itself. */
async function through(a: Attempt): Promise<{ sent: Attempt | null; outcome: Outcome }> {
  let sent: Attempt | null = null;
  const outcome = await foreignApis(() => 1_000_000)(async (x) => {
    sent = x;
    return { kind: 'done', status: 200 };
  })(a);
  return { sent, outcome };
}

/** A relay stand-in: what it was given, in order. */
function recorder() {
  const calls: { status?: number; headers?: Record<string, unknown>; data: string; ended: boolean } = {
    data: '',
    ended: false,
  };
  const handler: Dispatcher.DispatchHandler = {
    onResponseStart: (_c, status, headers) => Object.assign(calls, { status, headers }),
    onResponseData: (_c, chunk) => void (calls.data += chunk.toString('utf8')),
    onResponseEnd: () => void (calls.ended = true),
  };
  return { calls, handler };
}

const controller = { abort() {}, pause() {}, resume() {} } as unknown as Dispatcher.DispatchController;

describe('an attempt at a remote speaking another API', () => {
  it('leaves a chat remote as it is: bearer key, chat path, chat body', async () => {
    const a = attempt(replica(), { model: 'm', messages: [] });
    const { sent } = await through(a);
    attachSecret(sent!);
    expect(sent!.upstream).toBeUndefined();
    expect(sent!.headers.authorization).toBe('Bearer sk-canary');
  });

  it('sends an Anthropic remote /v1/messages with x-api-key and anthropic-version, and no bearer token', async () => {
    const { sent } = await through(
      attempt(replica('anthropic'), { model: 'c', messages: [{ role: 'user', content: 'hi' }] }),
    );
    attachSecret(sent!);
    expect(sent!.upstream?.path).toBe('/v1/messages');
    expect(sent!.headers).toMatchObject({ 'x-api-key': 'sk-canary', 'anthropic-version': '2023-06-01' });
    expect(sent!.headers.authorization).toBeUndefined();
    expect(JSON.parse(sent!.body.toString())).toMatchObject({ model: 'c', max_tokens: 4096 });
    // The attempt's own path stays the internal call's: the shadow copy reads it.
    expect(sent!.path).toBe('/v1/chat/completions');
  });

  it('sends a Responses remote /v1/responses with a bearer key', async () => {
    const { sent } = await through(
      attempt(replica('responses'), { model: 'g', messages: [{ role: 'user', content: 'hi' }] }),
    );
    attachSecret(sent!);
    expect(sent!.upstream?.path).toBe('/v1/responses');
    expect(sent!.headers.authorization).toBe('Bearer sk-canary');
    expect(JSON.parse(sent!.body.toString())).toMatchObject({ model: 'g', store: false });
  });

  it.each([undefined, 'responses', 'anthropic'] as const)(
    'sends a %s remote its key and version as remoteKeyHeaders says (what the probe sends too)',
    async (api) => {
      // Guards against (#34) the Anthropic key header and version decided twice, in the attempt and the probe,
      // so that one could change without the other and a healthy remote fail its probe, or the reverse.
      const { sent } = await through(attempt(replica(api), { model: 'm', messages: [{ role: 'user', content: 'x' }] }));
      attachSecret(sent!);
      const { 'content-type': _type, ...headers } = sent!.headers;
      expect(headers).toEqual(remoteKeyHeaders(api ?? 'chat', 'sk-canary'));
    },
  );

  it.each([
    ['a request the API cannot express', attempt(replica('anthropic'), { model: 'c', messages: [], n: 2 }), /n: /],
    ['an endpoint other than chat', attempt(replica('responses'), { input: 'x' }, '/v1/embeddings'), /chat only/],
  ])('turns away %s before sending it, as a failed attempt that names why', async (_why, a, reason) => {
    const { sent, outcome } = await through(a);
    expect(sent).toBeNull();
    expect(outcome.kind).toBe('retry');
    expect((outcome as { reason: string }).reason).toMatch(reason);
  });
});

describe("a foreign remote's answer, handed to the dialect's relay as chat", () => {
  async function wrapped(api: 'responses' | 'anthropic', chat: object) {
    const { sent } = await through(
      attempt(replica(api), { model: 'm', messages: [{ role: 'user', content: 'x' }], ...chat }),
    );
    const rec = recorder();
    return { rec, h: upstreamRelay(sent!, rec.handler) };
  }

  it('translates a stream event by event, however its reads are split', async () => {
    const { rec, h } = await wrapped('anthropic', { stream: true, stream_options: { include_usage: true } });
    const sse =
      'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","model":"c","usage":{"input_tokens":4,"output_tokens":1}}}\n\n' +
      'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hé"}}\n\n' +
      'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":2}}\n\n' +
      'event: message_stop\ndata: {"type":"message_stop"}\n\n';
    const bytes = Buffer.from(sse);
    h.onResponseStart!(controller, 200, { 'content-type': 'text/event-stream' }, 'OK');
    // Cut inside the é: no half character, no half event reaches the relay.
    const cut = bytes.indexOf(Buffer.from('é')) + 1;
    h.onResponseData!(controller, bytes.subarray(0, cut));
    h.onResponseData!(controller, bytes.subarray(cut));
    h.onResponseEnd!(controller, {});
    expect(rec.calls.status).toBe(200);
    expect(rec.calls.headers).toEqual({ 'content-type': 'text/event-stream' });
    expect(rec.calls.data).toContain('"content":"Hé"');
    expect(rec.calls.data).toContain('"finish_reason":"stop"');
    expect(rec.calls.data).toContain('"usage":{"prompt_tokens":4,"completion_tokens":2,"total_tokens":6}');
    expect(rec.calls.data.endsWith('data: [DONE]\n\n')).toBe(true);
    expect(rec.calls.ended).toBe(true);
  });

  it('cuts off a stream that never ends an event once it passes the limit', async () => {
    // Guards against (#34) a remote that never sends a blank line growing the gateway's memory without limit.
    const { rec, h } = await wrapped('anthropic', { stream: true });
    let aborted: Error | null = null;
    const c = {
      abort: (e: Error) => void (aborted = e),
      pause() {},
      resume() {},
    } as unknown as Dispatcher.DispatchController;
    h.onResponseStart!(c, 200, { 'content-type': 'text/event-stream' }, 'OK');
    h.onResponseData!(
      c,
      Buffer.from('event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","model":"c"}}\n\n'),
    );
    const mib = Buffer.alloc(2 ** 20, 'x');
    for (let i = 0; i < SSE_EVENT_LIMIT_BYTES / mib.length; i++) h.onResponseData!(c, mib);
    expect(aborted, 'an event of exactly the limit is still held').toBeNull();
    h.onResponseData!(c, Buffer.from('x'));
    expect((aborted as Error | null)?.message).toMatch(/16 MiB without ending an event/);
    expect(rec.calls.data, 'what came before the long event was translated').toContain('"role":"assistant"');
  });

  it('translates a whole answer at its end, with the length of the translation', async () => {
    const { rec, h } = await wrapped('responses', {});
    const body = JSON.stringify({
      id: 'resp_9',
      status: 'completed',
      model: 'g',
      output: [{ type: 'message', content: [{ type: 'output_text', text: 'hi' }] }],
      usage: { input_tokens: 1, output_tokens: 1 },
    });
    h.onResponseStart!(controller, 200, { 'content-type': 'application/json', 'content-length': '999' }, 'OK');
    h.onResponseData!(controller, Buffer.from(body.slice(0, 10)));
    h.onResponseData!(controller, Buffer.from(body.slice(10)));
    h.onResponseEnd!(controller, {});
    const chat = JSON.parse(rec.calls.data) as { choices: [{ message: { content: string } }] };
    expect(chat.choices[0].message.content).toBe('hi');
    expect(rec.calls.headers?.['content-length']).toBe(String(Buffer.byteLength(rec.calls.data)));
  });

  it("passes an error's status and Retry-After on, its body in OpenAI's shape", async () => {
    const { rec, h } = await wrapped('anthropic', {});
    h.onResponseStart!(controller, 400, { 'content-type': 'application/json', 'retry-after': '3' }, '');
    h.onResponseData!(
      controller,
      Buffer.from('{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: too big"}}'),
    );
    h.onResponseEnd!(controller, {});
    expect(rec.calls.status).toBe(400);
    expect(rec.calls.headers?.['retry-after']).toBe('3');
    expect(JSON.parse(rec.calls.data)).toEqual({
      error: { message: 'max_tokens: too big', type: 'invalid_request_error', param: null, code: null },
    });
  });

  it('answers 502 for a success whose body its API does not have', async () => {
    const { rec, h } = await wrapped('responses', {});
    h.onResponseStart!(controller, 200, { 'content-type': 'application/json' }, '');
    h.onResponseData!(controller, Buffer.from('<html>'));
    h.onResponseEnd!(controller, {});
    expect(rec.calls.status).toBe(502);
  });
});

describe('a remote error body in chat terms', () => {
  it.each([
    ['{"error":{"message":"m","type":"t"}}', 400, { message: 'm', type: 't' }],
    ['{"detail":"d"}', 422, { message: 'd', type: 'invalid_request_error' }],
    ['oops', 500, { message: 'the remote answered 500', type: 'api_error' }],
  ])('%s (%i)', (text, status, expected) => {
    expect(JSON.parse(chatErrorBody(text, status)).error).toMatchObject(expected);
  });
});
