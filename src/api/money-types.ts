// The wire shapes of teams, budgets and spend (src/control/teams,
// src/control/budgets), apart from types.ts so one feature's shapes read
// together.

/** GET /api/v1/teams: a team; its limits cap each of its keys'. */
export interface TeamView {
  name: string;
  /** Null = every model. */
  allowed_models: string[] | null;
  /** Each key's ceiling; null = none. */
  requests_per_minute: number | null;
  tokens_per_minute: number | null;
  /** Its fair-share weight when a model queues requests: 2 = twice the turns of a team of weight 1. */
  weight: number;
  /** Live keys in it. */
  keys: number;
  created_at: string;
  created_by: string;
  updated_at: string;
}

/** POST /api/v1/teams. */
export interface NewTeam {
  name: string;
  allowed_models?: string[] | null;
  requests_per_minute?: number | null;
  tokens_per_minute?: number | null;
  /** Absent = 1 (or unchanged). */
  weight?: number;
}

/** POST /api/v1/teams/{name}: only the fields named change; null clears one. */
export type TeamChange = Omit<NewTeam, 'name'>;

/** GET /api/v1/budgets: a budget and what its current period spent. */
export interface BudgetView {
  id: string;
  /** 'team' (subject: the team's name) or 'key' (subject: the key's id). */
  scope: 'team' | 'key';
  subject: string;
  /** 'tokens' (prompt and completion) or 'usd'. */
  unit: 'tokens' | 'usd';
  /** UTC day or month. */
  period: 'day' | 'month';
  amount: number;
  /** hard: 429 past the amount; soft: an event and a metric at alert_at. */
  enforce: 'hard' | 'soft';
  /** Fraction of the amount at which the event is written. */
  alert_at: number;
  /** What this period spent as the store knows it (every control plane's reports; a lease's use shows at its next report). */
  spent: number;
  /** Spent plus what control planes hold in leases. */
  committed: number;
  period_start: string;
  resets_at: string;
  created_at: string;
  created_by: string;
}

/** POST /api/v1/budgets. */
export interface NewBudget {
  scope: 'team' | 'key';
  subject: string;
  unit: 'tokens' | 'usd';
  period: 'day' | 'month';
  amount: number;
  /** Absent = hard. */
  enforce?: 'hard' | 'soft';
  /** Absent = 0.8 for a soft budget, 1 for a hard one. */
  alert_at?: number;
}

/** POST /api/v1/budgets/{id}. */
export interface BudgetChange {
  amount?: number;
  enforce?: 'hard' | 'soft';
  alert_at?: number;
}

/** One line of spend: requests, tokens and US dollars. */
export interface SpendLine {
  requests: number;
  prompt_tokens: number;
  completion_tokens: number;
  cost_usd: number;
}

/** GET /api/v1/spend: spend per team, key and model since the store was made, and what each model measurably costs. */
export interface SpendView {
  teams: (SpendLine & { team: string })[];
  keys: (SpendLine & { key_id: string; team: string })[];
  models: (SpendLine & {
    model: string;
    /** The catalog's price, US dollars per million tokens; null = none (derived from GPU-hours, or unknown). */
    price: { input_per_million: number; output_per_million: number } | null;
    /** GPU-hours its replicas held, at the configured prices per GPU class. */
    gpu_hours: number;
    gpu_cost_usd: number;
    /** What a million tokens cost: the GPU cost over the tokens served, else the usage's own cost; null = no tokens yet. */
    measured_usd_per_million: number | null;
  })[];
}
