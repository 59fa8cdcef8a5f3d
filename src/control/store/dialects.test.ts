// Guards the store's shape: both dialects used to be inline in one 880-line
// Store class, and any method could branch on the dialect. Now only the
// connection, openSqlite/openPostgres and the migrations (which spell an
// auto-increment key per dialect) know which database they are on; a
// repository that needs a dialect's SQL asks the connection (announce,
// checkFence, forUpdate). A branch elsewhere would mean the contract suite
// no longer tells both dialects apart by running the same code.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';

const MAY_KNOW_THE_DIALECT = new Set(['connection.ts', 'sqlite.ts', 'postgres.ts', 'migrations.ts']);

it('keeps every branch on the dialect in the connection, the two open functions and the migrations', () => {
  const dir = dirname(fileURLToPath(import.meta.url));
  const sources = readdirSync(dir).filter(
    (f) => f.endsWith('.ts') && !f.endsWith('.test.ts') && !MAY_KNOW_THE_DIALECT.has(f),
  );
  expect(sources.length, 'the store folder has repositories to check').toBeGreaterThan(5);
  const branching = sources.filter((f) =>
    /\.dialect\b|['"](postgres|sqlite)['"]/.test(readFileSync(join(dir, f), 'utf8')),
  );
  expect(branching, 'these files ask which database they are on; ask the connection instead').toEqual([]);
});
