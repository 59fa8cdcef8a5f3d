// prefix-cache routing end to end on loopback: sim engines with a simulated
// KV cache publishing on GET /kv-events, the router following them, and a
// conversation's turns sent through the official client. Harness in
// test/support/gateway-router.ts.
import { afterEach, describe, expect, it } from 'vitest';
import { closeAll, cleanups, eventually, harness, model, replica, sim } from '../../../test/support/gateway-router.js';
import type { SimEngine } from '../../engine/sim/index.js';
import { RequestLog } from '../core/request-log.js';
import type { CacheRouting } from './cache-routing.js';

afterEach(closeAll);

const SYSTEM = 'You are a careful assistant who answers in full sentences. '.repeat(30);

/** The chooser's cache routing state: private to the router, read here to wait for what it learns in the background. */
function cacheOf(router: unknown): CacheRouting {
  return (router as { chooser: { cache: CacheRouting } }).chooser.cache;
}

describe('routing: prefix-cache', () => {
  it('is the default, and keeps each conversation on the replica that holds its earlier turns', async () => {
    const a = model({ name: 'alpha' });
    expect(a.routing).toBe('prefix-cache');
    const log = new RequestLog();
    const h = await harness([a], { requestLog: log });
    cleanups.push(() => h.router.close());
    const sims: SimEngine[] = [];
    for (let i = 0; i < 3; i++) sims.push(await sim(a, { kvCacheBlocks: 4000, ttftMs: 1 }));
    h.directory.set(
      'alpha',
      sims.map((e, i) => ({
        ...replica(`r${i}`, e.url),
        engine: 'sim',
        kvEvents: { kind: 'http', path: '/kv-events' },
      })),
    );
    const cache = cacheOf(h.router);
    /** Sends one turn and says which sim's cache it went through. */
    const send = async (messages: { role: 'system' | 'user' | 'assistant'; content: string }[]) => {
      const before = sims.map((e) => e.stats().prefixCacheQueries);
      const answer = await h.client.chat.completions.create({ model: 'alpha', messages, max_tokens: 8 });
      const served = sims.findIndex((e, i) => e.stats().prefixCacheQueries > before[i]!);
      return { served, text: answer.choices[0]!.message.content ?? '' };
    };
    for (let c = 0; c < 4; c++) {
      const messages: { role: 'system' | 'user' | 'assistant'; content: string }[] = [
        { role: 'system', content: SYSTEM },
        { role: 'user', content: `conversation ${c}: ${'tell me more about it. '.repeat(20)}` },
      ];
      const first = await send(messages);
      expect(first.served).toBeGreaterThanOrEqual(0);
      for (let turn = 2; turn <= 4; turn++) {
        // What the gateway learns in the background: the engine's events, and this prompt's tokens.
        await eventually(() => cache.index.sizeOf(`r${first.served}`) > 0, 'the index heard of the stored blocks');
        await cache.settled();
        messages.push({ role: 'assistant', content: first.text });
        messages.push({ role: 'user', content: `turn ${turn}: ${'and then what happened? '.repeat(15)}` });
        const next = await send(messages);
        expect(next.served, `conversation ${c} turn ${turn} went back to the replica holding it`).toBe(first.served);
        const choice = log.list({ limit: 1 })[0]?.attempts[0]?.choice;
        expect(choice?.by, 'the request log names the rule').toBe('prefix-cache');
        const chosen = choice?.candidates.find((k) => k.replica === `r${first.served}`);
        const best = Math.max(...choice!.candidates.map((k) => k.expectedHit ?? 0));
        expect(chosen?.expectedHit, 'and the chosen replica is expected to hold the most of the prompt').toBe(best);
        expect(best).toBeGreaterThan(0);
      }
    }
    const hits = sims.reduce((n, e) => n + e.stats().prefixCacheHits, 0);
    const queried = sims.reduce((n, e) => n + e.stats().prefixCacheQueries, 0);
    expect(hits / queried, 'most prompt tokens were found cached').toBeGreaterThan(0.6);
  });

  it('routes as least-load for replicas whose engines publish nothing, and opens no source', async () => {
    const a = model({ name: 'alpha' });
    const h = await harness([a]);
    cleanups.push(() => h.router.close());
    const busy = await sim(a, { kvCacheBlocks: 100 });
    const idle = await sim(a, { kvCacheBlocks: 100 });
    const now = Date.now();
    h.directory.set('alpha', [
      { ...replica('busy', busy.url), load: { running: 6, waiting: 2, sampledAtMs: now } },
      { ...replica('idle', idle.url), load: { running: 0, waiting: 0, sampledAtMs: now } },
    ]);
    for (let i = 0; i < 4; i++)
      await h.client.chat.completions.create({ model: 'alpha', messages: [{ role: 'user', content: SYSTEM }] });
    expect(idle.stats().requestsSeen).toBe(4);
    expect(cacheOf(h.router).followed()).toEqual([]);
  });
});
