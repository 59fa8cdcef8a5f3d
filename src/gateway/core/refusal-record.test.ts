// "Why was this request refused", answered from the request log: a request
// a rate limit or a hard budget refused at admission is in the log by its
// x-request-id, with the limit and what the client was told, and its
// timeline says so. The failure this guards against: such refusals never
// reached the log (they end in a hook, before the handler that records
// requests), so `ctl request ID` answered "no such request".
import { afterEach, describe, expect, it } from 'vitest';
import { closeAll, listen, model } from '../../../test/support/gateway-router.js';
import { hashKey, type ApiKeyRecord, type BudgetGate } from '../ports/index.js';
import { admissionLimitOf } from './refusal-record.js';
import { RequestLog } from './request-log.js';
import { requestDetailView } from './request-timeline.js';

afterEach(closeAll);

function key(secret: string, over: Partial<ApiKeyRecord>): ApiKeyRecord {
  return {
    id: `key_${secret}`,
    name: secret,
    prefix: secret.slice(0, 12),
    hash: hashKey(secret),
    allowedModels: null,
    requestsPerMinute: null,
    tokensPerMinute: null,
    expiresAtMs: null,
    createdAtMs: 0,
    createdBy: 't',
    revokedAtMs: null,
    ...over,
  };
}

const RESET = Date.parse('2026-12-07T00:00:00Z');
/** Refuses every request of team `broke`; no budget for anyone else. */
const budgets: BudgetGate = {
  admit: (k) =>
    k.team === 'broke'
      ? { ok: false, budget: "team broke's hard budget bud_1 of 100 tokens per day", resetAtMs: RESET, retryAfterS: 60 }
      : { ok: true, hold: null },
  cost: () => undefined,
};

async function post(url: string, secret: string, id: string): Promise<{ status: number; code: string }> {
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json', 'x-request-id': id },
    body: JSON.stringify({ model: 'alpha', messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 }),
  });
  const body = (await res.json()) as { error?: { code: string } };
  return { status: res.status, code: body.error?.code ?? '' };
}

describe('a request refused at admission, in the request log', () => {
  it('names the hard budget that refused it, and the timeline says a limit refused it', async () => {
    const requestLog = new RequestLog(100);
    const l = await listen([model({ name: 'alpha' })], { requestLog, budgets });
    await l.keys.create(key('sk-llmgw-broke-0001', { team: 'broke' }));
    expect(await post(l.url, 'sk-llmgw-broke-0001', 'why-budget')).toEqual({
      status: 429,
      code: 'LLMGW_BUDGET_EXCEEDED',
    });
    const r = requestLog.get('why-budget');
    expect(r, 'the refused request is in the log').toBeDefined();
    expect(r).toMatchObject({
      model: 'alpha',
      key: 'sk-llmgw-bro',
      status: 429,
      admission: { outcome: 'limited', limit: 'hard budget' },
      failure: { code: 'LLMGW_BUDGET_EXCEEDED' },
      attempts: [],
    });
    const view = requestDetailView(r!);
    expect(view.cause).toContain("team broke's hard budget bud_1 of 100 tokens per day");
    expect(view.cause).toContain('2026-12-07T00:00:00.000Z');
    expect(view.timeline.map((e) => e.kind)).toContain('limited');
    expect(view.timeline.find((e) => e.kind === 'limited')!.says).toContain('refused by a limit (hard budget)');
  });

  it('names the per-minute limit of a rate-limited key, and records nothing for an admitted request', async () => {
    const requestLog = new RequestLog(100);
    const l = await listen([model({ name: 'alpha' })], { requestLog });
    await l.keys.create(key('sk-llmgw-rpm1-0001', { requestsPerMinute: 1 }));
    // The first is admitted (and fails for want of a replica: it is logged by the handler, as before).
    expect((await post(l.url, 'sk-llmgw-rpm1-0001', 'first')).code).toBe('LLMGW_NO_REPLICA');
    // OpenAI's own code on the wire; the log keeps llmgw's.
    expect(await post(l.url, 'sk-llmgw-rpm1-0001', 'second')).toEqual({ status: 429, code: 'rate_limit_exceeded' });
    expect(requestLog.get('first')?.admission?.outcome).toBe('admitted');
    expect(requestLog.countWithId('first'), 'the admitted request is in the log once').toBe(1);
    expect(requestLog.get('second')).toMatchObject({
      admission: { outcome: 'limited', limit: 'requests per minute' },
      failure: { code: 'LLMGW_RATE_LIMITED' },
      status: 429,
    });
    expect(requestLog.list({ failed: true }).map((x) => x.id)).toEqual(['second', 'first']);
  });
});

describe('admissionLimitOf', () => {
  it.each([
    ['LLMGW_BUDGET_EXCEEDED', undefined, 'hard budget'],
    ['LLMGW_RATE_LIMITED', 'requests', 'requests per minute'],
    ['LLMGW_RATE_LIMITED', 'tokens', 'tokens per minute'],
    ['LLMGW_RATE_LIMITED', undefined, 'rate limit'],
    ['LLMGW_REQUEST_OVER_TOKEN_LIMIT', undefined, "tokens per minute (the request alone is over the key's limit)"],
    ['LLMGW_BAD_REQUEST', undefined, undefined],
    ['LLMGW_UNAUTHORIZED', undefined, undefined],
  ] as const)('%s (bucket %s): %s', (code, limitedBy, limit) => {
    expect(admissionLimitOf(code, limitedBy)).toBe(limit);
  });
});
