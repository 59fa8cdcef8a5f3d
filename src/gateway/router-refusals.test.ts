// The router end to end on loopback, refusing: which bodies and keys it
// turns away, with the status and error class OpenAI would, and how early.
// A browser's preflight is here too: it is the one request answered without
// a key. Harness in test/support/gateway-router.ts.
import { connect } from 'node:net';
import OpenAI from 'openai';
import { Readable } from 'node:stream';
import { request as undiciRequest } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { issueKey } from '../control/keys/index.js';
import { closeAll, model, harness, sim, replica, eventually, caught } from '../../test/support/gateway-router.js';

afterEach(closeAll);

describe('the router through the openai client', () => {
  it('reads a body as vLLM would (no content type, a byte-order mark) and refuses a compressed or non-JSON one by name', async () => {
    const a = model({ name: 'alpha' });
    const h = await harness([a]);
    const engine = await sim(a);
    h.directory.set('alpha', [replica('r1', engine.url)]);
    const body = JSON.stringify({ model: 'alpha', messages: [{ role: 'user', content: 'x' }], max_tokens: 2 });
    const post = async (headers: Record<string, string>, payload: string | Buffer = body) => {
      const res = await undiciRequest(`${h.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${h.secret}`, ...headers },
        body: payload,
      });
      return { status: res.statusCode, text: await res.body.text() };
    };
    expect((await post({})).status, 'no content type: read as JSON').toBe(200);
    expect(
      (await post({ 'content-type': 'application/json' }, `\ufeff${body}`)).status,
      'a BOM is dropped, for the engine too',
    ).toBe(200);
    const plain = await post({ 'content-type': 'text/plain' });
    expect([plain.status, JSON.parse(plain.text).error.message]).toEqual([
      415,
      'send the body as JSON with Content-Type: application/json, not text/plain',
    ]);
    const gzip = await post(
      { 'content-type': 'application/json', 'content-encoding': 'gzip' },
      Buffer.from([0x1f, 0x8b, 8, 0]),
    );
    expect(gzip.status).toBe(415);
    expect(JSON.parse(gzip.text).error.message).toBe(
      'the body is sent with Content-Encoding: gzip, which llmgw does not decode; send it uncompressed',
    );
  });

  // Guards against any web page driving inference on a keyless loopback gateway: a page can POST a
  // Blob (no content type) or text/plain without a CORS preflight, and both were read as JSON.
  it("refuses a body that is not declared JSON when it asks for no key, in OpenAI's shape", async () => {
    const a = model({ name: 'alpha' });
    const h = await harness([a], { authRequired: false });
    const engine = await sim(a);
    h.directory.set('alpha', [replica('r1', engine.url)]);
    const body = JSON.stringify({ model: 'alpha', messages: [{ role: 'user', content: 'x' }], max_tokens: 2 });
    const post = async (headers: Record<string, string>) => {
      const res = await undiciRequest(`${h.url}/v1/chat/completions`, { method: 'POST', headers, body });
      return {
        status: res.statusCode,
        json: (await res.body.json()) as { error: { message: string; llmgw_code?: string } },
      };
    };
    const untyped = await post({});
    expect(untyped.status, 'no content type: refused without keys').toBe(415);
    expect(untyped.json.error.llmgw_code).toBe('LLMGW_UNSUPPORTED_MEDIA_TYPE');
    expect(untyped.json.error.message).toMatch(/Content-Type: application\/json/);
    expect((await post({ 'content-type': 'text/plain' })).status).toBe(415);
    expect((await post({ 'content-type': 'application/json' })).status, 'declared JSON still works').toBe(200);
  });

  it("answers a browser app's preflight for an allowed origin, and its relayed answers carry the CORS headers", async () => {
    const a = model({ name: 'alpha' });
    const h = await harness([a], { corsOrigins: ['https://chat.example.com'] });
    const engine = await sim(a);
    h.directory.set('alpha', [replica('r1', engine.url)]);
    const preflight = await undiciRequest(`${h.url}/v1/chat/completions`, {
      method: 'OPTIONS',
      headers: {
        origin: 'https://chat.example.com',
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'authorization,content-type,x-stainless-os',
      },
    });
    await preflight.body.text();
    expect(preflight.statusCode).toBe(204);
    expect(preflight.headers['access-control-allow-origin']).toBe('https://chat.example.com');
    expect(String(preflight.headers['access-control-allow-headers'])).toContain('authorization');
    const answer = await undiciRequest(`${h.url}/v1/chat/completions`, {
      method: 'POST',
      headers: {
        origin: 'https://chat.example.com',
        authorization: `Bearer ${h.secret}`,
        'content-type': 'application/json',
      },
      body: JSON.stringify({ model: 'alpha', messages: [{ role: 'user', content: 'x' }], max_tokens: 2 }),
    });
    await answer.body.text();
    expect(answer.statusCode).toBe(200);
    expect(answer.headers['access-control-allow-origin'], 'on the relayed answer too').toBe('https://chat.example.com');
    expect(String(answer.headers['access-control-expose-headers'])).toContain('x-request-id');
    const other = await undiciRequest(`${h.url}/v1/models`, {
      headers: { origin: 'https://evil.example', authorization: `Bearer ${h.secret}` },
    });
    await other.body.text();
    expect(other.headers['access-control-allow-origin'], 'another origin is not allowed').toBeUndefined();
  });

  it('asks for no key on a listener configured without keys (loopback only)', async () => {
    const a = model({ name: 'alpha' });
    const h = await harness([a], { authRequired: false });
    const engine = await sim(a);
    h.directory.set('alpha', [replica('r1', engine.url)]);
    const chat = await h
      .clientWith('anything')
      .chat.completions.create({ model: 'alpha', messages: [{ role: 'user', content: 'hi' }] });
    expect(chat.choices).toHaveLength(1);
    await eventually(() => h.usage.snapshot()[0]?.keyId === 'anonymous', 'usage under the anonymous key');
  });

  it('answers each refusal with the status and error class OpenAI would', async () => {
    const a = model({ name: 'alpha' });
    const b = model({ name: 'beta' });
    const cold = model({ name: 'gamma' });
    const h = await harness([a, b, cold], { bodyLimitBytes: 64 * 1024 });
    const engine = await sim(a);
    h.directory.set('alpha', [replica('r1', engine.url)]);
    const betaEngine = await sim(b);
    h.directory.set('beta', [replica('r2', betaEngine.url)]);
    const msg = [{ role: 'user' as const, content: 'hi' }];

    const bad = await caught(h.clientWith('llmgw-nope').chat.completions.create({ model: 'alpha', messages: msg }));
    expect(bad).toBeInstanceOf(OpenAI.AuthenticationError);
    expect([bad.code, (bad.error as { llmgw_code?: string }).llmgw_code], "OpenAI's code, llmgw's beside it").toEqual([
      'invalid_api_key',
      'LLMGW_UNAUTHORIZED',
    ]);

    const { secret: onlyBeta } = await issueKey(
      h.keys,
      { name: 'beta-only', allowedModels: ['beta'] },
      Date.now(),
      'test',
    );
    const denied = await caught(h.clientWith(onlyBeta).chat.completions.create({ model: 'alpha', messages: msg }));
    expect(denied).toBeInstanceOf(OpenAI.PermissionDeniedError);
    const ok = await h.clientWith(onlyBeta).chat.completions.create({ model: 'beta', messages: msg });
    expect(ok.choices).toHaveLength(1);
    const visible = await h.clientWith(onlyBeta).models.list();
    expect(
      visible.data.map((m) => m.id),
      'a limited key sees only its models',
    ).toEqual(['beta']);

    const unknown = await caught(h.client.chat.completions.create({ model: 'alpah', messages: msg }));
    expect(unknown).toBeInstanceOf(OpenAI.NotFoundError);
    expect(unknown.message).toContain('Did you mean `alpha`?');
    expect(unknown.code).toBe('model_not_found');

    const big = await caught(
      h.client.chat.completions.create({
        model: 'alpha',
        messages: [{ role: 'user', content: 'x'.repeat(100 * 1024) }],
      }),
    );
    expect(big.status).toBe(413);

    const noReplica = await caught(h.client.chat.completions.create({ model: 'gamma', messages: msg }));
    expect(noReplica.status).toBe(503);
    expect(noReplica.message).toContain('model `gamma` has 0 ready replicas: none is wanted');
    await eventually(
      () => h.usage.snapshot().some((u) => u.model === 'gamma' && u.errors === 1),
      'the refusal to be counted as an error of its key and model',
    );

    const redirect = await caught(
      h.client.chat.completions.create({
        model: 'alpha',
        messages: msg,
        api_base: 'http://evil.example',
      } as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming),
    );
    expect(redirect).toBeInstanceOf(OpenAI.BadRequestError);
    expect(redirect.message).toContain('api_base');
    const urlField = await caught(
      h.client.chat.completions.create({ model: 'alpha', messages: msg, user: 'https://evil.example/v1' }),
    );
    expect(urlField).toBeInstanceOf(OpenAI.BadRequestError);
    const badN = await caught(h.client.chat.completions.create({ model: 'alpha', messages: msg, n: 99 }));
    expect(badN).toBeInstanceOf(OpenAI.BadRequestError);
    expect(badN.message).toContain('n: 99 is more than this server allows (16)');
    const badShape = await caught(
      h.client.chat.completions.create({
        model: 'alpha',
        messages: 'hi',
      } as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming),
    );
    expect(badShape.message, 'zod names the field').toContain('messages');
    expect(engine.stats().requestsSeen, 'no refused request reached an engine').toBe(0);
    expect(betaEngine.stats().requestsSeen).toBe(1);
  });

  it('refuses a body over the limit when it is sent chunked, without a length', async () => {
    const a = model({ name: 'alpha' });
    const h = await harness([a], { bodyLimitBytes: 4096 });
    const chunks = Readable.from(
      (async function* () {
        yield Buffer.from('{"model":"alpha","messages":[{"role":"user","content":"');
        for (let i = 0; i < 10; i++) yield Buffer.from('y'.repeat(1024));
        yield Buffer.from('"}]}');
      })(),
    );
    const res = await undiciRequest(`${h.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${h.secret}` },
      body: chunks,
    });
    expect(res.statusCode).toBe(413);
    const body = (await res.body.json()) as { error: { code: string; type: string } };
    expect(body.error.code).toBe('LLMGW_BODY_TOO_LARGE');
  });

  it('refuses revoked and expired keys, and rate-limits with Retry-After', async () => {
    const a = model({ name: 'alpha' });
    const h = await harness([a]);
    const engine = await sim(a);
    h.directory.set('alpha', [replica('r1', engine.url)]);
    const msg = [{ role: 'user' as const, content: 'hi' }];

    const revoked = await issueKey(h.keys, { name: 'gone' }, Date.now(), 'test');
    await h.clientWith(revoked.secret).chat.completions.create({ model: 'alpha', messages: msg });
    h.keys.revoke(revoked.record.id, Date.now());
    const r = await caught(h.clientWith(revoked.secret).chat.completions.create({ model: 'alpha', messages: msg }));
    expect(r).toBeInstanceOf(OpenAI.AuthenticationError);
    expect(r.message).toContain('revoked');

    const expired = await issueKey(h.keys, { name: 'old', expiresAtMs: Date.now() - 1 }, Date.now() - 60_000, 'test');
    const e = await caught(h.clientWith(expired.secret).chat.completions.create({ model: 'alpha', messages: msg }));
    expect(e).toBeInstanceOf(OpenAI.AuthenticationError);
    expect(e.message).toContain('expired');

    const limited = await issueKey(h.keys, { name: 'slow', requestsPerMinute: 2 }, Date.now(), 'test');
    const c = h.clientWith(limited.secret);
    const first = await c.chat.completions.create({ model: 'alpha', messages: msg }).withResponse();
    expect(
      ['x-ratelimit-limit-requests', 'x-ratelimit-remaining-requests'].map((n) => first.response.headers.get(n)),
      "OpenAI's rate-limit headers",
    ).toEqual(['2', '1']);
    expect(first.response.headers.get('x-ratelimit-limit-tokens'), 'no token limit, no token headers').toBeNull();
    await c.chat.completions.create({ model: 'alpha', messages: msg });
    const limit = await caught(c.chat.completions.create({ model: 'alpha', messages: msg }));
    expect(limit).toBeInstanceOf(OpenAI.RateLimitError);
    expect(limit.code).toBe('rate_limit_exceeded');
    expect(limit.headers?.get('x-ratelimit-remaining-requests')).toBe('0');
    expect(Number(limit.headers?.get('retry-after')), 'Retry-After in whole seconds').toBeGreaterThanOrEqual(1);
  });
});

describe('a request without a valid key', () => {
  // The key was checked once the whole body was in: a connection trickling a large body without any key stayed
  // busy, out of reach of the listener's connection cap, and a few thousand such connections shut clients out.
  it('is refused with 401 as soon as its headers are in, before any of its body arrives', async () => {
    const h = await harness([model({ name: 'alpha' })], { timeouts: { idleBodyTimeoutMs: 60_000 } });
    const port = Number(new URL(h.url).port);
    for (const auth of ['', 'authorization: Bearer not-a-key\r\n']) {
      const socket = connect(port, '127.0.0.1');
      let answer = '';
      socket.on('data', (d: Buffer) => (answer += d.toString()));
      socket.on('error', () => undefined);
      socket.write(
        `POST /v1/audio/transcriptions HTTP/1.1\r\nhost: x\r\ncontent-type: multipart/form-data; boundary=b\r\n${auth}content-length: 8000000\r\n\r\n`,
      );
      await eventually(
        () => answer.startsWith('HTTP/1.1 401'),
        `a 401 with the body still unsent (${auth ? 'a wrong key' : 'no key'}); so far: ${JSON.stringify(answer.slice(0, 80))}`,
        5_000,
      );
      socket.destroy();
    }
  });
});
