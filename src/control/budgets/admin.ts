// The admin listener's routes over budgets and spend: list, create, change
// and delete budgets (the period's spend beside each), and GET /api/v1/spend,
// what each team, key and model spent in US dollars.
import { randomUUID } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { LlmgwError } from '../../errors/index.js';
import { actorOf, actorText, needs, teamsInScope, type AuditActor, type ZodTypeProvider } from '../../http/index.js';
import type { BudgetBook } from './book.js';
import { periodOf, type BudgetRecord } from './budgets.js';
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

export interface UsageCostRow {
  key_id: string;
  model: string;
  requests: number;
  prompt_tokens: number;
  completion_tokens: number;
  cost_usd: number;
}

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
  audit: (actor: AuditActor, action: string, target: string, detail: Record<string, unknown>) => void | Promise<void>;
}

export function registerBudgetAdmin(fastify: FastifyInstance, deps: BudgetAdminDeps): void {
  const app = fastify.withTypeProvider<ZodTypeProvider>();
  const view = async (budgets: BudgetRecord[]) => {
    const now = deps.now();
    const periods = budgets.map((b) => ({ budgetId: b.id, ...periodOf(b.period, now) }));
    const spend = await deps.book.spendOf(periods.map((p) => ({ budgetId: p.budgetId, periodStartMs: p.startMs })));
    return budgets.map((b, i) => ({
      id: b.id,
      scope: b.scope,
      subject: b.subject,
      unit: b.unit,
      period: b.period,
      amount: b.amount,
      enforce: b.enforce,
      alert_at: b.alertAt,
      spent: spend.get(b.id)?.spent ?? 0,
      committed: spend.get(b.id)?.committed ?? 0,
      period_start: new Date(periods[i]!.startMs).toISOString(),
      resets_at: new Date(periods[i]!.endMs).toISOString(),
      created_at: new Date(b.createdAtMs).toISOString(),
      created_by: b.createdBy,
    }));
  };
  const find = async (id: string) => {
    const b = (await deps.book.list()).find((x) => x.id === id);
    if (!b) throw new LlmgwError('LLMGW_NOT_FOUND', `no budget has the id "${id}"; \`GET /api/v1/budgets\` lists them`);
    return b;
  };

  /** A team-admin acts on its own teams' budgets (and its teams' keys') only. */
  const inScope = (request: FastifyRequest, b: { scope: string; subject: string }) => {
    const teams = teamsInScope(request);
    if (teams === null) return true;
    const team = b.scope === 'team' ? b.subject : deps.teamOf(b.subject);
    return team !== undefined && teams.includes(team);
  };
  const refuseOutOfScope = (b: { scope: string; subject: string }) =>
    new LlmgwError('LLMGW_FORBIDDEN', `${b.scope} ${b.subject} is not in a team you administer`);

  app.get('/api/v1/budgets', needs('budgets.read'), async (request) => ({
    budgets: await view((await deps.book.list()).filter((b) => inScope(request, b))),
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

  app.get('/api/v1/spend', needs('usage.read'), async () => {
    const rows = deps.usage ? await deps.usage() : [];
    type Line = { requests: number; prompt_tokens: number; completion_tokens: number; cost_usd: number };
    const add = <K>(map: Map<K, Line>, k: K, r: UsageCostRow) => {
      const l = map.get(k) ?? { requests: 0, prompt_tokens: 0, completion_tokens: 0, cost_usd: 0 };
      l.requests += r.requests;
      l.prompt_tokens += r.prompt_tokens;
      l.completion_tokens += r.completion_tokens;
      l.cost_usd += r.cost_usd;
      map.set(k, l);
    };
    const teams = new Map<string, Line>();
    const keys = new Map<string, Line>();
    const models = new Map<string, Line>();
    for (const r of rows) {
      add(teams, deps.teamOf(r.key_id) ?? '(no team)', r);
      add(keys, r.key_id, r);
      add(models, r.model, r);
    }
    return {
      teams: [...teams].map(([team, l]) => ({ team, ...l })),
      keys: [...keys].map(([key_id, l]) => ({ key_id, team: deps.teamOf(key_id) ?? '(no team)', ...l })),
      models: [...models].map(([model, l]) => {
        const tokens = l.prompt_tokens + l.completion_tokens;
        return {
          model,
          ...l,
          price: deps.priceOf(model) ?? null,
          gpu_hours: 0,
          gpu_cost_usd: 0,
          measured_usd_per_million: tokens > 0 && l.cost_usd > 0 ? (l.cost_usd / tokens) * 1_000_000 : null,
        };
      }),
    };
  });
}
