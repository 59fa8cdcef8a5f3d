// The rows of batches (migration 0023_batches): made with all their lines in
// one transaction, listed, moved from status to status, and ended (their
// output files' rows, final counts and status in one transaction, under the
// ending lease one instance holds). The queries on the lines themselves,
// which the runner's durability rests on, are the base class's (line-store.ts).
// Apart from the runner so the SQL reads on its own and is tested on both dialects.
import type { BatchesTable } from '../store/batches-schema.js';
import { fileRow, type FileRecord } from './files-store.js';
import { BatchLines, type NewLine } from './line-store.js';

export type { BatchesTable, BatchLinesTable } from '../store/batches-schema.js';
export type { ClaimedLine, DoneLine, LineCounts, NewLine } from './line-store.js';

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

/**
 * What a new batch row starts with beyond what its request says: no stage
 * reached past its first, no output files, nothing counted, no lease. The
 * service spreads it under the fields it sets, and so do the tests' rows.
 */
export const NEW_BATCH_ROW = {
  in_progress_at: null,
  finalizing_at: null,
  completed_at: null,
  failed_at: null,
  expired_at: null,
  cancelling_at: null,
  cancelled_at: null,
  output_file_id: null,
  error_file_id: null,
  errors: null,
  completed: 0,
  failed: 0,
  lease_owner: null,
  lease_until: null,
} as const satisfies Partial<BatchRow>;

/** Rows inserted at once: 7 columns each, well under both dialects' parameter limits. */
const INSERT_CHUNK = 500;

export class BatchRepository extends BatchLines {
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
