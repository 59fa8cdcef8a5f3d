// What a request may cost: the rate limit's reservation (the prompt's least
// size) and a hard budget's hold (its most), and a replay, without
// processes, of the overshoot the hold guards against: a CI trial charged
// 21,022 of a 20,000-token budget (2.56 leases; the bound is one lease per
// control plane) because each request held only a lower bound of its prompt
// and 200 streams at the budget's edge each spent ~6 tokens past their hold.
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { MemoryBudgetBook } from '../../control/budgets/index.js';
import { budgetPlane, wholeBudgetPlane } from '../../../test/support/budget-plane.js';
import { budgetRecord, TEAM_KEY } from '../../../test/support/budget-records.js';
import type { RoutedModel, UsageSink } from '../ports/index.js';
import { Ledger } from './ledger.js';
import { mostPromptTokens } from './prompt-text.js';
import { RateLimiter } from './rate-limit.js';
import { budgetHold, tokensToReserve } from './token-cost.js';
import { parseRequest, type Endpoint } from './validate.js';

const MODEL = { name: 'chat', limits: { maxTokens: null, contextTokens: null, maxN: null } } as unknown as RoutedModel;
const parse = (endpoint: Endpoint, body: Record<string, unknown>) =>
  parseRequest(endpoint, Buffer.from(JSON.stringify(body)), { maxN: 16, maxTokens: 100_000 });
const PROMPT = 'Spend the budget, please.';
const CHAT = { model: 'chat', messages: [{ role: 'user', content: PROMPT }], max_tokens: 16 };

describe('what a request may cost', () => {
  const cases: [string, Endpoint, Record<string, unknown>, { rate: number; completion: number }][] = [
    ['a chat: max_tokens once', 'chat', CHAT, { rate: 1 + 16, completion: 16 }],
    ['n choices: max_tokens for each', 'chat', { ...CHAT, n: 3 }, { rate: 1 + 48, completion: 48 }],
    [
      'a completion of three prompts: max_tokens for each (the rate limit still counts one)',
      'completions',
      { model: 'chat', prompt: ['a', 'b', 'c'], max_tokens: 10 },
      { rate: 10, completion: 30 },
    ],
    [
      'a completion of one prompt in token ids',
      'completions',
      { model: 'chat', prompt: [1, 2, 3], max_tokens: 10 },
      { rate: 3 + 10, completion: 10 },
    ],
    ['an embedding: no completion', 'embeddings', { model: 'chat', input: 'x'.repeat(64) }, { rate: 4, completion: 0 }],
  ];
  for (const [name, endpoint, body, want] of cases)
    it(name, () => {
      const parsed = parse(endpoint, body);
      const cost = tokensToReserve(endpoint, parsed, MODEL, 256);
      expect(cost.total, 'the rate limit reserves the least prompt').toBe(want.rate);
      const held = budgetHold(endpoint, parsed, cost);
      expect(held).toEqual({
        prompt: mostPromptTokens(endpoint, body),
        completion: want.completion,
        total: mostPromptTokens(endpoint, body) + want.completion,
      });
      expect(held.total, 'a budget holds at least what the rate limit reserves').toBeGreaterThanOrEqual(cost.total);
    });
});

/** The sim engine's prompt count for a chat: a token per 4 characters of its contents (src/engine/sim/generate.ts). */
const simPromptTokens = Math.ceil(PROMPT.length / 4);

/**
 * Two planes on one book spend a 20,000-token budget (lease 400 each): 200
 * streams, half on each, each settling with the sim's usage (7 of prompt,
 * 16 of completion) a few turns after it was admitted, until each is
 * refused. `hold` picks what admission holds of the prompt. Returns what was
 * charged.
 */
