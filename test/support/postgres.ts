// A fresh Postgres database per test file, from the server named by
// LLMGW_TEST_POSTGRES (a URL to a database we may create others from).
// Unset: the Postgres half of a suite is skipped and says why. Set but
// unreachable: a failure, because CI sets it exactly when a server must be there.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { describe, it } from 'vitest';
import type { StoreLocation } from '../../src/control/store/connection.js';

export const POSTGRES_URL = process.env.LLMGW_TEST_POSTGRES ?? '';
export const POSTGRES_SKIP_REASON = POSTGRES_URL
  ? ''
  : 'LLMGW_TEST_POSTGRES is not set, so the Postgres half of this suite is skipped (.ci/run starts a server and sets it)';

export interface TestDatabase {
  url: string;
  drop(): Promise<void>;
}

export async function createTestDatabase(): Promise<TestDatabase> {
  if (!POSTGRES_URL) throw new Error(POSTGRES_SKIP_REASON);
  const name = `llmgw_test_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: POSTGRES_URL, connectionTimeoutMillis: 5000 });
  try {
    await admin.connect();
  } catch (err) {
    throw new Error(`LLMGW_TEST_POSTGRES is set but no server answers at it: ${(err as Error).message}`);
  }
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(POSTGRES_URL);
  url.pathname = `/${name}`;
  return {
    url: url.href,
    async drop() {
      const c = new pg.Client({ connectionString: POSTGRES_URL });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await c.end();
    },
  };
}

/**
 * A describe block that needs LLMGW_TEST_POSTGRES: skipped, saying why, when
 * it is unset on a developer's machine; a failing test when CI is set and it
 * is not, because there a skipped suite would pass for the wrong reason.
 */
export function describePostgres(name: string, fn: () => void): void {
  if (POSTGRES_URL) {
    describe(name, fn);
    return;
  }
  if (process.env.CI) {
    describe(name, () => {
      it('has a Postgres server to run against', () => {
        throw new Error(
          `CI is set but LLMGW_TEST_POSTGRES is not: "${name}" needs a Postgres server (.ci/run starts one and sets it)`,
        );
      });
    });
    return;
  }
  describe.skip(`${name} (skipped: ${POSTGRES_SKIP_REASON})`, fn);
}

/** Where a suite run on every dialect keeps its store: a fresh SQLite file, or a fresh Postgres database. */
export interface StoreBackend {
  name: 'sqlite' | 'postgres';
  /** Why it is skipped; '' = it runs. */
  skip: string;
  setup(): Promise<{ location: StoreLocation; teardown(): Promise<void> }>;
}

/** SQLite always, Postgres where LLMGW_TEST_POSTGRES names a server; `prefix` names the SQLite file's directory. */
export function storeBackends(prefix: string): StoreBackend[] {
  return [
    {
      name: 'sqlite',
      skip: '',
      async setup() {
        const dir = mkdtempSync(join(tmpdir(), `${prefix}-`));
        return {
          location: { kind: 'sqlite', path: join(dir, 'llmgw.db') },
          teardown: async () => rmSync(dir, { recursive: true, force: true }),
        };
      },
    },
    {
      name: 'postgres',
      skip: POSTGRES_SKIP_REASON,
      async setup() {
        const db = await createTestDatabase();
        return { location: { kind: 'postgres', url: db.url }, teardown: () => db.drop() };
      },
    },
  ];
}
