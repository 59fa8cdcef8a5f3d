// Usage in the store, per endpoint, on every dialect: SQLite always,
// Postgres where LLMGW_TEST_POSTGRES names a server. The migration that
// added the endpoint (0013) is run over a store holding rows from before it,
// because a primary key cannot change in place on SQLite and a rebuild that
// lost or doubled a row would misstate what every key spent.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Migrator, type Kysely } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { storeBackends } from '../../../test/support/postgres.js';
import { StaticMigrationProvider } from '../store/migrations.js';
import { openPostgres, openSqlite, Store, type Database } from '../store/index.js';
import { StoreConnection, type StoreLocation } from '../store/connection.js';
import { issueKey } from './keys.js';
import { StoredKeys, StoredUsage } from './stored.js';

function open(location: StoreLocation): { db: Kysely<Database>; dialect: 'sqlite' | 'postgres' } {
  return location.kind === 'sqlite' ? openSqlite(location.path) : openPostgres(location.url);
}

for (const backend of storeBackends('llmgw-usage')) {
  describe.skipIf(backend.skip !== '')(
    `usage per endpoint on ${backend.name}${backend.skip ? ` (skipped: ${backend.skip})` : ''}`,
    () => {
      let location: StoreLocation;
      let teardown: () => Promise<void>;

      beforeAll(async () => {
        ({ location, teardown } = await backend.setup());
        // The store as llmgw left it before usage was kept per endpoint, with rows in it.
        const { db, dialect } = open(location);
        const { error } = await new Migrator({ db, provider: new StaticMigrationProvider(dialect) }).migrateTo(
          '0012_engine_secrets',
        );
        expect(error).toBeUndefined();
        const old = db as unknown as Kysely<{ usage: Omit<Database['usage'], 'endpoint'> }>;
        await old
          .insertInto('usage')
          .values([
            {
              key_id: 'key_a',
              model: 'alpha',
              requests: 5,
              errors: 1,
              prompt_tokens: 50,
              completion_tokens: 20,
              updated_at: 1,
            },
            {
              key_id: 'key_b',
              model: 'alpha',
              requests: 2,
              errors: 0,
              prompt_tokens: 7,
              completion_tokens: 3,
              updated_at: 1,
            },
          ])
          .execute();
        await db.destroy();
      });
      afterAll(async () => {
        await teardown();
      });

      it('keeps the rows from before as endpoint unknown, and counts each endpoint apart from then on', async () => {
        const store = await StoreConnection.open({ location });
        const usage = new StoredUsage(store, () => 2, 0);
        expect(await usage.list(), 'every old row, under endpoint unknown').toEqual([
          {
            key_id: 'key_a',
            model: 'alpha',
            endpoint: 'unknown',
            requests: 5,
            errors: 1,
            prompt_tokens: 50,
            completion_tokens: 20,
          },
          {
            key_id: 'key_b',
            model: 'alpha',
            endpoint: 'unknown',
            requests: 2,
            errors: 0,
            prompt_tokens: 7,
            completion_tokens: 3,
          },
        ]);
        usage.record({
          keyId: 'key_a',
          model: 'alpha',
          endpoint: 'chat',
          promptTokens: 3,
          completionTokens: 4,
          status: 200,
        });
        usage.record({
          keyId: 'key_a',
          model: 'alpha',
          endpoint: 'rerank',
          promptTokens: 9,
          completionTokens: 0,
          status: 200,
        });
        usage.record({
          keyId: 'key_a',
          model: 'alpha',
          endpoint: 'rerank',
          promptTokens: 1,
          completionTokens: 0,
          status: 400,
        });
        await usage.flush();
        usage.record({
          keyId: 'key_a',
          model: 'alpha',
          endpoint: 'chat',
          promptTokens: 1,
          completionTokens: 1,
          status: 200,
        });
        await usage.close();
        const rows = await new StoredUsage(store, () => 3, 0).list();
        expect(rows.filter((r) => r.key_id === 'key_a')).toEqual([
          {
            key_id: 'key_a',
            model: 'alpha',
            endpoint: 'chat',
            requests: 2,
            errors: 0,
            prompt_tokens: 4,
            completion_tokens: 5,
          },
          {
            key_id: 'key_a',
            model: 'alpha',
            endpoint: 'rerank',
            requests: 2,
            errors: 1,
            prompt_tokens: 10,
            completion_tokens: 0,
          },
          {
            key_id: 'key_a',
            model: 'alpha',
            endpoint: 'unknown',
            requests: 5,
            errors: 1,
            prompt_tokens: 50,
            completion_tokens: 20,
          },
        ]);
        expect(
          (await new StoredUsage(store, () => 3, 0).list({ endpoint: 'rerank' })).map((r) => [
            r.key_id,
            r.endpoint,
            r.requests,
          ]),
          'one endpoint',
        ).toEqual([['key_a', 'rerank', 2]]);
        await store.close();
      });
    },
  );
}

describe('revocations heard from the store', () => {
  // A key revoked on one control plane left its streams running on the others: they learnt of it only at the
  // next request. Each instance's StoredKeys now tells its router of every revocation it reads.
  it('tells listeners of a key revoked here, and of one another instance revoked, once each', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-revoked-'));
    const path = join(dir, 'llmgw.db');
    const here = await Store.open({ location: { kind: 'sqlite', path } });
    const there = await Store.open({ location: { kind: 'sqlite', path } });
    try {
      const mine = await StoredKeys.create(here.connection);
      const theirs = await StoredKeys.create(there.connection);
      const heard: string[] = [];
      mine.onRevoked((id) => heard.push(`here:${id}`));
      const a = await issueKey(mine, { name: 'a' }, 1, 'test');
      const b = await issueKey(mine, { name: 'b' }, 1, 'test');
      await theirs.reload();
      expect(await mine.revoke(a.record.id, 2)).toBe(true);
      expect(heard, 'a revocation made here').toEqual([`here:${a.record.id}`]);
      expect(await theirs.revoke(b.record.id, 3)).toBe(true);
      await mine.reload();
      await mine.reload();
      expect(heard, 'one another instance made, read here once').toEqual([
        `here:${a.record.id}`,
        `here:${b.record.id}`,
      ]);
    } finally {
      await here.close();
      await there.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