async function spend(hold: 'least' | 'most'): Promise<{ charged: number; refused: number }> {
  const book = new MemoryBudgetBook();
  await book.create(budgetRecord({ amount: 20_000 }));
  const planes = [await budgetPlane(book, { leaseFraction: 0.02 }), await budgetPlane(book, { leaseFraction: 0.02 })];
  const usage: UsageSink = { record: () => undefined };
  const ledgers = planes.map((p) => new Ledger(new RateLimiter(() => 0), usage, pino({ level: 'silent' }), p));
  const parsed = parse('chat', CHAT);
  const cost = tokensToReserve('chat', parsed, MODEL, 256);
  const held = hold === 'most' ? budgetHold('chat', parsed, cost) : { prompt: cost.prompt, completion: 16 };
  let charged = 0;
  let refused = 0;
  // Each stream asks again until refused; an admitted one stays in flight for a few turns of the event loop, so
  // that at the budget's edge many are in flight at once (as 200 streams of a sim engine are).
  const stream = async (i: number): Promise<void> => {
    for (let turn = 0; ; turn++) {
      const tab = ledgers[i % 2]!.open(TEAM_KEY, 'chat');
      const d = await tab.holdBudget('chat', held.prompt, held.completion);
      if (!d.ok) {
        expect(d.unsettled, 'refused as spent, never unsettled: the book answers at once').toBeUndefined();
        refused++;
        return;
      }
      for (let t = 0; t < 1 + ((i + turn) % 4); t++) await new Promise((r) => setImmediate(r));
      tab.settle('chat', 200, simPromptTokens, 16);
      charged += simPromptTokens + 16;
    }
  };
  await Promise.all(Array.from({ length: 200 }, (_, i) => stream(i)));
  for (const p of planes) await p.close();
  const row = (await book.spendOf([{ budgetId: 'bud_ml', periodStartMs: Date.parse('2026-12-06T00:00:00Z') }])).get(
    'bud_ml',
  );
  expect(row?.spent, 'the book was told what the planes charged').toBe(charged);
  return { charged, refused };
}

describe('a hard budget at its edge under 200 streams on two planes', () => {
  it('overshot past one lease per plane when holding the least prompt (the defect this replays)', async () => {
    const { charged } = await spend('least');
    expect(charged, `charged ${charged}`).toBeGreaterThan(20_000 + 2 * 400);
  });

  it('is overshot by at most one lease per plane when holding the most prompt, and the rest gets spent', async () => {
    const { charged, refused } = await spend('most');
    expect(refused, 'every stream was refused in the end').toBe(200);
    expect(charged, `charged ${charged}: at most one lease per plane over`).toBeLessThanOrEqual(20_000 + 2 * 400);
    expect(charged, 'and most of the budget was spendable').toBeGreaterThan(20_000 * 0.9);
  });

  it("gives back at settlement what a request held past its usage, to its plane's lease", async () => {
    // One plane leasing the whole budget: the store has nothing more, so what this plane holds is all there is.
    const plane = await wholeBudgetPlane(1000);
    const ledger = new Ledger(new RateLimiter(() => 0), { record: () => undefined }, pino({ level: 'silent' }), plane);
    const parsed = parse('chat', CHAT);
    const held = budgetHold('chat', parsed, tokensToReserve('chat', parsed, MODEL, 256));
    const fit = Math.floor(1000 / held.total);
    const tabs = Array.from({ length: fit }, () => ledger.open(TEAM_KEY, 'chat'));
    for (const t of tabs) expect(t.holdBudget('chat', held.prompt, held.completion)).toMatchObject({ ok: true });
    const more = ledger.open(TEAM_KEY, 'chat').holdBudget('chat', held.prompt, held.completion);
    expect(more instanceof Promise, `a ${fit + 1}th hold of ${held.total} waits: the 1000 is all held`).toBe(true);
    // They settle at their true usage, 23 tokens each: the rest of each hold returns to the lease.
    for (const t of tabs) t.settle('chat', 200, simPromptTokens, 16);
    expect(await more, 'the waiting one is admitted from what came back').toMatchObject({ ok: true });
    const left = 1000 - fit * (simPromptTokens + 16) - held.total;
    const again = Array.from({ length: Math.floor(left / held.total) + 1 }, () =>
      ledger.open(TEAM_KEY, 'chat').holdBudget('chat', held.prompt, held.completion),
    );
    expect(
      again.map((d) => !(d instanceof Promise) && d.ok),
      `${left} left after settling: holds of ${held.total} fit it, and one more waits`,
    ).toEqual([...Array<boolean>(again.length - 1).fill(true), false]);
    await plane.close();
  });
});
