// Opening a shared store: a pool of connections to Postgres, which several
// control planes may use at once. Apart from SQLite because what can go wrong
// differs: here the server can be away, or vanish under a checked-out client.
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { LlmgwError } from '../../errors/index.js';
import type { Database } from './schema.js';

const INT8_OID = 20;

/** Opens a pool to the database at `url`. Nothing connects until the first query (the migration, when opened as a store). */
export function openPostgres(url: string): { db: Kysely<Database>; dialect: 'postgres'; where: string } {
  const where = postgresWhere(url);
  const pool = new pg.Pool({
    connectionString: url,
    max: 10,
    connectionTimeoutMillis: 5000,
    // bigint columns hold epoch milliseconds, well inside a double's exact range.
    types: {
      getTypeParser: (oid: number, format?: string) =>
        oid === INT8_OID ? Number : pg.types.getTypeParser(oid, format as 'text'),
    } as never,
  });
  // An idle client losing its server must not crash the process; the next query reports it.
  pool.on('error', () => {});
  // A connection that cannot be made is the one failure every caller treats alike: the store is away.
  // Mapped here, once, so an admin write answers 503 with where the store is instead of a bare 500.
  const unreachable = storeUnavailable(where);
  // pg emits 'error' on a checked-out client that loses its server between two queries (inside a
  // transaction, say) and the pool listens only on idle ones: unheard, it would end the process. The
  // query in progress, or the next one, fails on its own; the pool drops the client on release.
  const heard = new WeakSet<pg.PoolClient>();
  const guarded = {
    connect: async () => {
      let client: pg.PoolClient;
      try {
        client = await pool.connect();
      } catch (err) {
        throw unreachable(err);
      }
      if (!heard.has(client)) {
        heard.add(client);
        client.on('error', () => {});
      }
      return client;
    },
    end: () => pool.end(),
  };
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool: guarded as unknown as pg.Pool }) });
  return { db, dialect: 'postgres', where };
}

/** "Postgres at host:port" from a connection URL, never its user or password. */
export function postgresWhere(url: string): string {
  try {
    const u = new URL(url);
    return `Postgres at ${u.hostname || 'localhost'}:${u.port || '5432'}`;
  } catch {
    return 'Postgres';
  }
}

/** Wraps a connection failure as LLMGW_STORE_UNAVAILABLE (503) naming the store and what to expect. */
function storeUnavailable(where: string): (err: unknown) => LlmgwError {
  return (err) => {
    if (err instanceof LlmgwError) return err;
    const message =
      err instanceof Error ? err.message || (err as Error & { code?: string }).code || 'unknown error' : String(err);
    return new LlmgwError(
      'LLMGW_STORE_UNAVAILABLE',
      `the store (${where}) is unreachable: ${message}; admin writes are refused until it returns`,
      { cause: err },
    );
  };
}
