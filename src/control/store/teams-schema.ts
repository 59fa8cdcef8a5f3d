// The tables of teams, budgets and what they spent (migrations 0017_teams and
// 0018_usage_cost). Apart from schema.ts so the records of one feature read
// together; schema.ts names them in its Database.
import type { Generated } from 'kysely';

/** A team: the keys it holds inherit its limits and may only narrow them. */
export interface TeamsTable {
  name: string;
  /** JSON array of model names; null = every model. */
  allowed_models: string | null;
  /** Each of its keys' ceiling; null = no ceiling. */
  requests_per_minute: number | null;
  tokens_per_minute: number | null;
  created_at: number;
  created_by: string;
  updated_at: number;
  /** Its fair-share weight (0024); 1 for teams made before. */
  weight: Generated<number>;
}

/** A budget on a team or a key: tokens or US dollars, per UTC day or month. */
export interface BudgetsTable {
  id: string;
  /** 'team' (subject = the team's name) or 'key' (subject = the key's id). */
  scope: string;
  subject: string;
  /** 'tokens' or 'usd'. */
  unit: string;
  /** 'day' or 'month', in UTC. */
  period: string;
  amount: number;
  /** 'hard' refuses past the amount; 'soft' only tells (an event and a metric). */
  enforce: string;
  /** Fraction of the amount at which the event is written and the metric set, 0 < alert_at ≤ 1. */
  alert_at: number;
  created_at: number;
  created_by: string;
}

/**
 * What a budget committed in one period, summed over control planes:
 * `committed` is spent plus every lease still out (what no lease may take
 * again), `spent` what the leases' holders reported used.
 */
export interface BudgetSpendTable {
  budget_id: string;
  /** Epoch ms of the period's start (UTC midnight, or the month's first). */
  period_start: number;
  committed: number;
  spent: number;
  updated_at: number;
}

/** GPU-hours each model's replicas held and what they cost at the configured prices, accrued by the leader. */
export interface ModelGpuCostTable {
  model: string;
  gpu_hours: number;
  cost_usd: number;
  /** Tokens its replicas served while metered, summed over control planes (0025_gpu_prices). */
  tokens: number;
  updated_at: number;
}
