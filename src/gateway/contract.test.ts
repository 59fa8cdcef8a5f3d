// The dialect contract: every API dialect the gateway speaks (the rows of
// contract-cases.ts) gets the same checks, through HTTP on a loopback
// listener with registerRouter and nothing else of the gateway's inside:
// each refusal (401 403 404 413 429 502 503 504) in the dialect's own error
// shape, a stream broken midway ending with the dialect's error event, usage
// recorded and the key's limiter settled once per request, and the
// x-llmgw-fallback-skipped header. A new dialect adds a row to DIALECTS in
// contract-cases.ts; nothing here changes. A check a row cannot pass yet is
// named in the row's knownGaps and runs as `it.fails`, so meeting it turns
// the suite red until the gap is struck off.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { issueKey } from '../control/keys/index.js';
import { startSimEngine, type SimEngine } from '../engine/sim/index.js';
import { waitFor } from '../../test/support/wait.js';
import {
  RateLimiter,
  type LimitDecision,
  type RequestLimiter,
  type RouterDeps,
  type RouterReplica,
  type UsageEvent,
} from './index.js';
import { DIALECTS, type DialectCase, type ErrorStatus } from '../../test/support/gateway-contract-cases.js';
import {
  cleanups,
  closeAll,
  closedEndpoint,
  listen,
  model,
  replica as plainReplica,
} from '../../test/support/gateway-router.js';

/** alpha serves; beta is another model (for a key limited to it); cold has no replica and none will come; guarded falls back to secret. */
const MODELS = [
  model({ name: 'alpha' }),
  model({ name: 'beta' }),
  model({ name: 'cold' }),
  model({ name: 'guarded', fallbacks: ['secret'] }),
  model({ name: 'secret' }),
];
const SERVED = ['alpha', 'beta', 'guarded', 'secret'];

// One sim answers for every served model: it keeps no state a check depends on.
let sim: SimEngine;
beforeAll(async () => {
  sim = await startSimEngine({ models: SERVED, shutdownGraceMs: 0 });
});
afterAll(() => sim.close({ graceMs: 0 }));

afterEach(closeAll);

/** The process's own limiter, with every settlement written down. */
class RecordingLimiter implements RequestLimiter {
  readonly settles: { keyId: string; reserved: number; used: number }[] = [];
  private readonly inner = new RateLimiter(() => Date.now());
  admit(keyId: string, rpm: number | null, tpm: number | null, reserve?: number): LimitDecision {
    return this.inner.admit(keyId, rpm, tpm, reserve);
  }
  settle(keyId: string, tpm: number | null, reserved: number, used: number): void {
    this.settles.push({ keyId, reserved, used });
    this.inner.settle(keyId, tpm, reserved, used);
  }
}

interface Answer {
  readonly status: number;
  readonly headers: Headers;
  readonly text: string;
}

