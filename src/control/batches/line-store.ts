// The queries on batch lines, one row per input line (migration 0023_batches),
// that the runner's durability rests on. A line is claimed with a lease
// (lease_owner, lease_until) by an UPDATE … RETURNING, so two runners on one
// Postgres never both hold it; its result and its done mark are one UPDATE
// that only the lease's holder can make, so a line is answered once even when
// a runner whose lease lapsed finishes it late. The base of BatchRepository
// (batch-store.ts), which adds the batches' own rows: apart so each file
// reads on its own; tested on both dialects in batch-store.test.ts.
import type { ExpressionBuilder } from 'kysely';
import type { Database } from '../store/schema.js';
import type { StoreConnection } from '../store/connection.js';
import { GroupCommit } from '../store/group-commit.js';

/** A line as the batch input gave it, to be stored at create. */
export interface NewLine {
  readonly line: number;
  readonly customId: string;
  readonly model: string;
}

/** A line a runner holds: run it, then finish() or retryLater() it under the same owner. */
export interface ClaimedLine {
  readonly batchId: string;
  readonly line: number;
  readonly customId: string;
  readonly model: string;
  /**
   * Tries of this line that failed (a 500, 502 or 504) before this one; 0 =
   * none. Not counted: waits for a busy gateway (429, 503, 408), nor a line
   * given back or taken over from a runner that died, none the line's doing.
   */
  readonly attempts: number;
}

export interface LineCounts {
  readonly total: number;
  readonly completed: number;
  readonly failed: number;
  /** Lines running under a live lease now. */
  readonly running: number;
  /** Lines neither done nor running under a live lease. */
  readonly waiting: number;
}

/** A done line, for writing the output and error files. */
export interface DoneLine {
  readonly line: number;
  readonly customId: string;
  readonly failed: boolean;
  readonly result: string | null;
  readonly errorCode: string | null;
}
export class BatchLines {
  /** Line ends share a transaction on SQLite: one fsync for many (store/group-commit.ts). */
  protected readonly commits: GroupCommit;

  constructor(protected readonly connection: StoreConnection) {
    this.commits = new GroupCommit(connection);
  }

  protected get db() {
    return this.connection.db;
  }

  /**
   * True while any line of the batch is not done (pending, or running under
   * any lease): one indexed row at most, where counts() groups every line.
   * The runner asks it of every active batch on every pass.
   */
  async anyOpen(batchId: string): Promise<boolean> {
    const r = await this.db
      .selectFrom('batch_lines')
      .select('line')
      .where('batch_id', '=', batchId)
      .where('state', 'in', ['pending', 'running'])
      .limit(1)
      .executeTakeFirst();
    return r !== undefined;
  }

  /** Every line counted by state: for the API's request_counts and the admin view, not for the runner's passes. */
  async counts(batchId: string, nowMs: number): Promise<LineCounts> {
    const rows = await this.db
      .selectFrom('batch_lines')
      .select(['state', 'failed', (eb) => eb.fn.countAll<number>().as('n')])
      .where('batch_id', '=', batchId)
      .groupBy(['state', 'failed'])
      .execute();
    let total = 0;
    let completed = 0;
    let failed = 0;
    for (const r of rows) {
      const n = Number(r.n);
      total += n;
      if (r.state === 'done') {
        if (Number(r.failed) === 1) failed += n;
        else completed += n;
      }
    }
    const running = await this.db
      .selectFrom('batch_lines')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('batch_id', '=', batchId)
      .where('state', '=', 'running')
      .where('lease_until', '>=', nowMs)
      .executeTakeFirstOrThrow();
    const live = Number(running.n);
    return { total, completed, failed, running: live, waiting: total - completed - failed - live };
  }

  /** The models the batch's lines name (as stored: the catalog's names), sorted; empty once it ended. */
  async models(batchId: string): Promise<string[]> {
    const rows = await this.db
      .selectFrom('batch_lines')
      .select('model')
      .distinct()
      .where('batch_id', '=', batchId)
      .execute();
    return rows.map((r) => r.model).sort();
  }

  /** Models with lines that may start now in these batches. */
  async waitingModels(batchIds: readonly string[], nowMs: number): Promise<string[]> {
    if (batchIds.length === 0) return [];
    const rows = await this.db
      .selectFrom('batch_lines')
      .select('model')
      .distinct()
      .where('batch_id', 'in', batchIds)
      .where((eb) =>
        eb.or([
          eb.and([eb('state', '=', 'pending'), eb('not_before', '<=', nowMs)]),
          eb.and([eb('state', '=', 'running'), eb('lease_until', '<', nowMs)]),
        ]),
      )
      .execute();
    return rows.map((r) => r.model);
  }

