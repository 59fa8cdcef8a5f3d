// A plane whose store is spent while requests running on it hold room they
// will not use: holds are upper bounds (max_tokens and a prompt's most
// tokens), so most of each comes back at settlement. The failure this guards
// against: such a plane refused the next request as exceeded while the room
// it needed was only held, and the refusal was not final (once the holds
// settled, the next request fitted), so a client told the budget was spent
// could spend again a moment later.
import { describe, expect, it } from 'vitest';
import type { BudgetDecision } from '../../gateway/ports/index.js';
import { TEAM_KEY } from '../../../test/support/budget-records.js';
import { wholeBudgetPlane } from '../../../test/support/budget-plane.js';
import type { BudgetLeases } from './leases.js';

const key = TEAM_KEY;

/** One plane leasing a whole 1,000-token budget (the store has nothing more), holds of 125 tokens each. */
function plane(renewWaitMs?: number): Promise<BudgetLeases> {
  return wholeBudgetPlane(1000, renewWaitMs);
}

/** Eight holds of 125: the whole lease. */
function holdAll(p: BudgetLeases): Extract<BudgetDecision, { ok: true }>[] {
  return Array.from({ length: 8 }, () => {
    const d = p.admit(key, 'alpha', 109, 16);
    expect(d).toMatchObject({ ok: true });
    return d as Extract<BudgetDecision, { ok: true }>;
  });
}

describe('a plane whose store is spent while its running requests hold room', () => {
  it('waits for a hold to come back, then admits from what it gave back', async () => {
    const p = await plane();
    const held = holdAll(p);
    const next = p.admit(key, 'alpha', 109, 16);
    expect(next instanceof Promise, 'it waits rather than being refused').toBe(true);
    // The first settles at its true usage, 23 tokens: 102 come back, not enough for 125 alone.
    held[0]!.hold!.settle('alpha', 7, 16);
    held[1]!.hold!.settle('alpha', 7, 16);
    expect(await next, '204 back: it fits').toMatchObject({ ok: true });
    await p.close();
  });

  it('is woken by a hold released without use (a refused or count-only request) too', async () => {
    const p = await plane();
    const held = holdAll(p);
    const next = p.admit(key, 'alpha', 109, 16);
    held[3]!.hold!.release();
    expect(await next).toMatchObject({ ok: true });
    await p.close();
  });

  it('refuses as exceeded at once when it would not fit even were every hold given back', async () => {
    const p = await plane();
    holdAll(p);
    const d = p.admit(key, 'alpha', 1000, 1);
    expect(d instanceof Promise).toBe(false);
    expect(d).toMatchObject({ ok: false, budget: "team ml's hard budget bud_ml of 1000 tokens per day" });
    expect((d as { unsettled?: true }).unsettled).toBeUndefined();
    await p.close();
  });

  it('refuses as unsettled (retry), not exceeded, when the holds do not come back within the wait', async () => {
    const p = await plane(0);
    holdAll(p);
    expect(p.admit(key, 'alpha', 109, 16)).toMatchObject({ ok: false, unsettled: true, retryAfterS: 1 });
    await p.close();
  });

  it('once every hold settled and less than a hold is left, refuses as exceeded, and again after', async () => {
    const p = await plane();
    const held = holdAll(p);
    // They spent all they held but 100: what is left cannot take another 125.
    for (const d of held.slice(0, 4)) d.hold!.settle('alpha', 109, 16);
    for (const d of held.slice(4)) d.hold!.settle('alpha', 84, 16);
    for (let i = 0; i < 2; i++) {
      const d = p.admit(key, 'alpha', 109, 16);
      expect(d instanceof Promise, 'no running hold to wait for').toBe(false);
      expect(d).toMatchObject({ ok: false });
      expect((d as { unsettled?: true }).unsettled).toBeUndefined();
    }
    await p.close();
  });
});
