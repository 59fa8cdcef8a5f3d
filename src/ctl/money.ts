// Teams, budgets and spend: `teams ls|create|set|rm`, `budgets
// ls|create|set|rm` and `usage --by team|key|model`. Apart from access.ts
// (keys and usage counts) because these are about who may spend what and
// what it cost, the part of ctl an organisation's budget holder reads.
import type { BudgetView, NewBudget, NewTeam, SpendLine, TeamChange } from '../api/index.js';
import { type CtlContext, EXIT } from './context.js';
import { KeyFlagError } from './access.js';

export interface TeamFlags {
  models?: string;
  rpm?: string;
  tpm?: string;
  weight?: string;
}

/**
 * The limits a `teams create|set` asks for; `all` for --models and `none`
 * for --rpm/--tpm clear a limit (only meaningful for set). Throws
 * KeyFlagError naming the flag.
 */
export function teamLimitsFrom(o: TeamFlags): TeamChange {
  const out: TeamChange = {};
  if (o.models !== undefined) {
    if (o.models.trim() === 'all') out.allowed_models = null;
    else {
      const models = o.models
        .split(',')
        .map((m) => m.trim())
        .filter(Boolean);
      if (models.length === 0) throw new KeyFlagError('--models: want model names, comma-separated, or all');
      out.allowed_models = models;
    }
  }
  const perMinute = (flag: string, v: string | undefined): number | null | undefined => {
    if (v === undefined) return undefined;
    if (v.trim() === 'none') return null;
    const n = Number(v);
    if (!Number.isInteger(n) || n < 1)
      throw new KeyFlagError(`${flag}: "${v}" is not a whole number of 1 or more, or none`);
    return n;
  };
  const rpm = perMinute('--rpm', o.rpm);
  const tpm = perMinute('--tpm', o.tpm);
  if (rpm !== undefined) out.requests_per_minute = rpm;
  if (tpm !== undefined) out.tokens_per_minute = tpm;
  if (o.weight !== undefined) {
    const w = Number(o.weight);
    if (!Number.isFinite(w) || w < 0.01 || w > 1000)
      throw new KeyFlagError(`--weight: "${o.weight}" is not a number from 0.01 to 1000 (1 = an equal share)`);
    out.weight = w;
  }
  return out;
}

const limit = (n: number | null) => (n === null ? 'no limit' : String(n));

export async function listTeams(ctx: CtlContext): Promise<number> {
  const { teams } = await ctx.client.teams();
  if (ctx.json) {
    ctx.out.json({ teams });
    return EXIT.ok;
  }
  ctx.out.line(
    ctx.out.table(
      ['TEAM', 'KEYS', 'MODELS', 'REQ/MIN (EACH KEY)', 'TOK/MIN (EACH KEY)', 'WEIGHT', 'CREATED BY'],
      teams.map((t) => [
        t.name,
        String(t.keys),
        t.allowed_models === null ? 'all' : t.allowed_models.join(', ') || 'none',
        limit(t.requests_per_minute),
        limit(t.tokens_per_minute),
        String(t.weight ?? 1),
        t.created_by,
      ]),
    ),
  );
  return EXIT.ok;
}

export async function createTeam(ctx: CtlContext, team: NewTeam): Promise<number> {
  const t = await ctx.client.createTeam(team);
  if (ctx.json) ctx.out.json(t);
  else ctx.out.line(`created team ${t.name}; \`llmgw ctl keys create NAME --team ${t.name}\` makes a key in it`);
  return EXIT.ok;
}

export async function setTeam(ctx: CtlContext, name: string, change: TeamChange): Promise<number> {
  if (Object.keys(change).length === 0) {
    ctx.warn('teams set: name at least one of --models, --rpm, --tpm, --weight');
    return EXIT.usage;
  }
  const t = await ctx.client.setTeam(name, change);
  if (ctx.json) ctx.out.json(t);
  else
    ctx.out.line(
      `team ${t.name}: models ${t.allowed_models === null ? 'all' : t.allowed_models.join(', ')}, ${limit(t.requests_per_minute)} req/min, ${limit(t.tokens_per_minute)} tok/min per key, weight ${t.weight ?? 1}; its ${t.keys} key(s) follow at their next request`,
    );
  return EXIT.ok;
}

export async function deleteTeam(ctx: CtlContext, name: string, options: { yes: boolean }): Promise<number> {
  if (ctx.interactive && !options.yes && !(await ctx.confirm(`delete team ${name}? [y/N] `))) {
    ctx.warn(`team ${name} was not deleted`);
    return EXIT.failed;
  }
  const r = await ctx.client.deleteTeam(name);
  if (ctx.json) ctx.out.json(r);
  else ctx.out.line(`deleted team ${r.name}`);
  return EXIT.ok;
}

export interface BudgetFlags {
  team?: string;
  key?: string;
  tokens?: string;
  usd?: string;
  per?: string;
  soft?: boolean;
  alertAt?: string;
}

