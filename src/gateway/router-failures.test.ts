// The router end to end on loopback, when replicas fail: retries before the
// first byte and never after, fallbacks in order, cold models held or
// refused, aborts passed upstream and the total timeout. The engine stand-ins
// that fail on purpose (a fixed status, a stream cut midway) live at the end
// of this file, the only one that uses them. Harness in
// test/support/gateway-router.ts.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import OpenAI from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import { RequestLog, requestRecordView } from './core/request-log.js';
import {
  closeAll,
  cleanups,
  model,
  harness,
  sim,
  replica,
  closedEndpoint,
  eventually,
  caught,
} from '../../test/support/gateway-router.js';

afterEach(closeAll);

describe('retries, fallbacks and failures', () => {
  it('retries on another replica when the first refuses the connection', async () => {
    const a = model({ name: 'alpha' });
    const h = await harness([a]);
    const engine = await sim(a);
    // random() = 0 makes power of two choices pick the first listed on a tie: the dead one.
    h.directory.set('alpha', [replica('dead', await closedEndpoint()), replica('live', engine.url)]);
    const chat = await h.client.chat.completions.create({
      model: 'alpha',
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(chat.choices).toHaveLength(1);
    expect(engine.stats().requestsSeen).toBe(1);
    expect(await h.registry.getSingleMetricAsString('llmgw_router_retries_total')).toContain(
      'llmgw_router_retries_total{model="alpha"} 1',
    );
  });

  it("records each request in the request log: the refused attempt and why, the fallback that answered, a broken stream's cause", async () => {
    const a = model({ name: 'alpha', fallbacks: ['beta'] });
    const b = model({ name: 'beta' });
    const log = new RequestLog(10);
    const h = await harness([a, b], { requestLog: log });
    const betaSim = await sim(b);
    h.directory.set('alpha', [{ ...replica('a-dead', await closedEndpoint()), nodes: ['n1'] }]);
    h.directory.set('beta', [{ ...replica('b1', betaSim.url), nodes: ['n2'] }]);
    const { response } = await h.client.chat.completions
      .create({ model: 'alpha', messages: [{ role: 'user', content: 'hi' }] })
      .withResponse();
    const id = response.headers.get('x-request-id')!;
    await eventually(() => log.get(id)?.promptTokens !== undefined, 'the tokens are recorded after the answer');
    const view = requestRecordView(log.get(id)!);
    expect(view).toMatchObject({
      model: 'alpha',
      status: 200,
      outcome: 'ok',
      replica: 'b1',
      nodes: ['n2'],
      fallback: 'beta',
    });
    expect(view.attempts.map((t) => [t.replica, t.outcome])).toEqual([
      ['a-dead', 'failed'],
      ['b1', 'answered'],
    ]);
    expect(view.attempts[0]!.reason, 'the refused connection, in words').toMatch(/refused/i);

    const breaking = await brokenStreamServer();
    h.directory.set('beta', [replica('breaks', breaking.url)]);
    const stream = await h.client.chat.completions.create({
      model: 'beta',
      messages: [{ role: 'user', content: 'hi' }],
      stream: true,
    });
    await expect(async () => {
      for await (const chunk of stream) void chunk;
    }).rejects.toThrow();
    await eventually(() => log.list({ model: 'beta' }).length === 1, 'the broken stream is recorded');
    expect(requestRecordView(log.list({ model: 'beta' })[0]!)).toMatchObject({ outcome: 'broken', replica: 'breaks' });
  });

  it('never retries after the first byte: a stream that breaks ends with one error and no repeated tokens', async () => {
    const a = model({ name: 'alpha' });
    const h = await harness([a]);
    const healthy = await sim(a);
    const breaking = await brokenStreamServer();
    h.directory.set('alpha', [replica('breaks', breaking.url), replica('healthy', healthy.url)]);
    const stream = await h.client.chat.completions.create({
      model: 'alpha',
      messages: [{ role: 'user', content: 'hi' }],
      stream: true,
    });
    const tokens: string[] = [];
    let error: unknown = null;
    try {
      for await (const chunk of stream) tokens.push(chunk.choices[0]?.delta.content ?? '');
    } catch (err) {
      error = err;
    }
    expect(error, 'the client sees an error').toBeInstanceOf(OpenAI.APIError);
    expect(tokens, 'the two tokens sent, once each').toEqual(['one', 'two']);
    expect(healthy.stats().requestsSeen, 'nothing was sent to another replica').toBe(0);
  });

  it('tries the fallbacks in order, skipping one with nothing ready', async () => {
    const a = model({ name: 'alpha', fallbacks: ['beta', 'gamma', 'delta'] });
    const b = model({ name: 'beta' });
    const g = model({ name: 'gamma' });
    const d = model({ name: 'delta' });
    const h = await harness([a, b, g, d]);
    const gammaSim = await sim(g);
    const deltaSim = await sim(d);
    h.directory.set('alpha', [replica('a-dead', await closedEndpoint())]);
    h.directory.set('gamma', [replica('g1', gammaSim.url)]);
    h.directory.set('delta', [replica('d1', deltaSim.url)]);
    const chat = await h.client.chat.completions.create({
      model: 'alpha',
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(chat.model, 'gamma is the first fallback with a ready replica; the body was rewritten to its name').toBe(
      'gamma',
    );
    expect(deltaSim.stats().requestsSeen).toBe(0);
    expect(await h.registry.getSingleMetricAsString('llmgw_router_fallbacks_total')).toContain('fallback="gamma"');
  });

  it('aborts the upstream request as soon as the client goes away', async () => {
    const a = model({ name: 'alpha' });
    const h = await harness([a]);
    const engine = await sim(a, { tokensPerSecond: 50 });
    h.directory.set('alpha', [replica('r1', engine.url)]);
    const controller = new AbortController();
    const stream = await h.client.chat.completions.create(
      { model: 'alpha', messages: [{ role: 'user', content: 'hi' }], stream: true, max_tokens: 10_000 },
      { signal: controller.signal },
    );
    let seen = 0;
    try {
      for await (const _ of stream) {
        if (++seen === 8) controller.abort();
      }
    } catch {
      // The client's own abort.
    }
    await eventually(() => engine.stats().requestsAborted === 1, 'the sim to see the abort');
    await eventually(() => h.router.replicaUse().get('r1')?.inFlight === 0, 'the replica to carry nothing');
    // Its usage never came: counted at no less than what was relayed, so leaving a stream early does not make it free.
    await eventually(() => h.usage.snapshot().length === 1, 'the usage record');
    const [left] = h.usage.snapshot();
    expect(
      left!.completionTokens,
      'at least the tokens relayed, less the role, finish and [DONE] events',
    ).toBeGreaterThanOrEqual(5);
    expect(left!.promptTokens).toBeGreaterThanOrEqual(0);
  });

  it('holds a request for a cold model until a replica is ready', async () => {
    const a = model({ name: 'alpha', scaling: { min: 0, max: 1 } });
    const h = await harness([a], { timeouts: { coldStartTimeoutMs: 10_000 } });
    h.directory.starting.add('alpha');
    const pending = h.client.chat.completions.create({ model: 'alpha', messages: [{ role: 'user', content: 'hi' }] });
    await eventually(() => h.directory.demands.includes('alpha'), 'the router to report demand');
    await eventually(() => h.router.queued().get('alpha') === 1, 'the held request to count as queued for the scaler');
    const engine = await sim(a);
    h.directory.set('alpha', [replica('r1', engine.url)]);
    const chat = await pending;
    expect(chat.choices).toHaveLength(1);
    expect(h.router.queued().size, 'nothing queued once it was served').toBe(0);
  });

  it('answers 503 naming the cause when a cold model does not start in time', async () => {
    const a = model({ name: 'alpha', scaling: { min: 0, max: 1 } });
    const h = await harness([a], { timeouts: { coldStartTimeoutMs: 200 } });
    h.directory.starting.add('alpha');
    const err = await caught(
      h.client.chat.completions.create({ model: 'alpha', messages: [{ role: 'user', content: 'hi' }] }),
    );
    expect(err.status).toBe(503);
    expect(err.message).toContain('has 0 ready replicas after waiting 0 s for one to start: 1 fetching weights, 43%');
  });

  it('serves the first fallback at once while cold when the model says fallback_while_cold', async () => {
    const a = model({ name: 'alpha', fallbacks: ['beta'], fallback_while_cold: true, scaling: { min: 0, max: 1 } });
    const b = model({ name: 'beta' });
    const h = await harness([a, b], { timeouts: { coldStartTimeoutMs: 60_000 } });
    h.directory.starting.add('alpha');
    const betaSim = await sim(b);
    h.directory.set('beta', [replica('b1', betaSim.url)]);
    const chat = await h.client.chat.completions.create({
      model: 'alpha',
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(chat.model).toBe('beta');
    expect(h.directory.demands, 'the cold model is still asked for').toContain('alpha');
  });

  it('retries a 502 or 503 from an engine, passes other errors through, and skips draining replicas', async () => {
    const a = model({ name: 'alpha' });
    const h = await harness([a]);
    const healthy = await sim(a);
    const unavailable = await statusServer(503);
    const limited = await statusServer(429);
    h.directory.set('alpha', [replica('busy', unavailable.url), replica('ok', healthy.url)]);
    const msg = [{ role: 'user' as const, content: 'hi' }];
    await h.client.chat.completions.create({ model: 'alpha', messages: msg });
    expect(unavailable.seen(), 'the 503 replica was tried first').toBe(1);
    expect(healthy.stats().requestsSeen, 'then the request moved on').toBe(1);

    h.directory.set('alpha', [replica('limited', limited.url), replica('ok', healthy.url)]);
    const err = await caught(h.client.chat.completions.create({ model: 'alpha', messages: msg }));
    expect(err, "an engine's 429 is the client's answer, not a reason to retry").toBeInstanceOf(OpenAI.RateLimitError);
    expect(healthy.stats().requestsSeen).toBe(1);

    h.directory.set('alpha', [{ ...replica('leaving', limited.url), draining: true }, replica('ok', healthy.url)]);
    await h.client.chat.completions.create({ model: 'alpha', messages: msg });
    expect(limited.seen(), 'a draining replica takes nothing new').toBe(1);
  });

  it('stops a request that outlives the total timeout with 504', async () => {
    const a = model({ name: 'alpha' });
    const h = await harness([a], { timeouts: { totalTimeoutMs: 300 } });
    const hung = await sim(a, { hang: true });
    h.directory.set('alpha', [replica('hung', hung.url)]);
    const err = await caught(
      h.client.chat.completions.create({ model: 'alpha', messages: [{ role: 'user', content: 'hi' }] }),
    );
    expect(err.status).toBe(504);
    await eventually(() => hung.stats().hanging === 0, 'the upstream request to be cut');
  });

  it('drops a half-sent event when a stream breaks, so the error event that ends it parses', async () => {
    const a = model({ name: 'alpha' });
    const h = await harness([a]);
    const breaking = await brokenStreamServer({ halfEvent: true });
    h.directory.set('alpha', [replica('breaks', breaking.url)]);
    const stream = await h.client.chat.completions.create({
      model: 'alpha',
      messages: [{ role: 'user', content: 'hi' }],
      stream: true,
    });
    const tokens: string[] = [];
    let error: unknown = null;
    try {
      for await (const chunk of stream) tokens.push(chunk.choices[0]?.delta.content ?? '');
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(OpenAI.APIError);
    expect((error as Error).message).toContain('the engine stopped answering mid-response');
    expect(tokens).toEqual(['one', 'two']);
  });
});

/** An engine that answers every request with `status` and an OpenAI error body; counts what it saw. */
async function statusServer(status: number): Promise<{ url: string; seen(): number }> {
  let seen = 0;
  const server: Server = createServer((req, res) => {
    seen++;
    req.resume();
    req.on('end', () => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({ error: { message: `status ${status} on purpose`, type: 'x', param: null, code: status } }),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen: () => seen };
}

/** An engine that sends two SSE tokens (and optionally half of a third) and then resets the connection. */
async function brokenStreamServer(options: { halfEvent?: boolean } = {}): Promise<{ url: string }> {
  const chunk = (content: string) =>
    `data: ${JSON.stringify({ id: 'x', object: 'chat.completion.chunk', created: 0, model: 'alpha', choices: [{ index: 0, delta: { content }, finish_reason: null }] })}\n\n`;
  const server: Server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(chunk('one'));
      res.write(chunk('two') + (options.halfEvent ? chunk('three').slice(0, 40) : ''), () => res.socket?.destroy());
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}
