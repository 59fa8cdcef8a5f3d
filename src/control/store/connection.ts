// The store's connection: one Kysely handle over SQLite or Postgres with its
// schema brought up to date, the leader fence that guards replica writes, and
// the few places where the two dialects' SQL differs (NOTIFY, row locks).
// Apart from the repositories so that each of them reads and writes one kind
// of record over a connection it is given, and none opens a database or
// asks which dialect it is on.
import { type Kysely, Migrator, sql, type Transaction } from 'kysely';
import { LlmgwError, StaleLeaderError } from '../../errors/index.js';
import { type Dialect, StaticMigrationProvider } from './migrations.js';
import { openPostgres } from './postgres.js';
import type { Database } from './schema.js';
import { openSqlite, type StoreWarning } from './sqlite.js';

export type StoreLocation = { kind: 'sqlite'; path: string } | { kind: 'postgres'; url: string };

export interface StoreOptions {
  location: StoreLocation;
  /** Epoch ms; injected so tests control time. */
  now?: () => number;
  /** Told of something an operator should fix but that does not stop the store (a database file others can read); absent = silent. */
  onWarning?: StoreWarning;
}

/**
 * What a leading control plane holds: the role's name in the leadership
 * table and the epoch it acquired. With a fence set, every replica and shard
 * write first checks (under a share lock on the leadership row, so an
 * acquisition waits for the write to commit) that the stored epoch is still
 * this one, and throws StaleLeaderError when it is not.
 */
export interface LeaderFence {
  readonly role: string;
  /** The epoch this instance holds; null = it does not lead now (every fenced write is refused). */
  epoch(): number | null;
  /** Told when a write was refused because the store moved on: the holder steps down. */
  onStale?(err: StaleLeaderError): void;
}

/** What changed, as sent on CHANGES_CHANNEL; other instances reload that part. */
export type ChangeTopic = 'catalog' | 'keys' | 'nodes' | 'replicas';

/** The Postgres channel on which writes announce themselves (NOTIFY is sent at commit, so a listener reads committed rows). */
export const CHANGES_CHANNEL = 'llmgw_changes';

/** The database a query runs on: the connection itself, or a transaction on it. */
export type Queryable = Kysely<Database> | Transaction<Database>;

export class StoreConnection {
  private fence: LeaderFence | null = null;

  private constructor(
    readonly db: Kysely<Database>,
    readonly dialect: Dialect,
    /** Where the store is, for messages: "Postgres at db:5432" or "SQLite at <path>"; never credentials. */
    readonly where: string,
    /** Epoch ms; what every repository stamps its writes with. */
    readonly now: () => number,
  ) {}

  /** Opens the store and brings its schema up to date. */
  static async open(options: StoreOptions): Promise<StoreConnection> {
    const { location } = options;
    const opened =
      location.kind === 'sqlite' ? openSqlite(location.path, options.onWarning) : openPostgres(location.url);
    const connection = new StoreConnection(opened.db, opened.dialect, opened.where, options.now ?? Date.now);
    await connection.migrate(location);
    return connection;
  }

  private async migrate(location: StoreLocation): Promise<void> {
    // Unordered: migrations written in parallel (0005 beside 0006) may land in either order, and a store that
    // ran the later number first must still take the earlier one rather than refuse to start.
    const migrator = new Migrator({
      db: this.db,
      provider: new StaticMigrationProvider(this.dialect),
      allowUnorderedMigrations: true,
    });
    const { error, results } = await migrator.migrateToLatest();
    if (error) {
      await this.db.destroy();
      const failed = results?.find((r) => r.status === 'Error')?.migrationName;
      const where = location.kind === 'sqlite' ? location.path : 'Postgres';
      // At start-up "admin writes are refused" would mislead: nothing starts. Report the connection's own error.
      const unwrapped = error instanceof LlmgwError && error.code === 'LLMGW_STORE_UNAVAILABLE' ? error.cause : error;
      const cause = unwrapped as Error & { code?: string };
      if (cause.code === 'ECONNREFUSED' || cause.code === 'ENOTFOUND' || /connect|timeout/i.test(cause.message)) {
        throw new LlmgwError('LLMGW_STORE_UNAVAILABLE', `cannot reach the store (${where}): ${cause.message}`, {
          cause,
        });
      }
      throw new LlmgwError(
        'LLMGW_STORE_MIGRATION',
        `cannot bring the store at ${where} up to date${failed ? ` (migration ${failed})` : ''}: ${cause.message}`,
        { cause },
      );
    }
  }

  async close(): Promise<void> {
    await this.db.destroy();
  }

  /** Fences replica and shard writes from now on (Postgres with several instances); null removes the fence. */
  setLeaderFence(fence: LeaderFence | null): void {
    this.fence = fence;
  }

  /** Throws StaleLeaderError when a fence is set and the store's epoch is not the one held. */
  async checkFence(tx: Transaction<Database>): Promise<void> {
    const fence = this.fence;
    if (!fence) return;
    const held = fence.epoch();
    if (held === null) throw new StaleLeaderError(fence.role, null, null);
    // FOR SHARE: an instance acquiring the role (UPDATE … epoch + 1) waits for this write to commit, so
    // it reads the replicas only after every write the old epoch could still make.
    let query = tx.selectFrom('leadership').select('epoch').where('name', '=', fence.role);
    if (this.dialect === 'postgres') query = query.forShare();
    const row = await query.executeTakeFirst();
    const current = row ? Number(row.epoch) : null;
    if (current !== held) {
      const err = new StaleLeaderError(fence.role, held, current);
      fence.onStale?.(err);
      throw err;
    }
  }

  /**
   * Tells the other instances that `topic` changed (Postgres only; SQLite has
   * one instance). Inside a transaction it is sent at commit, never for a
   * write that rolled back.
   */
  async announce(db: Queryable, topic: ChangeTopic): Promise<void> {
    if (this.dialect !== 'postgres') return;
    await sql`select pg_notify(${CHANGES_CHANNEL}, ${topic})`.execute(db);
  }

  /**
   * True where the database commits one transaction at a time, each with its
   * own fsync (SQLite), so writes that arrive together are worth grouping
   * (group-commit.ts); Postgres groups concurrent commits by itself.
   */
  get commitsOneAtATime(): boolean {
    return this.dialect === 'sqlite';
  }

  /**
   * The select with FOR UPDATE where the dialect has row locks (Postgres);
   * as it is on SQLite, which runs one write transaction at a time anyway.
   */
  forUpdate<Q extends { forUpdate(): Q }>(query: Q): Q {
    return this.dialect === 'postgres' ? query.forUpdate() : query;
  }
}
