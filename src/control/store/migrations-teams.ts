// Migrations 0017_teams and 0018_usage_cost: teams (every key in one, a
// `default` team for the keys made before), budgets, and what usage cost.
// Apart from migrations.ts so that file stays a list; like every migration,
// never edited once landed.
import { sql, type Kysely, type Migration } from 'kysely';

/** The team every key made before teams belongs to, and every key made without naming one. */
export const DEFAULT_TEAM = 'default';

export function teamsMigration(): Migration {
  return {
    async up(db: Kysely<unknown>) {
      await db.schema
        .createTable('teams')
        .addColumn('name', 'text', (c) => c.primaryKey())
        .addColumn('allowed_models', 'text')
        .addColumn('requests_per_minute', 'integer')
        .addColumn('tokens_per_minute', 'integer')
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('created_by', 'text', (c) => c.notNull())
        .addColumn('updated_at', 'bigint', (c) => c.notNull())
        .execute();
      const now = Date.now();
      await sql`INSERT INTO teams (name, allowed_models, requests_per_minute, tokens_per_minute, created_at, created_by, updated_at)
        VALUES (${DEFAULT_TEAM}, NULL, NULL, NULL, ${now}, 'migration 0017_teams', ${now})`.execute(db);
      // Both dialects add a NOT NULL column with a default in place, filling every existing key.
      await db.schema
        .alterTable('api_keys')
        .addColumn('team', 'text', (c) => c.notNull().defaultTo(DEFAULT_TEAM))
        .execute();
      await db.schema
        .createTable('budgets')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('scope', 'text', (c) => c.notNull())
        .addColumn('subject', 'text', (c) => c.notNull())
        .addColumn('unit', 'text', (c) => c.notNull())
        .addColumn('period', 'text', (c) => c.notNull())
        .addColumn('amount', 'double precision', (c) => c.notNull())
        .addColumn('enforce', 'text', (c) => c.notNull())
        .addColumn('alert_at', 'double precision', (c) => c.notNull())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('created_by', 'text', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('budgets_subject').on('budgets').columns(['scope', 'subject']).execute();
    },
  };
}

export function usageCostMigration(): Migration {
  return {
    async up(db: Kysely<unknown>) {
      // Rows from before prices were kept cost nothing: what they cost is not known, and 0 says so in the sums.
      await db.schema
        .alterTable('usage')
        .addColumn('cost_usd', 'double precision', (c) => c.notNull().defaultTo(0))
        .execute();
      await db.schema
        .createTable('budget_spend')
        .addColumn('budget_id', 'text', (c) => c.notNull())
        .addColumn('period_start', 'bigint', (c) => c.notNull())
        .addColumn('committed', 'double precision', (c) => c.notNull())
        .addColumn('spent', 'double precision', (c) => c.notNull())
        .addColumn('updated_at', 'bigint', (c) => c.notNull())
        .addPrimaryKeyConstraint('budget_spend_pk', ['budget_id', 'period_start'])
        .execute();
      await db.schema
        .createTable('model_gpu_cost')
        .addColumn('model', 'text', (c) => c.primaryKey())
        .addColumn('gpu_hours', 'double precision', (c) => c.notNull())
        .addColumn('cost_usd', 'double precision', (c) => c.notNull())
        .addColumn('updated_at', 'bigint', (c) => c.notNull())
        .execute();
    },
  };
}
