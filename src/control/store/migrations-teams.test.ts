// Migrations 0017_teams and 0018_usage_cost over a store holding keys and
// usage from before them, on SQLite and (LLMGW_TEST_POSTGRES) Postgres: a key
// left without a team, or a usage row lost or given a cost it never had,
// would misstate who may spend what and what was spent.
import { Migrator, type Kysely } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { storeBackends } from '../../../test/support/postgres.js';
import { StaticMigrationProvider } from './migrations.js';
import { openPostgres, openSqlite, type Database } from './index.js';
import { StoreConnection, type StoreLocation } from './connection.js';

const backends = storeBackends('llmgw-teams-mig');

for (const backend of backends) {
  describe.skipIf(backend.skip !== '')(`teams and usage cost migrations on ${backend.name}`, () => {
    let location: StoreLocation;
    let teardown: () => Promise<void>;
    beforeAll(async () => {
      ({ location, teardown } = await backend.setup());
      const { db, dialect } =
        location.kind === 'sqlite' ? openSqlite(location.path) : openPostgres((location as { url: string }).url);
      const { error } = await new Migrator({ db, provider: new StaticMigrationProvider(dialect) }).migrateTo(
        '0016_responses_per_key',
      );
      expect(error).toBeUndefined();
      const old = db as unknown as Kysely<Database>;
      await old
        .insertInto('api_keys')
        .values({
          id: 'key_old',
          name: 'ci',
          prefix: 'llmgw-abcdef',
          hash: 'h',
          allowed_models: null,
          requests_per_minute: 10,
          tokens_per_minute: null,
          expires_at: null,
          created_at: 1,
          created_by: 'test',
          revoked_at: null,
        })
        .execute();
      await old
        .insertInto('usage')
        .values({
          key_id: 'key_old',
          model: 'alpha',
          endpoint: 'chat',
          requests: 3,
          errors: 0,
          prompt_tokens: 30,
          completion_tokens: 12,
          updated_at: 1,
        })
        .execute();
      await db.destroy();
    });
    afterAll(async () => {
      await teardown();
    });

    it('puts every key made before in the default team, and costs every old usage row 0', async () => {
      const store = await StoreConnection.open({ location });
      try {
        const teams = await store.db.selectFrom('teams').selectAll().execute();
        expect(
          teams.map((t) => [t.name, t.allowed_models, t.requests_per_minute]),
          'one team, default, with no limits',
        ).toEqual([['default', null, null]]);
        const keys = await store.db.selectFrom('api_keys').select(['id', 'team', 'requests_per_minute']).execute();
        expect(keys, 'the old key keeps its limit and joins default').toEqual([
          { id: 'key_old', team: 'default', requests_per_minute: 10 },
        ]);
        const usage = await store.db.selectFrom('usage').selectAll().execute();
        expect(usage.map((u) => [u.key_id, Number(u.prompt_tokens), Number(u.cost_usd)])).toEqual([['key_old', 30, 0]]);
        // The new tables take rows: a budget and its spend in a period.
        await store.db
          .insertInto('budget_spend')
          .values({ budget_id: 'b1', period_start: 0, committed: 1.5, spent: 0.25, updated_at: 1 })
          .execute();
        const spend = await store.db.selectFrom('budget_spend').selectAll().executeTakeFirstOrThrow();
        expect([Number(spend.committed), Number(spend.spent)], 'fractions of a dollar survive').toEqual([1.5, 0.25]);
      } finally {
        await store.close();
      }
    });
  });
}
