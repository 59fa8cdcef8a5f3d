// The router end to end on loopback, choosing: which replica gets a request
// (prompt prefix, the engine's reported queue, least in flight), holding for
// a cold model, and what it does with a connection that misbehaves. Harness
// in test/support/gateway-router.ts.
import { connect } from 'node:net';
import { request as undiciRequest } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { closeAll, model, harness, sim, replica, eventually } from '../../test/support/gateway-router.js';

afterEach(closeAll);

describe('choice and connections', () => {
  it('keeps one prompt prefix on one replica under routing: prefix, and spreads different prefixes', async () => {
    const a = model({ name: 'alpha', routing: 'prefix' });
    const h = await harness([a]);
    const sims = [await sim(a), await sim(a), await sim(a)];
    h.directory.set(
      'alpha',
      sims.map((e, i) => replica(`r${i}`, e.url)),
    );
    const system = 'You are a careful assistant. '.repeat(20);
    for (let i = 0; i < 6; i++) {
      await h.client.chat.completions.create({
        model: 'alpha',
        messages: [
          { role: 'system', content: system },
          { role: 'user', content: `question ${i}` },
        ],
      });
    }
    expect(sims.map((e) => e.stats().requestsSeen).sort(), 'one replica took every request sharing the prefix').toEqual(
      [0, 0, 6],
    );
    for (let i = 0; i < 30; i++) {
      await h.client.chat.completions.create({
        model: 'alpha',
        messages: [{ role: 'user', content: `a different conversation ${i}` }],
      });
    }
    expect(sims.filter((e) => e.stats().requestsSeen > 0).length, 'different prefixes land on different replicas').toBe(
      3,
    );
  });

  it('sends to the replica whose engine reports the shorter queue, and counts its own sends since the sample', async () => {
    const a = model({ name: 'alpha' });
    const h = await harness([a]);
    const busy = await sim(a, { ttftMs: 1500 });
    const idle = await sim(a, { ttftMs: 1500 });
    const now = Date.now();
    // The busy engine's queue came from elsewhere (another control plane, a long prompt): this router has nothing in flight there.
    h.directory.set('alpha', [
      { ...replica('busy', busy.url), load: { running: 4, waiting: 3, kvUsage: 0.5, sampledAtMs: now } },
      { ...replica('idle', idle.url), load: { running: 0, waiting: 0, kvUsage: 0, sampledAtMs: now } },
    ]);
    await Promise.all(
      Array.from({ length: 16 }, (_, i) =>
        h.client.chat.completions.create({ model: 'alpha', messages: [{ role: 'user', content: `q${i}` }] }),
      ),
    );
    // busy scores 4 + 2×3 = 10; idle 0 plus what was sent to it since its sample, so it takes 10 before they tie and share.
    expect(
      idle.stats().requestsSeen,
      'the idle engine took the burst until its own sends made it as busy',
    ).toBeGreaterThanOrEqual(10);
    expect(
      busy.stats().requestsSeen,
      'then the sends since the sample counted, and the busy one took some too',
    ).toBeGreaterThanOrEqual(1);
  });

  it('ignores a stale sample, and every sample under routing: least-inflight', async () => {
    const stale = model({ name: 'alpha' });
    const inflight = model({ name: 'beta', routing: 'least-inflight' });
    const h = await harness([stale, inflight], { loadStaleMs: 4000 });
    const [a0, a1, b0, b1] = [await sim(stale), await sim(stale), await sim(inflight), await sim(inflight)];
    const queued = { running: 8, waiting: 8, sampledAtMs: Date.now() };
    // With random() = 0 a tie goes to the first candidate: were its old queue read, a1 would win instead.
    h.directory.set('alpha', [
      { ...replica('a0', a0.url), load: { ...queued, sampledAtMs: Date.now() - 60_000 } },
      replica('a1', a1.url),
    ]);
    // Least-inflight's two draws with random() = 0 are b0, then b1; it keeps b0 on equal in-flight counts.
    h.directory.set('beta', [{ ...replica('b0', b0.url), load: queued }, replica('b1', b1.url)]);
    for (let i = 0; i < 3; i++) {
      await h.client.chat.completions.create({ model: 'alpha', messages: [{ role: 'user', content: 'hi' }] });
      await h.client.chat.completions.create({ model: 'beta', messages: [{ role: 'user', content: 'hi' }] });
    }
    expect([a0.stats().requestsSeen, a1.stats().requestsSeen], 'a minute-old sample is not read').toEqual([3, 0]);
    expect([b0.stats().requestsSeen, b1.stats().requestsSeen], 'least-inflight reads no sample').toEqual([3, 0]);
  });

  it('holds for the cold model itself when fallback_while_cold finds no fallback ready', async () => {
    const a = model({ name: 'alpha', fallbacks: ['beta'], fallback_while_cold: true, scaling: { min: 0, max: 1 } });
    const b = model({ name: 'beta', scaling: { min: 0, max: 1 } });
    const h = await harness([a, b], { timeouts: { coldStartTimeoutMs: 10_000 } });
    h.directory.starting.add('alpha');
    const pending = h.client.chat.completions.create({ model: 'alpha', messages: [{ role: 'user', content: 'hi' }] });
    await eventually(() => h.directory.demands.includes('alpha'), 'the router to report demand');
    const engine = await sim(a);
    h.directory.set('alpha', [replica('r1', engine.url)]);
    expect((await pending).model).toBe('alpha');
  });

  it('answers a wrong verb with 405 in OpenAI shape, and cuts a client that stalls mid-body', async () => {
    const a = model({ name: 'alpha' });
    const h = await harness([a], { timeouts: { idleBodyTimeoutMs: 200 } });
    const res = await undiciRequest(`${h.url}/v1/chat/completions`, { method: 'GET' });
    expect(res.statusCode).toBe(405);
    expect(((await res.body.json()) as { error: { type: string } }).error.type).toBe('invalid_request_error');

    const port = Number(new URL(h.url).port);
    const socket = connect(port, '127.0.0.1');
    let closed = false;
    let answer = '';
    socket.on('data', (d: Buffer) => (answer += d.toString()));
    socket.on('close', () => (closed = true));
    socket.on('error', () => undefined);
    socket.write(
      `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\nauthorization: Bearer ${h.secret}\r\ncontent-length: 100\r\n\r\n{"model":`,
    );
    await eventually(() => closed, 'the router to close a connection whose body went silent', 5_000).catch(
      (e: Error) => {
        throw new Error(`${e.message}; answer so far: ${JSON.stringify(answer)}`);
      },
    );
  });
});
