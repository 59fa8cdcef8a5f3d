// The admin listener's routes over budgets and spend: list, create, change
// and delete budgets (the period's spend beside each), and GET /api/v1/spend,
// what each team, key and model spent in US dollars.
import { randomUUID } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { LlmgwError } from '../../errors/index.js';
import { actorOf, actorText, needs, teamsInScope, type AuditActor, type ZodTypeProvider } from '../../http/index.js';
import type { BudgetBook } from './book.js';
import type { BudgetRecord } from './budgets.js';
import type { GpuTotals } from './gpu-meter.js';
import { moneyViews, type UsageCostRow } from './views.js';
import type { ModelPrice } from './prices.js';

const NewBudgetSchema = z.strictObject({
  scope: z.enum(['team', 'key']),
  /** The team's name or the key's id. */
  subject: z.string().min(1).max(200),
  unit: z.enum(['tokens', 'usd']),
  period: z.enum(['day', 'month']),
  amount: z.number().positive(),
  /** Absent = hard. */
  enforce: z.enum(['hard', 'soft']).optional(),
  /** Absent = 0.8 soft, 1 hard. */
  alert_at: z.number().gt(0).max(1).optional(),
});
const ChangeSchema = z.strictObject({
  amount: z.number().positive().optional(),
  enforce: z.enum(['hard', 'soft']).optional(),
  alert_at: z.number().gt(0).max(1).optional(),
});

export type { UsageCostRow } from './views.js';

export interface BudgetAdminDeps {
  book: BudgetBook;
  now: () => number;
  /** Reads the budgets again after a change here (other planes hear of it through the store). */
  changed: () => Promise<void>;
  teamExists: (name: string) => boolean;
  keyExists: (id: string) => boolean;
  /** The team of a key id; undefined = unknown (anonymous, or a key deleted since). */
  teamOf: (keyId: string) => string | undefined;
  priceOf: (model: string) => ModelPrice | undefined;
  /** Usage rows with their cost; absent = no store, nothing kept. */
  usage?: () => Promise<UsageCostRow[]>;
  /** GPU-hours, their cost and the tokens served while metered, per model; absent = gpu_prices is empty. */
  gpuTotals?: () => Promise<ReadonlyMap<string, GpuTotals>>;
  audit: (actor: AuditActor, action: string, target: string, detail: Record<string, unknown>) => void | Promise<void>;
}

export function registerBudgetAdmin(fastify: FastifyInstance, deps: BudgetAdminDeps): void {
  const app = fastify.withTypeProvider<ZodTypeProvider>();
  const views = moneyViews(deps);
  const view = (budgets: BudgetRecord[]) => views.budgets(null, budgets);
  const find = async (id: string) => {
    const b = (await deps.book.list()).find((x) => x.id === id);
    if (!b) throw new LlmgwError('LLMGW_NOT_FOUND', `no budget has the id "${id}"; \`GET /api/v1/budgets\` lists them`);
    return b;
  };

  /** A team-admin acts on its own teams' budgets (and its teams' keys') only. */
  const inScope = (request: FastifyRequest, b: { scope: string; subject: string }) =>
    views.inScope(teamsInScope(request), b);
  const refuseOutOfScope = (b: { scope: string; subject: string }) =>
    new LlmgwError('LLMGW_FORBIDDEN', `${b.scope} ${b.subject} is not in a team you administer`);

  app.get('/api/v1/budgets', needs('budgets.read'), async (request) => ({
    budgets: await views.budgets(teamsInScope(request)),
  }));

  app.post(
    '/api/v1/budgets',
    {
      schema: { body: NewBudgetSchema.prefault({} as z.input<typeof NewBudgetSchema>) },
      ...needs('budgets.write', { invalidBody: 'the budget is not valid' }),
    },
    async (request, reply) => {
      const body = request.body;
      if (!inScope(request, body)) throw refuseOutOfScope(body);
      if (body.scope === 'team' && !deps.teamExists(body.subject))
        throw new LlmgwError(
          'LLMGW_BAD_REQUEST',
          `subject: no team is named "${body.subject}"; \`llmgw ctl teams\` lists them`,
        );
      if (body.scope === 'key' && !deps.keyExists(body.subject))
        throw new LlmgwError(
          'LLMGW_BAD_REQUEST',
          `subject: no key has the id "${body.subject}"; \`llmgw ctl keys ls\` lists them`,
        );
      const enforce = body.enforce ?? 'hard';
      const actor = actorOf(request);
      const budget: BudgetRecord = {
        id: `bud_${randomUUID().replace(/-/g, '').slice(0, 12)}`,
        scope: body.scope,
        subject: body.subject,
        unit: body.unit,
        period: body.period,
        amount: body.amount,
        enforce,
        alertAt: body.alert_at ?? (enforce === 'soft' ? 0.8 : 1),
        createdAtMs: deps.now(),
        createdBy: actorText(actor),
      };
      await deps.book.create(budget);
      await deps.changed();
      await deps.audit(actor, 'budget.create', budget.id, { ...body });
      return reply.code(201).send((await view([budget]))[0]);
    },
  );

  app.post(
    '/api/v1/budgets/:id',
    {
      schema: { params: z.object({ id: z.string() }), body: ChangeSchema.prefault({}) },
      ...needs('budgets.write', { invalidBody: 'the change is not valid' }),
    },
    async (request) => {
      const old = await find(request.params.id);
      if (!inScope(request, old)) throw refuseOutOfScope(old);
      const body = request.body;
      const budget: BudgetRecord = {
        ...old,
        ...(body.amount !== undefined ? { amount: body.amount } : {}),
        ...(body.enforce !== undefined ? { enforce: body.enforce } : {}),
        ...(body.alert_at !== undefined ? { alertAt: body.alert_at } : {}),
      };
      await deps.book.update(budget);
      await deps.changed();
      await deps.audit(actorOf(request), 'budget.set', budget.id, { ...body });
      return (await view([budget]))[0];
    },
  );

  app.delete(
    '/api/v1/budgets/:id',
    { schema: { params: z.object({ id: z.string() }) }, ...needs('budgets.write') },
    async (request) => {
      const b = await find(request.params.id);
      if (!inScope(request, b)) throw refuseOutOfScope(b);
      await deps.book.delete(b.id);
      await deps.changed();
      await deps.audit(actorOf(request), 'budget.delete', b.id, {});
      return { id: b.id, state: 'deleted' };
    },
  );

  // A team-admin's spend is its teams' keys' only.
  app.get('/api/v1/spend', needs('usage.read'), async (request) => views.spend(teamsInScope(request)));
}
