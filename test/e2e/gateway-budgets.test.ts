// `llmgw gateway` beside a control plane on one SQLite store enforces the
// budgets the control plane keeps, from leases of its own: a key in a team
// with a hard token budget, spending through the gateway until it is
// refused with 429 LLMGW_BUDGET_EXCEEDED. The failure this guards against:
// a gateway process that served a team's keys with no budget at all (it
// once read keys without their team and had no budget gate), so a team
// could spend without limit through any gateway in front of the fleet.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { weightsDir } from '../support/fleet.js';
import { startOneNodeFleet, type OneNodeFleet } from '../support/one-node.js';
import { startLlmgw, type RunningProcess } from '../support/processes.js';
import { waitFor } from '../support/wait.js';

const AMOUNT = 2000;
/** A lease is 2% of the amount: the most each of the two holders (control plane, gateway) may overshoot by. */
const LEASE = AMOUNT * 0.02;

let fleet: OneNodeFleet;
let gateway: RunningProcess;
let gatewayUrl = '';
let budgetId = '';
let secret = '';

beforeAll(async () => {
  fleet = await startOneNodeFleet({
    name: 'gateway-budgets',
    portRange: '23450-23479',
    keys: [],
    models: (dir) => [{ name: 'chat', source: weightsDir(dir), scaling: { min: 1 }, profiles: [{ engine: 'sim' }] }],
  });
  expect((await fleet.api('POST', '/api/v1/teams', { name: 'ml' })).status).toBe(201);
  const budget = await fleet.api<{ id: string }>('POST', '/api/v1/budgets', {
    scope: 'team',
    subject: 'ml',
    unit: 'tokens',
    period: 'day',
    amount: AMOUNT,
  });
  expect(budget.status).toBe(201);
  budgetId = budget.body.id;
  const key = await fleet.api<{ secret: string }>('POST', '/api/v1/keys', { name: 'spender', team: 'ml' });
  expect(key.status).toBe(201);
  secret = key.body.secret;
  gateway = startLlmgw([
    'gateway',
    '--store',
    fleet.store,
    '--client-addr',
    '127.0.0.1:0',
    '--metrics-addr',
    '127.0.0.1:0',
    '--log-level',
    'warn',
  ]);
  gatewayUrl = (await gateway.waitForLog((e) => e.msg === 'llmgw gateway listening', 60_000)).client as string;
}, 180_000);

afterAll(async () => {
  await gateway?.stop();
  await fleet?.stop();
});

/** A chat completion; its status, the error code when refused, and the tokens its usage reports. */
async function chat(url: string): Promise<{ status: number; code?: string; message?: string; tokens: number }> {
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'chat', messages: [{ role: 'user', content: 'hi' }], max_tokens: 8 }),
  });
  const body = (await res.json()) as { usage?: { total_tokens: number }; error?: { code: string; message: string } };
  return {
    status: res.status,
    ...(body.error ? { code: body.error.code, message: body.error.message } : {}),
    tokens: body.usage?.total_tokens ?? 0,
  };
}

describe('llmgw gateway with a hard team budget kept by the control plane', () => {
  it(
    'spends it from leases of its own and refuses past it with 429 LLMGW_BUDGET_EXCEEDED',
    { timeout: 180_000 },
    async () => {
      await waitFor('the key answered through the gateway', async () => {
        const res = await fetch(`${gatewayUrl}/v1/models`, { headers: { authorization: `Bearer ${secret}` } });
        return res.status === 200 ? true : undefined;
      });
      let spent = 0;
      let refused: Awaited<ReturnType<typeof chat>> | undefined;
      const storeSpent = async () => {
        const list = await fleet.api<{ budgets: { id: string; spent: number }[] }>('GET', '/api/v1/budgets');
        return list.body.budgets.find((b) => b.id === budgetId)?.spent;
      };
      // Eight at a time until one is refused; the budget is about 2000 / 14 ≈ 140 requests. A gateway whose lease
      // runs dry before its background sync lands waits for a renewal; if a busy store does not give one within
      // budget_renew_wait it answers 503 LLMGW_BUDGET_UNSETTLED, which says the budget is not known to be spent and is
      // retried, as a client would after Retry-After. A 429 LLMGW_BUDGET_EXCEEDED is final: the store has no more.
      let unsettled = 0;
      for (let round = 0; round < 300 && !refused; round++) {
        const ends = await Promise.all(Array.from({ length: 8 }, () => chat(gatewayUrl)));
        let retry = false;
        for (const e of ends) {
          if (e.status === 200) spent += e.tokens;
          else if (e.code === 'LLMGW_BUDGET_UNSETTLED') retry = true;
          else refused ??= e;
        }
        if (retry) unsettled++;
        if (retry && !refused) await new Promise((r) => setTimeout(r, 1000));
      }
      expect(refused, 'the gateway refused once the budget was spent').toBeDefined();
      expect(refused!.status).toBe(429);
      expect(refused!.code).toBe('LLMGW_BUDGET_EXCEEDED');
      expect(refused!.message).toContain(`team ml's hard budget ${budgetId} of ${AMOUNT} tokens per day`);
      // Honest when what is left is less than the request may use: it names what the request held (8 of completion).
      expect(refused!.message).toMatch(/may use \(up to \d+ tokens: 8 of completion and at most \d+ of prompt\)/);
      expect(spent, `spent ${spent} through the gateway`).toBeGreaterThan(AMOUNT * 0.9);
      expect(spent).toBeLessThanOrEqual(AMOUNT + 2 * LEASE);

      // The store holds what the gateway spent, as the control plane lists it.
      await waitFor('the gateway to report its spend', async () => ((await storeSpent()) === spent ? true : undefined));
      // And the refusal was final: with the store caught up, the gateway still refuses as exceeded.
      const again = await chat(gatewayUrl);
      expect({ status: again.status, code: again.code }, `after ${unsettled} unsettled rounds`).toEqual({
        status: 429,
        code: 'LLMGW_BUDGET_EXCEEDED',
      });
      // And the control plane, which holds a lease too, refuses the same key within that lease.
      const onControl = [];
      for (let i = 0; i < 10; i++) onControl.push(await chat(fleet.clientUrl));
      expect(onControl.map((e) => e.code).filter(Boolean)).toContain('LLMGW_BUDGET_EXCEEDED');
    },
  );
});