  /**
   * Takes up to `n` lines of `model` in these batches (oldest batch, lowest
   * line first) that are pending and due, or running under a lease that
   * lapsed; each taken line is `owner`'s until `leaseUntil`. Only the rows
   * this UPDATE changed come back, so two runners never hold one line.
   */
  async claim(
    batchIds: readonly string[],
    model: string,
    n: number,
    owner: string,
    leaseUntil: number,
    nowMs: number,
  ): Promise<ClaimedLine[]> {
    if (n <= 0 || batchIds.length === 0) return [];
    const due = (eb: ExpressionBuilder<Database, 'batch_lines'>) =>
      eb.or([
        eb.and([eb('state', '=', 'pending'), eb('not_before', '<=', nowMs)]),
        eb.and([eb('state', '=', 'running'), eb('lease_until', '<', nowMs)]),
      ]);
    const taken: ClaimedLine[] = [];
    for (const batchId of batchIds) {
      if (taken.length >= n) break;
      const candidates = await this.db
        .selectFrom('batch_lines')
        .select('line')
        .where('batch_id', '=', batchId)
        .where('model', '=', model)
        .where(due)
        .orderBy('line')
        .limit(n - taken.length)
        .execute();
      if (candidates.length === 0) continue;
      const rows = await this.db
        .updateTable('batch_lines')
        .set({ state: 'running', lease_owner: owner, lease_until: leaseUntil })
        .where('batch_id', '=', batchId)
        .where(
          'line',
          'in',
          candidates.map((c) => c.line),
        )
        .where(due)
        .returning(['batch_id', 'line', 'custom_id', 'model', 'attempts'])
        .execute();
      for (const r of rows)
        taken.push({
          batchId: r.batch_id,
          line: Number(r.line),
          customId: r.custom_id,
          model: r.model,
          attempts: Number(r.attempts),
        });
    }
    return taken.sort((a, b) => a.line - b.line);
  }

  /** Extends every lease `owner` holds; a runner calls it well inside the lease. */
  async renew(owner: string, leaseUntil: number): Promise<void> {
    await this.db
      .updateTable('batch_lines')
      .set({ lease_until: leaseUntil })
      .where('lease_owner', '=', owner)
      .where('state', '=', 'running')
      .execute();
  }

  /** Gives back every line `owner` holds (at a clean stop) so the next runner need not wait out the lease. */
  async release(owner: string): Promise<void> {
    await this.db
      .updateTable('batch_lines')
      .set({ state: 'pending', lease_owner: null, lease_until: null })
      .where('lease_owner', '=', owner)
      .where('state', '=', 'running')
      .execute();
  }

  /**
   * Frees every running line, whoever held it: only for a store no other
   * instance writes (SQLite), at start, where a lease held is one a killed
   * process of this store left behind.
   */
  async releaseAll(): Promise<number> {
    const r = await this.db
      .updateTable('batch_lines')
      .set({ state: 'pending', lease_owner: null, lease_until: null })
      .where('state', '=', 'running')
      .executeTakeFirst();
    return Number(r.numUpdatedRows);
  }

  /**
   * Records the line's answer and marks it done, in one statement; false
   * (nothing written) when `owner` no longer holds it: another runner took
   * it over, or the batch was closed, and that one's answer stands.
   */
  async finish(line: ClaimedLine, owner: string, result: string, failed: boolean): Promise<boolean> {
    return this.commits.run(async (tx) => {
      const r = await tx
        .updateTable('batch_lines')
        .set({ state: 'done', result, failed: failed ? 1 : 0, lease_owner: null, lease_until: null })
        .where('batch_id', '=', line.batchId)
        .where('line', '=', line.line)
        .where('state', '=', 'running')
        .where('lease_owner', '=', owner)
        .executeTakeFirst();
      return Number(r.numUpdatedRows) > 0;
    });
  }

  /**
   * Puts the line back to wait until `notBefore` (a refusal worth retrying);
   * `failed`: this try failed, and counts in its attempts. False when `owner`
   * no longer held it.
   */
  async retryLater(line: ClaimedLine, owner: string, notBefore: number, failed = false): Promise<boolean> {
    return this.commits.run(async (tx) => {
      const r = await tx
        .updateTable('batch_lines')
        .set((eb) => ({
          state: 'pending',
          not_before: notBefore,
          lease_owner: null,
          lease_until: null,
          ...(failed ? { attempts: eb('attempts', '+', 1) } : {}),
        }))
        .where('batch_id', '=', line.batchId)
        .where('line', '=', line.line)
        .where('state', '=', 'running')
        .where('lease_owner', '=', owner)
        .executeTakeFirst();
      return Number(r.numUpdatedRows) > 0;
    });
  }

  /**
   * Closes lines without an answer, with `code` (batch_expired, batch_cancelled):
   * every line not done when `running` is true, else only those not running
   * under a live lease (a cancel lets running lines finish).
   */
  async close(batchId: string, code: string, nowMs: number, running: boolean): Promise<void> {
    let q = this.db
      .updateTable('batch_lines')
      .set({ state: 'done', failed: 1, result: null, error_code: code, lease_owner: null, lease_until: null })
      .where('batch_id', '=', batchId)
      .where('state', '!=', 'done');
    if (!running) q = q.where((eb) => eb.or([eb('state', '=', 'pending'), eb('lease_until', '<', nowMs)]));
    await q.execute();
  }

  /** Done lines from `afterLine` on, `limit` at most, by line: the files are written a page at a time. */
  async doneLines(batchId: string, afterLine: number, limit: number): Promise<DoneLine[]> {
    const rows = await this.db
      .selectFrom('batch_lines')
      .select(['line', 'custom_id', 'failed', 'result', 'error_code'])
      .where('batch_id', '=', batchId)
      .where('state', '=', 'done')
      .where('line', '>', afterLine)
      .orderBy('line')
      .limit(limit)
      .execute();
    return rows.map((r) => ({
      line: Number(r.line),
      customId: r.custom_id,
      failed: Number(r.failed) === 1,
      result: r.result,
      errorCode: r.error_code,
    }));
  }
}