async function harness(row: DialectCase, overrides: Partial<RouterDeps> = {}) {
  const replica = (id: string, endpoint: string): RouterReplica => ({
    ...plainReplica(id, endpoint),
    ...(row.engine ? { engine: row.engine } : {}),
  });
  const events: UsageEvent[] = [];
  const limiter = new RecordingLimiter();
  const { url, keys, directory } = await listen(
    MODELS,
    { usage: { record: (e) => events.push(e) }, limiter, ...overrides },
    Object.fromEntries(SERVED.map((name) => [name, [replica(`${name}-sim`, sim.url)]])),
  );
  const secrets = new Map<string, string>();
  for (const [name, limits] of [
    ['all', {}],
    ['beta-only', { allowedModels: ['beta'] }],
    ['guarded-only', { allowedModels: ['guarded'] }],
    ['one-per-minute', { requestsPerMinute: 1 }],
    ['metered', { tokensPerMinute: 100_000 }],
  ] as const) {
    const { record, secret } = await issueKey(keys, { name, ...limits }, Date.now(), 'test');
    secrets.set(name, secret);
    secrets.set(`${name}:id`, record.id);
  }
  const post = async (body: Record<string, unknown>, key: string | null = 'all'): Promise<Answer> => {
    const res = await fetch(`${url}${row.path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...row.auth(key === null ? null : (secrets.get(key) ?? key)) },
      body: JSON.stringify(body),
    });
    return { status: res.status, headers: res.headers, text: await res.text() };
  };
  return {
    post,
    events,
    settles: limiter.settles,
    keyId: (name: string) => secrets.get(`${name}:id`)!,
    /** Replaces alpha's replicas with these endpoints. */
    alphaAt: (...endpoints: string[]) =>
      directory.set(
        'alpha',
        endpoints.map((e, i) => replica(`alpha-${i}`, e)),
      ),
  };
}

/** A stand-in engine on loopback that answers as `answer` says; counts the requests it got. */
async function standIn(answer: (req: IncomingMessage, res: ServerResponse) => void) {
  let seen = 0;
  const server = createServer((req, res) => {
    seen++;
    answer(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  return { endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen: () => seen };
}

function eventually(check: () => boolean, what: string): Promise<true> {
  return waitFor(what, check, { timeoutMs: 10_000, intervalMs: 10 });
}

describe.each(DIALECTS)('the $name dialect', (row) => {
  /** The answer is the refusal `status`, in the row's error shape, of the type its clients read, saying something. */
  function expectRefusal(answer: Answer, status: ErrorStatus): void {
    expect(answer.status, answer.text).toBe(status);
    expect(row.readError(answer.status, answer.headers, answer.text)).toEqual({
      status,
      type: row.errorTypes[status],
      message: expect.stringMatching(/\S/),
    });
  }

  it('refuses a request with no key, or a key it does not know, with 401', async () => {
    const h = await harness(row);
    expectRefusal(await h.post(row.whole('alpha', 2), null), 401);
    expectRefusal(await h.post(row.whole('alpha', 2), 'llmgw-not-a-key-at-all'), 401);
  });

  it('refuses a key limited to other models with 403', async () => {
    const h = await harness(row);
    expectRefusal(await h.post(row.whole('alpha', 2), 'beta-only'), 403);
    expect((await h.post(row.whole('beta', 2), 'beta-only')).status, 'the model it may use answers').toBe(200);
  });

  it('refuses an unknown model with 404', async () => {
    const h = await harness(row);
    expectRefusal(await h.post(row.whole('no-such-model', 2)), 404);
  });

  it('refuses a body over the limit with 413', async () => {
    const h = await harness(row, { bodyLimitBytes: 2048 });
    expect((await h.post(row.whole('alpha', 2))).status, 'a body under the limit is served').toBe(200);
    expectRefusal(await h.post({ ...row.whole('alpha', 2), padding: 'x'.repeat(4096) }), 413);
  });

  it('refuses a key over its request limit with 429 and Retry-After', async () => {
    const h = await harness(row);
    expect((await h.post(row.whole('alpha', 2), 'one-per-minute')).status).toBe(200);
    const over = await h.post(row.whole('alpha', 2), 'one-per-minute');
    expectRefusal(over, 429);
    expect(Number(over.headers.get('retry-after')), 'seconds to wait').toBeGreaterThanOrEqual(1);
  });

  it('answers 502 when every replica fails before the first byte', async () => {
    const h = await harness(row);
    const busy = await standIn((req, res) => {
      req.resume();
      res.writeHead(503, { 'content-type': 'application/json' });
      res.end('{"error":{"message":"busy"}}');
    });
    h.alphaAt(await closedEndpoint(), busy.endpoint);
    expectRefusal(await h.post(row.whole('alpha', 2)), 502);
    expect(busy.seen(), 'the replica that answers was tried too').toBeGreaterThanOrEqual(1);
  });

  it('answers 503 with Retry-After when the model has no ready replica and none will come', async () => {
    const h = await harness(row);
    const answer = await h.post(row.whole('cold', 2));
    expectRefusal(answer, 503);
    expect(Number(answer.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
  });

  it('answers 504 when the request outlives the total timeout', async () => {
    const h = await harness(row, { timeouts: { totalTimeoutMs: 300 } });
    // Takes the request and never answers.
    const silent = await standIn((req) => req.resume());
    h.alphaAt(silent.endpoint);
    const answer = await h.post(row.whole('alpha', 2));
    expectRefusal(answer, 504);
    expect(row.readError(answer.status, answer.headers, answer.text).message, 'the timeout, named').toMatch(
      /took longer than 300 ms/,
    );
  });

  (row.knownGaps?.brokenStream ? it.fails : it)(
    `ends a stream broken midway with the dialect's error event${row.knownGaps?.brokenStream ? ` (known gap: ${row.knownGaps.brokenStream})` : ''}`,
    async () => {
      const h = await harness(row);
      const breaking = await standIn((req, res) => {
        req.resume();
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        const pieces = row.brokenUpstream();
        pieces.forEach((p, i) => res.write(p, i === pieces.length - 1 ? () => res.socket?.destroy() : undefined));
      });
      h.alphaAt(breaking.endpoint);
      // The body's end arriving at all (text() resolves) is the stream ending rather than hanging or being cut.
      const answer = await h.post(row.stream('alpha', 30));
      expect(answer.status).toBe(200);
      expect(row.readStream(answer.text), answer.text).toEqual({
        text: 'one two',
        error: expect.stringMatching(/stopped answering mid-response/),
      });
    },
  );

  it('records usage with the engine’s counts and settles the limiter once, whole and streamed', async () => {
    const h = await harness(row);
    const keyId = h.keyId('metered');
    const mine = () => h.events.filter((e) => e.keyId === keyId);
    const settled = () => h.settles.filter((s) => s.keyId === keyId);

    const whole = await h.post(row.whole('alpha', 5), 'metered');
    expect(whole.status, whole.text).toBe(200);
    const counts = row.usage(JSON.parse(whole.text));
    expect(counts.completionTokens, 'the sim generates max tokens').toBe(5);
    expect(counts.promptTokens).toBeGreaterThan(0);
    const expected = {
      keyId,
      model: 'alpha',
      endpoint: row.endpoint,
      promptTokens: counts.promptTokens,
      completionTokens: 5,
      status: 200,
      // The replica that answered, whose GPU-hours price the tokens of a model without a token price.
      replicaId: expect.any(String),
    };
    await eventually(() => mine().length === 1, 'the whole answer’s usage record');
    expect(mine()).toEqual([expected]);
    expect(settled()).toEqual([
      { keyId, reserved: expect.any(Number), used: counts.promptTokens + counts.completionTokens },
    ]);

    const streamed = await h.post(row.stream('alpha', 5), 'metered');
    expect(streamed.status, streamed.text).toBe(200);
    await eventually(() => mine().length === 2, 'the stream’s usage record');
    expect(mine()[1], 'the same prompt and length, streamed').toEqual(expected);
    expect(settled(), 'one settlement per request, none twice').toHaveLength(2);
    expect(settled()[1]!.used).toBe(counts.promptTokens + counts.completionTokens);
  });

  it('says which fallbacks the key may not use in x-llmgw-fallback-skipped', async () => {
    const h = await harness(row);
    const limited = await h.post(row.whole('guarded', 2), 'guarded-only');
    expect(limited.status, limited.text).toBe(200);
    expect(limited.headers.get('x-llmgw-fallback-skipped')).toBe('secret');
    const everything = await h.post(row.whole('guarded', 2), 'all');
    expect(everything.status).toBe(200);
    expect(everything.headers.get('x-llmgw-fallback-skipped'), 'a key that may use it skips none').toBeNull();
  });
});
