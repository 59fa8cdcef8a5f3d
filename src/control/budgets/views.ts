// Budgets and spend as people read them, for the admin API and the
// dashboard alike (so a page cannot disagree with ctl): each budget with
// what its period spent and when it resets, and spend per team, key and
// model with the measured cost per million tokens. A team-admin's view is
// cut to its teams here, once, for both. The summing is pure (spendOf).
import type { BudgetView, SpendLine, SpendView } from '../../api/money-types.js';
import type { BudgetBook } from './book.js';
import { periodOf, type BudgetRecord } from './budgets.js';
import type { GpuTotals } from './gpu-meter.js';
import type { ModelPrice } from './prices.js';

export interface UsageCostRow {
  key_id: string;
  model: string;
  requests: number;
  prompt_tokens: number;
  completion_tokens: number;
  cost_usd: number;
}

/** The teams a reader may see; null = every team (every role but team-admin). */
export type TeamScope = readonly string[] | null;

/** A key id's team's name for rows whose key is gone or was anonymous. */
export const NO_TEAM = '(no team)';

/**
 * What a million tokens of a model cost: its GPU cost over the tokens served
 * while metered, else what its usage was charged over its tokens; null = no
 * tokens yet, or nothing to measure by.
 */
export function measuredPerMillion(gpu: GpuTotals | undefined, usageTokens: number, usageUsd: number): number | null {
  if (gpu && gpu.costUsd > 0) return gpu.tokens > 0 ? (gpu.costUsd / gpu.tokens) * 1_000_000 : null;
  return usageTokens > 0 && usageUsd > 0 ? (usageUsd / usageTokens) * 1_000_000 : null;
}

/**
 * Spend per team, key and model from usage rows and GPU totals. A scoped
 * reader sees its teams' keys only, and models as its teams used them; the
 * fleet's GPU-hours are shown only to readers of every team (they are
 * nobody's team's).
 */
export function spendOf(
  rows: readonly UsageCostRow[],
  gpu: ReadonlyMap<string, GpuTotals>,
  teamOf: (keyId: string) => string | undefined,
  priceOf: (model: string) => ModelPrice | undefined,
  scope: TeamScope,
): SpendView {
  const add = <K>(map: Map<K, SpendLine>, k: K, r: UsageCostRow) => {
    const l = map.get(k) ?? { requests: 0, prompt_tokens: 0, completion_tokens: 0, cost_usd: 0 };
    l.requests += r.requests;
    l.prompt_tokens += r.prompt_tokens;
    l.completion_tokens += r.completion_tokens;
    l.cost_usd += r.cost_usd;
    map.set(k, l);
  };
  const teams = new Map<string, SpendLine>();
  const keys = new Map<string, SpendLine>();
  const models = new Map<string, SpendLine>();
  for (const r of rows) {
    const team = teamOf(r.key_id) ?? NO_TEAM;
    if (scope !== null && !scope.includes(team)) continue;
    add(teams, team, r);
    add(keys, r.key_id, r);
    add(models, r.model, r);
  }
  const fleet = scope === null ? gpu : new Map<string, GpuTotals>();
  // A model that held GPUs and has served nothing yet is shown too: its GPU-hours are a cost.
  for (const model of fleet.keys())
    if (!models.has(model)) models.set(model, { requests: 0, prompt_tokens: 0, completion_tokens: 0, cost_usd: 0 });
  return {
    teams: [...teams].map(([team, l]) => ({ team, ...l })),
    keys: [...keys].map(([key_id, l]) => ({ key_id, team: teamOf(key_id) ?? NO_TEAM, ...l })),
    models: [...models].map(([model, l]) => {
      const g = fleet.get(model);
      return {
        model,
        ...l,
        price: priceOf(model) ?? null,
        gpu_hours: g?.gpuHours ?? 0,
        gpu_cost_usd: g?.costUsd ?? 0,
        measured_usd_per_million: measuredPerMillion(g, l.prompt_tokens + l.completion_tokens, l.cost_usd),
      };
    }),
  };
}

export interface MoneyViewDeps {
  book: BudgetBook;
  now: () => number;
  teamOf: (keyId: string) => string | undefined;
  priceOf: (model: string) => ModelPrice | undefined;
  /** Usage rows with their cost; absent = no store, nothing kept. */
  usage?: (() => Promise<UsageCostRow[]>) | undefined;
  /** GPU totals per model; absent = gpu_prices is empty. */
  gpuTotals?: (() => Promise<ReadonlyMap<string, GpuTotals>>) | undefined;
}

export interface MoneyViews {
  /** These budgets with their period's spend (all of them when `budgets` is absent), cut to `scope`. */
  budgets(scope: TeamScope, budgets?: readonly BudgetRecord[]): Promise<BudgetView[]>;
  spend(scope: TeamScope): Promise<SpendView>;
  /** Whether a budget on this scope and subject is a team's in `scope`. */
  inScope(scope: TeamScope, b: { scope: string; subject: string }): boolean;
}

export function moneyViews(deps: MoneyViewDeps): MoneyViews {
  const inScope = (scope: TeamScope, b: { scope: string; subject: string }) => {
    if (scope === null) return true;
    const team = b.scope === 'team' ? b.subject : deps.teamOf(b.subject);
    return team !== undefined && scope.includes(team);
  };
  return {
    inScope,
    async budgets(scope, given) {
      const budgets = (given ?? (await deps.book.list())).filter((b) => inScope(scope, b));
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
    },
    async spend(scope) {
      const rows = deps.usage ? await deps.usage() : [];
      const gpu = deps.gpuTotals ? await deps.gpuTotals() : new Map<string, GpuTotals>();
      return spendOf(rows, gpu, deps.teamOf, deps.priceOf, scope);
    },
  };
}
