// The ledger settles each request's reservation exactly once and records its
// usage exactly once, on every way a request can end. Guards against the
// failure it replaced: settlement written at three exits of the router, where
// one exit that forgot it leaked a key's reserved tokens until the minute
// rolled over (the key refused for no reason), and one that did it twice
// gave the key tokens it never had back.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { Model } from '../../control/catalog/index.js';
import { issueKey } from '../../control/keys/index.js';
import { RateLimiter, type RouterDeps, type RouterReplica } from '../index.js';
import type { LimitDecision, RequestLimiter, UsageEvent, UsageSink } from '../ports/index.js';
import { waitFor } from '../../../test/support/wait.js';
import { cleanups, closeAll, closedEndpoint, listen, model, sim } from '../../../test/support/gateway-router.js';

afterEach(closeAll);

/** A real limiter, with every admission and settlement counted. */
class CountingLimiter implements RequestLimiter {
  private readonly inner = new RateLimiter(() => Date.now());
  readonly admitted: LimitDecision[] = [];
  readonly settled: { reservedTokens: number; usedTokens: number }[] = [];
  admit(keyId: string, rpm: number | null, tpm: number | null, reserve?: number): LimitDecision {
    const d = this.inner.admit(keyId, rpm, tpm, reserve);
    this.admitted.push(d);
    return d;
  }
  settle(keyId: string, tpm: number | null, reservedTokens: number, usedTokens: number): void {
    this.settled.push({ reservedTokens, usedTokens });
    this.inner.settle(keyId, tpm, reservedTokens, usedTokens);
  }
}

class CountingUsage implements UsageSink {
  readonly records: UsageEvent[] = [];
  record(event: UsageEvent): void {
    this.records.push(event);
  }
}

/** An engine that answers every request with `status` and an OpenAI error body. */
async function statusServer(status: number): Promise<string> {
  const server: Server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: `status ${status} on purpose` } }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

async function harness(models: Model[], ready: Record<string, RouterReplica[]>, overrides: Partial<RouterDeps> = {}) {
  const limiter = new CountingLimiter();
  const usage = new CountingUsage();
  const { url, keys } = await listen(models, { usage, limiter, ...overrides }, ready);
  // A token limit, so that every admitted request reserves tokens the ledger must give back.
  const { secret } = await issueKey(keys, { name: 't', tokensPerMinute: 100_000 }, Date.now(), 'test');
  const post = (path: string, body: unknown, signal?: AbortSignal) =>
    fetch(url + path, {
      method: 'POST',
      headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
      signal,
    });
  return { limiter, usage, post };
}

const chat = (modelName: string, extra: Record<string, unknown> = {}) => ({
  model: modelName,
  messages: [{ role: 'user', content: 'hello there' }],
  max_tokens: 50,
  ...extra,
});

/**
 * Once the request's settlement came, and the event loop had turns to make
 * a second one: exactly one settle, giving back what admission reserved,
 * and `records` usage records.
 */
async function expectSettledOnce(h: Awaited<ReturnType<typeof harness>>, what: string, records = 1): Promise<void> {
  await waitFor(`${what}: settled`, () => h.limiter.settled.length >= 1 && h.usage.records.length >= records, {
    timeoutMs: 5_000,
    intervalMs: 5,
  });
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setTimeout(resolve, 10));
  expect(h.limiter.admitted, `${what}: one admission`).toHaveLength(1);
  expect(h.limiter.settled, `${what}: one settlement`).toHaveLength(1);
  expect(h.limiter.settled[0]!.reservedTokens, `${what}: gives back what was reserved`).toBe(
    h.limiter.admitted[0]!.reservedTokens,
  );
  expect(h.limiter.admitted[0]!.reservedTokens, `${what}: reserved something to give back`).toBeGreaterThan(0);
  expect(h.usage.records, `${what}: usage records`).toHaveLength(records);
}

