// Group commit for SQLite: writes that arrive together share one transaction
// and so one fsync. The store runs SQLite with synchronous=FULL (an
// acknowledged write survives a power loss), and better-sqlite3 blocks the
// event loop for each commit's fsync, so a fleet joining at once after a
// restart (10,000 nodes) was held to one join per fsync: about 50 a second
// on a busy disk. Each write still runs alone, in its own savepoint, so one
// that fails (a lost race) rolls back only itself. Postgres commits
// concurrent transactions together by itself, so there each write keeps its
// own transaction.
import { sql, type Transaction } from 'kysely';
import type { Database } from './schema.js';
import type { StoreConnection } from './connection.js';

type Work<T> = (tx: Transaction<Database>) => Promise<T>;

interface Queued {
  work: Work<unknown>;
  resolve: (value: unknown) => void;
  reject: (err: unknown) => void;
}

/** Writes waiting for the next group, and whether a group is being written now. */
export class GroupCommit {
  private queue: Queued[] = [];
  private running = false;

  /** The most writes one group takes: bounds how long one commit holds the others up. */
  constructor(
    private readonly connection: StoreConnection,
    private readonly maxGroup = 256,
  ) {}

  /** Runs `work` in a transaction, shared with whatever else is waiting on SQLite; resolves after the commit. */
  run<T>(work: Work<T>): Promise<T> {
    if (!this.connection.commitsOneAtATime) return this.connection.db.transaction().execute(work);
    return new Promise<T>((resolve, reject) => {
      this.queue.push({ work, resolve: resolve as (value: unknown) => void, reject });
      if (!this.running) void this.drain();
    });
  }

  private async drain(): Promise<void> {
    this.running = true;
    try {
      while (this.queue.length > 0) {
        const group = this.queue.splice(0, this.maxGroup);
        const outcomes: ({ ok: true; value: unknown } | { ok: false; err: unknown })[] = [];
        try {
          await this.connection.db.transaction().execute(async (tx) => {
            for (const [i, item] of group.entries()) {
              await sql.raw(`savepoint w${i}`).execute(tx);
              try {
                outcomes.push({ ok: true, value: await item.work(tx) });
                await sql.raw(`release savepoint w${i}`).execute(tx);
              } catch (err) {
                outcomes.push({ ok: false, err });
                await sql.raw(`rollback to savepoint w${i}`).execute(tx);
                await sql.raw(`release savepoint w${i}`).execute(tx);
              }
            }
          });
        } catch (err) {
          // The commit itself failed (the disk, the file): nothing in the group was written.
          for (const item of group) item.reject(err);
          continue;
        }
        for (const [i, item] of group.entries()) {
          const outcome = outcomes[i]!;
          if (outcome.ok) item.resolve(outcome.value);
          else item.reject(outcome.err);
        }
      }
    } finally {
      this.running = false;
    }
  }
}
