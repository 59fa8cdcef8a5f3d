// The rows of batches and of their lines (migration 0023_batches), and the
// queries the runner's durability rests on. A line is claimed with a lease
// (lease_owner, lease_until) by an UPDATE … RETURNING, so two runners on
// one Postgres never both hold it; its result and its done mark are one
// UPDATE that only the lease's holder can make, so a line is answered once
// even when a runner whose lease lapsed finishes it late. Apart from the
// runner so the SQL reads on its own and is tested on both dialects.
import type { ExpressionBuilder } from 'kysely';
import type { BatchesTable } from '../store/batches-schema.js';

export type { BatchesTable, BatchLinesTable } from '../store/batches-schema.js';
import type { Database } from '../store/schema.js';
import type { StoreConnection } from '../store/connection.js';
import { GroupCommit } from '../store/group-commit.js';
import { fileRow, type FileRecord } from './files-store.js';

export type BatchStatus =
  'validating' | 'in_progress' | 'finalizing' | 'completed' | 'failed' | 'expired' | 'cancelling' | 'cancelled';

/** Statuses a runner still has work in. */
export const ACTIVE_STATUSES: readonly BatchStatus[] = ['validating', 'in_progress', 'finalizing', 'cancelling'];

/** Statuses a cancel applies to: later ones are ending or have ended already. */
export const CANCELLABLE_STATUSES: readonly BatchStatus[] = ['validating', 'in_progress'];

/** True while a runner has work in the batch: its counts come from its lines, not yet from its row. */
export function isActive(status: string): boolean {
  return (ACTIVE_STATUSES as readonly string[]).includes(status);
}

export type BatchRow = BatchesTable;

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

/** Rows inserted at once: 7 columns each, well under both dialects' parameter limits. */
const INSERT_CHUNK = 500;

export class BatchRepository {
  /** Line ends share a transaction on SQLite: one fsync for many (store/group-commit.ts). */
  private readonly commits: GroupCommit;

  constructor(private readonly connection: StoreConnection) {
    this.commits = new GroupCommit(connection);
  }

  private get db() {
    return this.connection.db;
  }

  /** The batch and its lines, in one transaction: a batch is never seen without all its lines. */
  async create(batch: BatchRow, lines: readonly NewLine[]): Promise<void> {
    await this.db.transaction().execute(async (tx) => {
      await tx.insertInto('batches').values(batch).execute();
      for (let i = 0; i < lines.length; i += INSERT_CHUNK) {
        await tx
          .insertInto('batch_lines')
          .values(
            lines.slice(i, i + INSERT_CHUNK).map((l) => ({
              batch_id: batch.id,
              line: l.line,
              custom_id: l.customId,
              model: l.model,
              state: 'pending',
              not_before: 0,
              attempts: 0,
              failed: 0,
            })),
          )
          .execute();
      }
    });
  }

  /** The batch when `owner` has it (undefined for another owner's); without `owner`, any. */
  async get(id: string, owner?: string): Promise<BatchRow | undefined> {
    let q = this.db.selectFrom('batches').selectAll().where('id', '=', id);
    if (owner !== undefined) q = q.where('owner', '=', owner);
    return normalize(await q.executeTakeFirst());
  }

  /** Newest first, `limit` + 1 rows at most so the caller can tell has_more. */
  async list(owner: string, limit: number, after?: string): Promise<BatchRow[]> {
    let q = this.db.selectFrom('batches').selectAll().where('owner', '=', owner);
    const from = after ? await this.get(after, owner) : undefined;
    if (from) {
      const at = from.created_at;
      q = q.where((eb) =>
        eb.or([eb('created_at', '<', at), eb.and([eb('created_at', '=', at), eb('id', '<', from.id)])]),
      );
    }
    const rows = await q
      .orderBy('created_at', 'desc')
      .orderBy('id', 'desc')
      .limit(limit + 1)
      .execute();
    return rows.map((r) => normalize(r)!);
  }

