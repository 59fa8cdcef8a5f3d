// What an API key holds to through the router: the models it may use (its
// fallbacks included), its token limit under concurrency, and how many of its
// requests may wait for a cold model. Real sim engines as replicas behind a
// stub directory, the router on a loopback listener, plain fetch as client.
import { request as undiciRequest } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { issueKey } from '../control/keys/index.js';
import type { Model } from '../control/catalog/index.js';
import { waitFor } from '../../test/support/wait.js';
import { closeAll, listen, model, sim } from '../../test/support/gateway-router.js';
import type { RouterDeps } from './index.js';

afterEach(closeAll);

/** The shared listener, and chat as plain fetch with the key `secret` (the tests issue their own). */
async function harness(models: Model[], overrides: Partial<RouterDeps> = {}) {
  const h = await listen(models, { coldPollMs: 10, ...overrides });
  const chat = (secret: string, body: Record<string, unknown>, signal?: AbortSignal) =>
    fetch(`${h.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
      body: JSON.stringify({ messages: [{ role: 'user', content: 'hi' }], ...body }),
      ...(signal ? { signal } : {}),
    });
  return { ...h, chat };
}

describe('fallbacks a key may not use', () => {
  // A key limited to public-model was served by secret-model through public-model's fallback.
  it('skips them, says so in x-llmgw-fallback-skipped, and answers as if there were none', async () => {
    const pub = model({
      name: 'public-model',
      fallbacks: ['secret-model'],
      fallback_while_cold: true,
      scaling: { min: 0, max: 1 },
    });
    const secret = model({ name: 'secret-model' });
    const h = await harness([pub, secret]);
    const secretSim = await sim(secret);
    h.directory.replicas.set('secret-model', [{ id: 's1', endpoint: secretSim.url, draining: false }]);
    const limited = await issueKey(h.keys, { name: 'public', allowedModels: ['public-model'] }, Date.now(), 'test');
    const res = await h.chat(limited.secret, { model: 'public-model' });
    expect(res.status, 'no replica of public-model, and the only fallback is forbidden: 503 as without fallbacks').toBe(
      503,
    );
    expect(res.headers.get('x-llmgw-fallback-skipped')).toBe('secret-model');
    expect(secretSim.stats().requestsSeen, 'secret-model never saw the request').toBe(0);

    const everything = await issueKey(h.keys, { name: 'all' }, Date.now(), 'test');
    const allowed = await h.chat(everything.secret, { model: 'public-model' });
    expect(allowed.status, 'a key that may use secret-model is still served by it').toBe(200);
    expect(allowed.headers.get('x-llmgw-fallback-skipped')).toBeNull();
  });
});

describe('token limits under concurrency', () => {
  // Every concurrent request was admitted while the balance was above zero, so a burst spent many minutes of tokens.
  it('admits only the requests whose max_tokens fit the balance, and refuses the rest with 429 at once', async () => {
    const a = model({ name: 'alpha' });
    const h = await harness([a]);
    // Slow enough that every request of the burst is admitted before the first settles.
    const engine = await sim(a, { tokensPerSecond: 5 });
    h.directory.replicas.set('alpha', [{ id: 'r1', endpoint: engine.url, draining: false }]);
    // Each reserves 10 + the prompt's least size (0 for "hi"): 3 fit in 35.
    const key = await issueKey(h.keys, { name: 'tpm', tokensPerMinute: 35 }, Date.now(), 'test');
    const answers = await Promise.all(
      [0, 1, 2, 3, 4, 5].map(() => h.chat(key.secret, { model: 'alpha', max_tokens: 10 })),
    );
    const statuses = answers.map((r) => r.status).sort();
    expect(statuses, 'three fit, three are refused').toEqual([200, 200, 200, 429, 429, 429]);
    const refused = answers.find((r) => r.status === 429)!;
    const body = (await refused.json()) as { error: { code: string; type: string } };
    expect(body.error).toMatchObject({ code: 'rate_limit_exceeded', type: 'rate_limit_error' });
    expect(refused.headers.get('x-ratelimit-limit-tokens')).toBe('35');
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(engine.stats().requestsSeen, 'the refused never reached the engine').toBe(3);
  });
});

describe("a request bigger than its key's token limit", () => {
  // One request reserved at most the key's per-minute figure, so a key with 50 tokens a minute got 3,001 in one
  // request (max_tokens 3000): a burst 60 times its limit, paid back only by an hour locked out.
  it("is refused with 429 naming both numbers, no Retry-After, before the engine; max_tokens absent counts as the model's cap", async () => {
    const a = model({ name: 'alpha' });
    const capped = model({ name: 'capped', limits: { max_tokens: 200 } });
    const h = await harness([a, capped]);
    const engine = await sim(a);
    const cappedEngine = await sim(capped);
    h.directory.replicas.set('alpha', [{ id: 'r1', endpoint: engine.url, draining: false }]);
    h.directory.replicas.set('capped', [{ id: 'r2', endpoint: cappedEngine.url, draining: false }]);
    const key = await issueKey(h.keys, { name: 'tpm', tokensPerMinute: 50 }, Date.now(), 'test');
    const big = await h.chat(key.secret, { model: 'alpha', max_tokens: 3000 });
    expect(big.status).toBe(429);
    expect(big.headers.get('retry-after'), 'no wait would admit it: no Retry-After').toBeNull();
    expect(big.headers.get('x-should-retry'), "the SDKs' automatic retries are stopped").toBe('false');
    const body = (await big.json()) as { error: { code: string; llmgw_code: string; message: string; type: string } };
    expect(body.error).toMatchObject({
      type: 'rate_limit_error',
      code: 'rate_limit_exceeded',
      llmgw_code: 'LLMGW_REQUEST_OVER_TOKEN_LIMIT',
    });
    expect(body.error.message).toMatch(/\b3000\b/);
    expect(body.error.message).toMatch(/\b50 tokens per minute\b/);
    expect(body.error.message, 'says what to send instead').toContain('send max_tokens of at most 50');
    const absent = await h.chat(key.secret, { model: 'capped' });
    expect(absent.status, "no max_tokens reserves the model's cap, 200").toBe(429);
    expect(((await absent.json()) as { error: { message: string } }).error.message).toContain(
      'cap of 200 (limits.max_tokens)',
    );
    const noCap = await h.chat(key.secret, { model: 'alpha' });
    expect(noCap.status, 'no max_tokens and no cap reserves the default, 1024').toBe(429);
    expect(((await noCap.json()) as { error: { message: string } }).error.message).toContain('counts as 1024');
    const twice = await h.chat(key.secret, { model: 'alpha', max_tokens: 30, n: 2 });
    expect(twice.status, '30 per choice, two choices: 60 > 50').toBe(429);
    expect(
      engine.stats().requestsSeen + cappedEngine.stats().requestsSeen,
      'no refused request reached an engine',
    ).toBe(0);
    const fits = await h.chat(key.secret, { model: 'alpha', max_tokens: 50 });
    expect(
      fits.status,
      'a request that fits the whole limit is served; the refusals took nothing from the balance',
    ).toBe(200);
    await fits.text();
  });
});

describe('a key revoked while its requests run', () => {
  // Revoking a key stopped only new requests: a stream already running went on to its end (26 s in the report).
  it('ends its streams with an error event naming the revocation, and answers a held request 401', async () => {
    const a = model({ name: 'alpha' });
    const cold = model({ name: 'cold', scaling: { min: 0, max: 1 } });
    const h = await harness([a, cold], { timeouts: { coldStartTimeoutMs: 60_000 } });
    h.directory.starting.add('cold');
    const engine = await sim(a, { tokensPerSecond: 20 });
    h.directory.replicas.set('alpha', [{ id: 'r1', endpoint: engine.url, draining: false }]);
    const key = await issueKey(h.keys, { name: 'soon-revoked' }, Date.now(), 'test');
    const other = await issueKey(h.keys, { name: 'stays' }, Date.now(), 'test');
    const streamOf = async (secret: string, maxTokens: number) => {
      const res = await undiciRequest(`${h.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          model: 'alpha',
          messages: [{ role: 'user', content: 'hi' }],
          max_tokens: maxTokens,
          stream: true,
        }),
      });
      expect(res.statusCode).toBe(200);
      const chunks = res.body[Symbol.asyncIterator]();
      const first = await chunks.next();
      expect(first.done, 'the stream began').toBe(false);
      // In an object: an async function returning a promise would wait for it.
      const rest = (async () => {
        let text = Buffer.from(first.value as Buffer).toString('utf8');
        for (;;) {
          const { done, value } = await chunks.next();
          if (done) return text;
          text += Buffer.from(value as Buffer).toString('utf8');
        }
      })();
      return { rest };
    };
    // 2000 tokens at 20 a second: the stream would run 100 s; the other key's, 2 s, outlasts the revocation.
    const revokedStream = await streamOf(key.secret, 2000);
    const otherStream = await streamOf(other.secret, 40);
    const held = h.chat(key.secret, { model: 'cold' });
    await waitFor('the cold request held', async () => (h.router.queued().get('cold') === 1 ? true : undefined), 5_000);
    h.keys.revoke(key.record.id, Date.now());
    const rest = await revokedStream.rest;
    const last = rest.trimEnd().split('\n\n').at(-1)!;
    expect(last, 'the stream ends with an error event naming the revocation').toMatch(
      /^data: \{"error":\{"message":"the API key llmgw-\S+ was revoked/,
    );
    expect(JSON.parse(last.slice(6)).error).toMatchObject({ type: 'authentication_error', code: 'invalid_api_key' });
    const refused = await held;
    expect(refused.status, 'the held request is answered 401').toBe(401);
    expect(((await refused.json()) as { error: { message: string } }).error.message).toContain('was revoked');
    await waitFor(
      "the engine's work stopped",
      async () => (engine.stats().requestsAborted >= 1 ? true : undefined),
      5_000,
    );
    // Another key's stream runs on to its end: only the revoked key's were cut.
    const tail = await otherStream.rest;
    expect(tail).toContain('data: [DONE]');
    expect(tail).not.toContain('revoked');
  }, 30_000);
});