describe('the ledger settles each request once', () => {
  it('on success', async () => {
    const a = model({ name: 'alpha' });
    const engine = await sim(a);
    const h = await harness([a], { alpha: [{ id: 'r1', endpoint: engine.url, draining: false }] });
    const res = await h.post('/v1/chat/completions', chat('alpha'));
    expect(res.status).toBe(200);
    await res.text();
    await expectSettledOnce(h, 'a whole answer');
    expect(h.limiter.settled[0]!.usedTokens, 'charged what the engine said it used').toBeGreaterThan(0);
    expect(h.usage.records[0]).toMatchObject({ model: 'alpha', status: 200 });
  });

  it('when the client leaves mid-stream', async () => {
    const a = model({ name: 'alpha' });
    const engine = await sim(a, { tokensPerSecond: 50 });
    const h = await harness([a], { alpha: [{ id: 'r1', endpoint: engine.url, draining: false }] });
    const controller = new AbortController();
    const res = await h.post(
      '/v1/chat/completions',
      chat('alpha', { stream: true, max_tokens: 5_000 }),
      controller.signal,
    );
    const reader = res.body!.getReader();
    await reader.read();
    controller.abort();
    await reader.read().catch(() => undefined);
    await expectSettledOnce(h, 'a client that left');
    expect(h.usage.records[0]!.status, 'recorded as the client gone').toBe(0);
  });

  it("when the engine answers an error, which is the client's answer", async () => {
    const a = model({ name: 'alpha' });
    const h = await harness([a], { alpha: [{ id: 'r1', endpoint: await statusServer(500), draining: false }] });
    const res = await h.post('/v1/chat/completions', chat('alpha'));
    expect(res.status).toBe(500);
    await res.text();
    await expectSettledOnce(h, "an engine's error");
    expect(h.limiter.settled[0]!.usedTokens).toBe(0);
  });

  it('when every attempt fails before an answer (502), after retrying', async () => {
    const a = model({ name: 'alpha' });
    const h = await harness([a], {
      alpha: [
        { id: 'r1', endpoint: await closedEndpoint(), draining: false },
        { id: 'r2', endpoint: await statusServer(503), draining: false },
      ],
    });
    const res = await h.post('/v1/chat/completions', chat('alpha'));
    expect(res.status).toBe(502);
    await res.text();
    await expectSettledOnce(h, 'two failed attempts');
    expect(h.usage.records[0]).toMatchObject({ status: 502, promptTokens: 0, completionTokens: 0 });
  });

  it('when a retry answers', async () => {
    const a = model({ name: 'alpha' });
    const engine = await sim(a);
    const h = await harness([a], {
      alpha: [
        { id: 'r0', endpoint: await closedEndpoint(), draining: false },
        { id: 'r1', endpoint: engine.url, draining: false },
      ],
    });
    const res = await h.post('/v1/chat/completions', chat('alpha', { stream: true }));
    expect(res.status).toBe(200);
    await res.text();
    await expectSettledOnce(h, 'a retried request');
    expect(h.usage.records[0]).toMatchObject({ status: 200 });
  });

  it('when a fallback answers', async () => {
    const a = model({ name: 'alpha', fallbacks: ['beta'] });
    const b = model({ name: 'beta' });
    const engine = await sim(b);
    const h = await harness([a, b], {
      alpha: [{ id: 'a1', endpoint: await closedEndpoint(), draining: false }],
      beta: [{ id: 'b1', endpoint: engine.url, draining: false }],
    });
    const res = await h.post('/v1/chat/completions', chat('alpha'));
    expect(res.status).toBe(200);
    await res.text();
    await expectSettledOnce(h, 'a fallback');
    expect(h.usage.records[0], 'recorded under the model that answered').toMatchObject({ model: 'beta' });
  });

  it('when the request times out', async () => {
    const a = model({ name: 'alpha' });
    const hung = await sim(a, { hang: true });
    const h = await harness(
      [a],
      { alpha: [{ id: 'r1', endpoint: hung.url, draining: false }] },
      {
        timeouts: { totalTimeoutMs: 200 },
      },
    );
    const res = await h.post('/v1/chat/completions', chat('alpha'));
    expect(res.status).toBe(504);
    await res.text();
    await expectSettledOnce(h, 'a timeout');
    expect(h.usage.records[0]).toMatchObject({ status: 504, completionTokens: 0 });
  });

  it('for count_tokens, at once, with nothing used and no usage record', async () => {
    const a = model({ name: 'alpha' });
    const engine = await sim(a);
    const h = await harness([a], { alpha: [{ id: 'r1', endpoint: engine.url, draining: false }] });
    const res = await h.post('/v1/messages/count_tokens', {
      model: 'alpha',
      messages: [{ role: 'user', content: 'hello there' }],
    });
    expect(res.status).toBe(200);
    await res.text();
    await waitFor('count_tokens: settled', () => h.limiter.settled.length >= 1, { timeoutMs: 5_000, intervalMs: 5 });
    for (let i = 0; i < 5; i++) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(h.limiter.settled, 'one settlement').toEqual([{ reservedTokens: 0, usedTokens: 0 }]);
    expect(h.usage.records, 'a count is no usage').toHaveLength(0);
  });
});
