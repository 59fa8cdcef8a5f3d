// Where budgets and their spend per period live: the store (several control
// planes share it through one row per budget and period, changed in one
// transaction per sync) or memory for a control plane without a store. The
// leases (leases.ts) call `sync` in the background, never on a request's path.
import type { StoreConnection } from '../store/index.js';
import type { BudgetRecord } from './budgets.js';

/** One control plane's sync of one budget's period. */
export interface SyncOp {
  readonly budgetId: string;
  readonly periodStartMs: number;
  /** The budget's amount: nothing is leased past it. */
  readonly amount: number;
  /** Spent here since the last sync. */
  readonly spentDelta: number;
  /** What this plane spent beyond what it was granted (on credit), now committed whatever is left. */
  readonly debt: number;
  /** A new lease to take, as much as is left up to this. */
  readonly want: number;
  /** Lease handed back unused (the period is over, or this plane is closing). */
  readonly giveBack: number;
}

export interface SyncResult {
  /** What was leased now, ≤ want. */
  readonly grant: number;
  /** After this sync: spent and leases out, summed over every plane. */
  readonly committed: number;
  /** After this sync: what every plane reported spent. */
  readonly spent: number;
}

export interface BudgetSpend {
  readonly committed: number;
  readonly spent: number;
}

export interface BudgetBook {
  list(): Promise<BudgetRecord[]>;
  create(b: BudgetRecord): Promise<void>;
  update(b: BudgetRecord): Promise<boolean>;
  delete(id: string): Promise<boolean>;
  sync(op: SyncOp): Promise<SyncResult>;
  /** Each budget's spend in the period starting at the given instant; absent = nothing spent yet. */
  spendOf(periods: readonly { budgetId: string; periodStartMs: number }[]): Promise<Map<string, BudgetSpend>>;
}

/** The arithmetic of one sync on one row: shared by both books so they cannot differ. */
export function applySync(row: BudgetSpend, op: SyncOp): SyncResult {
  let committed = row.committed + op.debt - op.giveBack;
  const grant = Math.max(0, Math.min(op.want, op.amount - committed));
  committed += grant;
  return { grant, committed, spent: row.spent + op.spentDelta };
}

export class MemoryBudgetBook implements BudgetBook {
  private readonly budgets = new Map<string, BudgetRecord>();
  private readonly rows = new Map<string, BudgetSpend>();

  async list(): Promise<BudgetRecord[]> {
    return [...this.budgets.values()].sort((a, b) => a.createdAtMs - b.createdAtMs || (a.id < b.id ? -1 : 1));
  }
  async create(b: BudgetRecord): Promise<void> {
    this.budgets.set(b.id, b);
  }
  async update(b: BudgetRecord): Promise<boolean> {
    if (!this.budgets.has(b.id)) return false;
    this.budgets.set(b.id, b);
    return true;
  }
  async delete(id: string): Promise<boolean> {
    return this.budgets.delete(id);
  }
  async sync(op: SyncOp): Promise<SyncResult> {
    const k = `${op.budgetId}\0${op.periodStartMs}`;
    const out = applySync(this.rows.get(k) ?? { committed: 0, spent: 0 }, op);
    this.rows.set(k, { committed: out.committed, spent: out.spent });
    return out;
  }
  async spendOf(periods: readonly { budgetId: string; periodStartMs: number }[]): Promise<Map<string, BudgetSpend>> {
    const out = new Map<string, BudgetSpend>();
    for (const p of periods) {
      const row = this.rows.get(`${p.budgetId}\0${p.periodStartMs}`);
      if (row) out.set(p.budgetId, row);
    }
    return out;
  }
}

export class StoredBudgetBook implements BudgetBook {
  constructor(private readonly store: StoreConnection) {}

  async list(): Promise<BudgetRecord[]> {
    const rows = await this.store.db.selectFrom('budgets').selectAll().orderBy('created_at').orderBy('id').execute();
    return rows.map((r) => ({
      id: r.id,
      scope: r.scope as BudgetRecord['scope'],
      subject: r.subject,
      unit: r.unit as BudgetRecord['unit'],
      period: r.period as BudgetRecord['period'],
      amount: Number(r.amount),
      enforce: r.enforce as BudgetRecord['enforce'],
      alertAt: Number(r.alert_at),
      createdAtMs: Number(r.created_at),
      createdBy: r.created_by,
    }));
  }

  async create(b: BudgetRecord): Promise<void> {
    await this.store.db
      .insertInto('budgets')
      .values({
        id: b.id,
        scope: b.scope,
        subject: b.subject,
        unit: b.unit,
        period: b.period,
        amount: b.amount,
        enforce: b.enforce,
        alert_at: b.alertAt,
        created_at: b.createdAtMs,
        created_by: b.createdBy,
      })
      .execute();
    await this.store.announce(this.store.db, 'keys');
  }

  async update(b: BudgetRecord): Promise<boolean> {
    const r = await this.store.db
      .updateTable('budgets')
      .set({ amount: b.amount, enforce: b.enforce, alert_at: b.alertAt })
      .where('id', '=', b.id)
      .executeTakeFirst();
    await this.store.announce(this.store.db, 'keys');
    return Number(r.numUpdatedRows) > 0;
  }

  async delete(id: string): Promise<boolean> {
    const r = await this.store.db.deleteFrom('budgets').where('id', '=', id).executeTakeFirst();
    await this.store.db.deleteFrom('budget_spend').where('budget_id', '=', id).execute();
    await this.store.announce(this.store.db, 'keys');
    return Number(r.numDeletedRows) > 0;
  }

  /** One transaction: the row locked (Postgres) or the database (SQLite), so two planes' syncs never lease the same room. */
  async sync(op: SyncOp): Promise<SyncResult> {
    return this.store.db.transaction().execute(async (tx) => {
      // Made first if absent, so the locking read below always finds a row to lock.
      await tx
        .insertInto('budget_spend')
        .values({ budget_id: op.budgetId, period_start: op.periodStartMs, committed: 0, spent: 0, updated_at: 0 })
        .onConflict((oc) => oc.columns(['budget_id', 'period_start']).doNothing())
        .execute();
      const row = await this.store
        .forUpdate(
          tx
            .selectFrom('budget_spend')
            .select(['committed', 'spent'])
            .where('budget_id', '=', op.budgetId)
            .where('period_start', '=', op.periodStartMs),
        )
        .executeTakeFirstOrThrow();
      const out = applySync({ committed: Number(row.committed), spent: Number(row.spent) }, op);
      await tx
        .updateTable('budget_spend')
        .set({ committed: out.committed, spent: out.spent, updated_at: this.store.now() })
        .where('budget_id', '=', op.budgetId)
        .where('period_start', '=', op.periodStartMs)
        .execute();
      return out;
    });
  }

  async spendOf(periods: readonly { budgetId: string; periodStartMs: number }[]): Promise<Map<string, BudgetSpend>> {
    const out = new Map<string, BudgetSpend>();
    if (periods.length === 0) return out;
    const rows = await this.store.db
      .selectFrom('budget_spend')
      .select(['budget_id', 'period_start', 'committed', 'spent'])
      .where(
        'budget_id',
        'in',
        periods.map((p) => p.budgetId),
      )
      .execute();
    const wanted = new Map(periods.map((p) => [p.budgetId, p.periodStartMs]));
    for (const r of rows)
      if (wanted.get(r.budget_id) === Number(r.period_start))
        out.set(r.budget_id, { committed: Number(r.committed), spent: Number(r.spent) });
    return out;
  }
}
