// A hard budget through the router: the request that would spend past it is
// refused with 429 LLMGW_BUDGET_EXCEEDED in OpenAI's error shape, naming the
// budget and when it resets, with Retry-After; what was admitted is charged
// from the engine's usage. Real sim engines behind a stub directory, the
// budget leases over a memory book, the router on a loopback listener.
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { issueKey } from '../control/keys/index.js';
import { BudgetLeases, MemoryBudgetBook } from '../control/budgets/index.js';
import { closeAll, listen, model, sim } from '../../test/support/gateway-router.js';

afterEach(closeAll);

describe('a hard token budget on a key', () => {
  it('admits what fits, then answers 429 naming the budget, its reset and Retry-After', async () => {
    const now = Date.parse('2026-12-06T10:00:00Z');
    const book = new MemoryBudgetBook();
    const budgets = new BudgetLeases({
      book,
      prices: { cost: (_m, p, c) => (p + c) / 1000 },
      now: () => now,
      logger: pino({ level: 'silent' }),
      leaseFraction: 0.1,
      syncIntervalMs: 0,
    });
    const a = model({ name: 'alpha' });
    const h = await listen([a], { coldPollMs: 10, budgets, now: () => now });
    const engine = await sim(a);
    h.directory.replicas.set('alpha', [{ id: 'r1', endpoint: engine.url, draining: false }]);
    const { record, secret } = await issueKey(h.keys, { name: 'k' }, now, 'test');
    await book.create({
      id: 'bud_k',
      scope: 'key',
      subject: record.id,
      unit: 'tokens',
      period: 'day',
      amount: 500,
      enforce: 'hard',
      alertAt: 1,
      createdAtMs: now,
      createdBy: 't',
    });
    await budgets.reload();
    const chat = () =>
      fetch(`${h.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'alpha', max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] }),
      });
    let refused: Response | undefined;
    let served = 0;
    for (let i = 0; i < 20 && !refused; i++) {
      const res = await chat();
      if (res.status === 429) refused = res;
      else {
        expect(res.status, await res.clone().text()).toBe(200);
        await res.json();
        served++;
      }
      await budgets.sync();
    }
    expect(served, 'some requests fit the budget first').toBeGreaterThan(0);
    expect(refused, 'the budget ran out within 20 requests of up to ~110 tokens').toBeDefined();
    expect(refused!.headers.get('retry-after'), 'seconds to the next UTC midnight').toBe(String(14 * 3600));
    const body = (await refused!.json()) as { error: { code: string; message: string; type: string } };
    expect(body.error.code).toBe('LLMGW_BUDGET_EXCEEDED');
    expect(body.error.message).toContain(`key ${record.id}'s hard budget bud_k of 500 tokens per day`);
    expect(body.error.message).toContain('it resets at 2026-12-07T00:00:00.000Z');
  });
});
