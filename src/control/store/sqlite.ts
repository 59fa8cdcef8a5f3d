// Opening the embedded store: one SQLite file beside the control plane. Apart
// from Postgres because what can go wrong differs: here it is the file (its
// directory, who else may read it, the journal), there the network.
import { closeSync, existsSync, mkdirSync, openSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { Kysely, SqliteDialect } from 'kysely';
import { LlmgwError } from '../../errors/index.js';
import type { Database } from './schema.js';

/** Told of something an operator should fix but that does not stop the store (a database file others can read). */
export type StoreWarning = (message: string, context: Record<string, unknown>) => void;

/** Opens (creating it if need be) the SQLite database at `path`; ':memory:' = a database that lives as long as the process. Absent `onWarning` = silent. */
export function openSqlite(
  path: string,
  onWarning?: StoreWarning,
): { db: Kysely<Database>; dialect: 'sqlite'; where: string } {
  let sqlite: BetterSqlite3.Database;
  try {
    if (path !== ':memory:') prepareSqliteFiles(path, onWarning);
    sqlite = new BetterSqlite3(path);
  } catch (err) {
    throw new LlmgwError(
      'LLMGW_STORE_UNAVAILABLE',
      `cannot open the SQLite store at ${path}: ${(err as Error).message}`,
      { cause: err },
    );
  }
  // WAL lets readers run beside the one writer; synchronous=FULL makes an
  // acknowledged write survive a kill -9 or power loss, which the admin
  // API promises; busy_timeout rides out a second process briefly holding the lock.
  sqlite.pragma('journal_mode = WAL');
  sqlite.pragma('synchronous = FULL');
  sqlite.pragma('foreign_keys = ON');
  sqlite.pragma('busy_timeout = 5000');
  const db = new Kysely<Database>({ dialect: new SqliteDialect({ database: sqlite }) });
  return { db, dialect: 'sqlite', where: `SQLite at ${path}` };
}

/**
 * The SQLite file holds key hashes, node credentials' hashes and each node's
 * management token, so only the control plane's user may read it: a new
 * directory is made 0700 and a new file 0600 (SQLite gives its -wal and -shm
 * files the database file's mode). An existing file or directory is left as
 * the operator set it, with a warning naming the path and its looser mode.
 */
function prepareSqliteFiles(path: string, warn: StoreWarning | undefined): void {
  const dir = dirname(path);
  if (!existsSync(dir)) mkdirSync(dir, { recursive: true, mode: 0o700 });
  else looserThan(dir, 0o700, 'directory', warn);
  if (!existsSync(path)) closeSync(openSync(path, 'wx', 0o600));
  else looserThan(path, 0o600, 'file', warn);
  for (const side of [`${path}-wal`, `${path}-shm`]) if (existsSync(side)) looserThan(side, 0o600, 'file', warn);
}

function looserThan(path: string, wanted: number, what: string, warn: StoreWarning | undefined): void {
  const mode = statSync(path).mode & 0o777;
  if ((mode & ~wanted) === 0) return;
  const octal = (m: number) => `0${m.toString(8).padStart(3, '0')}`;
  warn?.(
    `the SQLite store's ${what} ${path} has mode ${octal(mode)}, so other users of this machine can read node credentials and key hashes in it; run chmod ${octal(wanted)} ${path}`,
    { path, mode: octal(mode), wanted: octal(wanted) },
  );
}