describe('requests held for a cold model', () => {
  // One key could hold any number of requests open while a model started.
  it('holds at most max_held_per_key per key, and refuses the next with 429 naming the limit', async () => {
    const a = model({ name: 'alpha', scaling: { min: 0, max: 1 } });
    const h = await harness([a], { maxHeldPerKey: 2, timeouts: { coldStartTimeoutMs: 30_000 } });
    h.directory.starting.add('alpha');
    const key = await issueKey(h.keys, { name: 'waits' }, Date.now(), 'test');
    const other = await issueKey(h.keys, { name: 'other' }, Date.now(), 'test');
    const abort = new AbortController();
    const held = [
      h.chat(key.secret, { model: 'alpha' }, abort.signal),
      h.chat(key.secret, { model: 'alpha' }, abort.signal),
    ].map((p) => p.catch(() => null));
    await waitFor('two held', async () => (h.router.queued().get('alpha') === 2 ? true : undefined), 5_000);
    const third = await h.chat(key.secret, { model: 'alpha' });
    expect(third.status).toBe(429);
    const body = (await third.json()) as { error: { message: string } };
    expect(body.error.message).toContain('max_held_per_key');
    const another = h.chat(other.secret, { model: 'alpha' }, abort.signal).catch(() => null);
    await waitFor(
      'another key still holds',
      async () => (h.router.queued().get('alpha') === 3 ? true : undefined),
      5_000,
    );
    abort.abort();
    await Promise.all([...held, another]);
    await waitFor(
      'the holds to end with their clients',
      async () => (h.router.queued().size === 0 ? true : undefined),
      5_000,
    );
  });
});
