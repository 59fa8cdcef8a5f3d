// A request whose budget lease ran dry, through the router: it waits for the
// budget gate's answer (the lease's renewal), is served once that admits it,
// and is told the truth when it does not: 429 LLMGW_BUDGET_EXCEEDED when the
// budget is spent, 503 LLMGW_BUDGET_UNSETTLED with Retry-After when the store
// did not settle it in time. The failure this guards against: a plane that
// refused as exceeded while the store still had room (#36), and a hook that
// could answer only from a decision made at once.
import { afterEach, describe, expect, it } from 'vitest';
import { closeAll, listen, model, sim } from '../../test/support/gateway-router.js';
import { issueKey } from '../control/keys/index.js';
import { RequestLog } from './core/request-log.js';
import type { BudgetDecision, BudgetGate } from './ports/index.js';

afterEach(closeAll);

const NOW = Date.parse('2026-12-06T10:00:00Z');
const RESET = Date.parse('2026-12-07T00:00:00Z');
const WORDS = "team ml's hard budget bud_ml of 2000 tokens per day";

/** A gate whose every answer waits until the test gives it; `asked` resolves at each admit. */
function waitingGate(): { gate: BudgetGate; asked: () => Promise<void>; answer: (d: BudgetDecision) => void } {
  let answer: (d: BudgetDecision) => void = () => undefined;
  let askedNow: () => void = () => undefined;
  let asked = new Promise<void>((r) => (askedNow = r));
  const gate: BudgetGate = {
    admit: () => {
      askedNow();
      return new Promise<BudgetDecision>((r) => (answer = r));
    },
    cost: () => undefined,
  };
  return {
    gate,
    asked: async () => {
      await asked;
      asked = new Promise<void>((r) => (askedNow = r));
    },
    answer: (d) => answer(d),
  };
}

async function setup(gate: BudgetGate, withEngine = false, requestLog?: RequestLog) {
  const a = model({ name: 'alpha' });
  const h = await listen([a], { budgets: gate, now: () => NOW, coldPollMs: 10, ...(requestLog ? { requestLog } : {}) });
  if (withEngine) {
    const engine = await sim(a);
    h.directory.replicas.set('alpha', [{ id: 'r1', endpoint: engine.url, draining: false }]);
  }
  // The gate decides for every key: no budget needs to name this one.
  const { secret } = await issueKey(h.keys, { name: 'k' }, NOW, 'test');
  let answered = false;
  const res = fetch(`${h.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'alpha', max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] }),
  }).then((r) => {
    answered = true;
    return r;
  });
  return { res, answered: () => answered };
}

describe('a request waiting for its budget lease to be renewed', () => {
  it('is served once the renewal admits it, and not before', async () => {
    const w = waitingGate();
    const settled: number[] = [];
    const { res, answered } = await setup(w.gate, true);
    await w.asked();
    for (let i = 0; i < 10; i++) await new Promise((r) => setImmediate(r));
    expect(answered(), 'no answer while the gate has not decided').toBe(false);
    w.answer({
      ok: true,
      hold: { settle: (_m, p, c) => void settled.push(p + c), release: () => void settled.push(-1) },
    });
    const r = await res;
    expect(r.status, await r.clone().text()).toBe(200);
    await r.json();
    // Its hold is settled once, off the response's path.
    await expect.poll(() => settled.length).toBe(1);
    expect(settled[0]).toBeGreaterThan(0);
  });

  it('is refused with 503 LLMGW_BUDGET_UNSETTLED and Retry-After when the store did not settle it', async () => {
    const w = waitingGate();
    const requestLog = new RequestLog(10);
    const { res } = await setup(w.gate, false, requestLog);
    await w.asked();
    w.answer({ ok: false, unsettled: true, budget: WORDS, resetAtMs: RESET, retryAfterS: 1 });
    const r = await res;
    expect(r.status).toBe(503);
    expect(r.headers.get('retry-after')).toBe('1');
    const body = (await r.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe('LLMGW_BUDGET_UNSETTLED');
    expect(body.error.message).toContain(WORDS);
    expect(body.error.message).toContain('is not known to be spent');
    expect(body.error.message).toContain('retry in 1 s');
    // "Why was this request refused": the log says which limit, and that the budget was not spent.
    expect(requestLog.list({}).map((rec) => rec.admission)).toEqual([
      expect.objectContaining({ outcome: 'limited', limit: 'hard budget, not settled with the store in time' }),
    ]);
  });

  it('is refused with 429 LLMGW_BUDGET_EXCEEDED when the renewal says the budget is spent', async () => {
    const w = waitingGate();
    const { res } = await setup(w.gate);
    await w.asked();
    w.answer({ ok: false, budget: WORDS, resetAtMs: RESET, retryAfterS: 14 * 3600 });
    const r = await res;
    expect(r.status).toBe(429);
    expect(r.headers.get('retry-after')).toBe(String(14 * 3600));
    const body = (await r.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe('LLMGW_BUDGET_EXCEEDED');
    expect(body.error.message).toContain('it resets at 2026-12-07T00:00:00.000Z');
  });
});