/** The request for `budgets create`; throws KeyFlagError naming the flag. */
export function newBudgetFrom(o: BudgetFlags): NewBudget {
  if ((o.team === undefined) === (o.key === undefined))
    throw new KeyFlagError('name the budget holder with exactly one of --team NAME or --key ID');
  if ((o.tokens === undefined) === (o.usd === undefined))
    throw new KeyFlagError('name the amount with exactly one of --tokens N or --usd AMOUNT');
  const raw = (o.tokens ?? o.usd)!;
  const amount = Number(raw);
  if (!Number.isFinite(amount) || amount <= 0)
    throw new KeyFlagError(`${o.tokens !== undefined ? '--tokens' : '--usd'}: "${raw}" is not a number above 0`);
  if (o.per !== 'day' && o.per !== 'month') throw new KeyFlagError(`--per: want day or month, not "${o.per ?? ''}"`);
  const budget: NewBudget = {
    scope: o.team !== undefined ? 'team' : 'key',
    subject: (o.team ?? o.key)!,
    unit: o.tokens !== undefined ? 'tokens' : 'usd',
    period: o.per,
    amount,
    enforce: o.soft ? 'soft' : 'hard',
  };
  if (o.alertAt !== undefined) {
    const a = Number(o.alertAt);
    if (!(a > 0 && a <= 1))
      throw new KeyFlagError(`--alert-at: "${o.alertAt}" is not a fraction above 0 and at most 1`);
    budget.alert_at = a;
  }
  return budget;
}

export function amountText(unit: 'tokens' | 'usd', n: number): string {
  return unit === 'usd' ? `$${n.toFixed(2)}` : `${Math.round(n)} tokens`;
}

export async function listBudgets(ctx: CtlContext): Promise<number> {
  const { budgets } = await ctx.client.budgets();
  if (ctx.json) {
    ctx.out.json({ budgets });
    return EXIT.ok;
  }
  if (budgets.length === 0) {
    ctx.out.line('no budget yet: `llmgw ctl budgets create --team NAME --tokens N --per day` makes one');
    return EXIT.ok;
  }
  ctx.out.line(
    ctx.out.table(
      ['ID', 'ON', 'AMOUNT', 'PER', 'ENFORCE', 'SPENT', 'USED', 'RESETS'],
      budgets.map((b: BudgetView) => {
        const used = b.amount > 0 ? b.spent / b.amount : 0;
        const pct = `${Math.round(used * 100)}%`;
        return [
          b.id,
          `${b.scope} ${b.subject}`,
          amountText(b.unit, b.amount),
          b.period,
          b.enforce === 'hard' ? 'hard' : `soft (alert at ${Math.round(b.alert_at * 100)}%)`,
          amountText(b.unit, b.spent),
          used >= 1 ? ctx.out.c.red(pct) : used >= b.alert_at ? ctx.out.c.yellow(pct) : pct,
          b.resets_at,
        ];
      }),
    ),
  );
  ctx.out.line(ctx.out.c.dim('spent as the store knows it: each control plane reports its leases every few seconds'));
  return EXIT.ok;
}

export async function createBudget(ctx: CtlContext, budget: NewBudget): Promise<number> {
  const b = await ctx.client.createBudget(budget);
  if (ctx.json) ctx.out.json(b);
  else
    ctx.out.line(
      `created budget ${b.id}: ${b.enforce} ${amountText(b.unit, b.amount)} per ${b.period} on ${b.scope} ${b.subject}`,
    );
  return EXIT.ok;
}

export async function deleteBudget(ctx: CtlContext, id: string, options: { yes: boolean }): Promise<number> {
  if (ctx.interactive && !options.yes && !(await ctx.confirm(`delete budget ${id}? [y/N] `))) {
    ctx.warn(`budget ${id} was not deleted`);
    return EXIT.failed;
  }
  const r = await ctx.client.deleteBudget(id);
  if (ctx.json) ctx.out.json(r);
  else ctx.out.line(`deleted budget ${r.id}`);
  return EXIT.ok;
}

const usd = (n: number) => `$${n.toFixed(n !== 0 && n < 0.01 ? 6 : 2)}`;
const spendCells = (l: SpendLine) => [
  String(l.requests),
  String(l.prompt_tokens),
  String(l.completion_tokens),
  usd(l.cost_usd),
];
const SPEND_HEAD = ['REQUESTS', 'PROMPT TOKENS', 'COMPLETION TOKENS', 'COST'];

/** `usage --by team|key|model`: spend, and per model what a million tokens measurably cost. */
export async function spend(ctx: CtlContext, by: 'team' | 'key' | 'model'): Promise<number> {
  const s = await ctx.client.spend();
  if (ctx.json) {
    ctx.out.json(by === 'team' ? s.teams : by === 'key' ? s.keys : s.models);
    return EXIT.ok;
  }
  if (by === 'team')
    ctx.out.line(
      ctx.out.table(
        ['TEAM', ...SPEND_HEAD],
        s.teams.map((t) => [t.team, ...spendCells(t)]),
      ),
    );
  else if (by === 'key')
    ctx.out.line(
      ctx.out.table(
        ['KEY', 'TEAM', ...SPEND_HEAD],
        s.keys.map((k) => [k.key_id, k.team, ...spendCells(k)]),
      ),
    );
  else
    ctx.out.line(
      ctx.out.table(
        ['MODEL', ...SPEND_HEAD, 'PRICE IN/OUT PER 1M', 'GPU-HOURS', 'GPU COST', 'MEASURED PER 1M'],
        s.models.map((m) => [
          m.model,
          ...spendCells(m),
          m.price ? `${usd(m.price.input_per_million)} / ${usd(m.price.output_per_million)}` : 'from GPU-hours',
          m.gpu_hours !== 0 && m.gpu_hours < 0.01 ? m.gpu_hours.toPrecision(2) : m.gpu_hours.toFixed(2),
          usd(m.gpu_cost_usd),
          m.measured_usd_per_million === null ? '-' : usd(m.measured_usd_per_million),
        ]),
      ),
    );
  ctx.out.line(
    ctx.out.c.dim('US dollars at the prices in force when each request ran; counted since the store was made'),
  );
  return EXIT.ok;
}