  /** Batches of these owners (null = every owner's), newest first, `limit` at most: the operator's view. */
  async listAll(owners: readonly string[] | null, limit: number): Promise<BatchRow[]> {
    if (owners !== null && owners.length === 0) return [];
    let q = this.db.selectFrom('batches').selectAll();
    if (owners !== null) q = q.where('owner', 'in', owners);
    const rows = await q.orderBy('created_at', 'desc').orderBy('id', 'desc').limit(limit).execute();
    return rows.map((r) => normalize(r)!);
  }

  /** Batches a runner still has work in. */
  async active(): Promise<BatchRow[]> {
    const rows = await this.db
      .selectFrom('batches')
      .selectAll()
      .where('status', 'in', ACTIVE_STATUSES)
      .orderBy('created_at')
      .execute();
    return rows.map((r) => normalize(r)!);
  }

  /** True when a batch that has not ended reads this file (its input): the file must stay until it ends. */
  async inputInUse(fileId: string): Promise<boolean> {
    const r = await this.db
      .selectFrom('batches')
      .select('id')
      .where('input_file_id', '=', fileId)
      .where('status', 'in', ACTIVE_STATUSES)
      .executeTakeFirst();
    return r !== undefined;
  }

  /** Moves the batch from one status to another, with the time of the new one; false when it was no longer in `from`. */
  async move(id: string, from: readonly BatchStatus[], to: BatchStatus, nowMs: number): Promise<boolean> {
    const r = await this.db
      .updateTable('batches')
      .set({ status: to, [`${to}_at`]: nowMs } as Partial<BatchesTable>)
      .where('id', '=', id)
      .where('status', 'in', from)
      .executeTakeFirst();
    return Number(r.numUpdatedRows) > 0;
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

  /** Takes the batch's ending (writing its files) until `leaseUntil`; false when another instance holds it. */
  async claimEnding(id: string, owner: string, leaseUntil: number, nowMs: number): Promise<boolean> {
    const r = await this.db
      .updateTable('batches')
      .set({ lease_owner: owner, lease_until: leaseUntil })
      .where('id', '=', id)
      .where((eb) =>
        eb.or([eb('lease_until', 'is', null), eb('lease_until', '<', nowMs), eb('lease_owner', '=', owner)]),
      )
      .executeTakeFirst();
    return Number(r.numUpdatedRows) > 0;
  }

  /**
   * Ends the batch in one transaction: its output and error files' rows, its
   * final status and counts; its lines' rows go. Only while `owner` holds its ending.
   */
  async end(
    id: string,
    owner: string,
    status: BatchStatus,
    nowMs: number,
    counts: { completed: number; failed: number },
    files: { output: FileRecord | null; error: FileRecord | null },
    errors: string | null = null,
  ): Promise<boolean> {
    return this.db.transaction().execute(async (tx) => {
      const r = await tx
        .updateTable('batches')
        .set({
          status,
          [`${status}_at`]: nowMs,
          completed: counts.completed,
          failed: counts.failed,
          output_file_id: files.output?.id ?? null,
          error_file_id: files.error?.id ?? null,
          errors,
          lease_owner: null,
          lease_until: null,
        } as Partial<BatchesTable>)
        .where('id', '=', id)
        .where('lease_owner', '=', owner)
        .executeTakeFirst();
      if (Number(r.numUpdatedRows) === 0) return false;
      for (const f of [files.output, files.error]) if (f) await tx.insertInto('files').values(fileRow(f)).execute();
      await tx.deleteFrom('batch_lines').where('batch_id', '=', id).execute();
      return true;
    });
  }
}

/** Postgres returns bigint columns as text: numbers again, nulls kept. */
function normalize(r: BatchRow | undefined): BatchRow | undefined {
  if (!r) return undefined;
  const out = { ...r } as Record<string, unknown>;
  for (const k of [
    'created_at',
    'expires_at',
    'in_progress_at',
    'finalizing_at',
    'completed_at',
    'failed_at',
    'expired_at',
    'cancelling_at',
    'cancelled_at',
    'lease_until',
    'total',
    'completed',
    'failed',
  ])
    if (out[k] !== null && out[k] !== undefined) out[k] = Number(out[k]);
  return out as unknown as BatchRow;
}
