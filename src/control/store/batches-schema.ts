// The tables of batches and their files (migrations 0022_files,
// 0023_batches and 0027_batch_lines_state_model; docs/batches.md): here in the store's folder, as
// teams-schema.ts and remote-credentials.ts are, so the store never imports
// the feature. Their repositories are in src/control/batches.
import type { Kysely, Migration } from 'kysely';

export interface FilesTable {
  /** `file-…`: random, 128 bits. */
  id: string;
  /** Whose it is: `team:<name>`, `key:<id>` for a key without a team, or `anonymous` (no keys asked). */
  owner: string;
  /** batch (uploaded), batch_output (a batch's output or error file). */
  purpose: string;
  filename: string;
  bytes: number;
  /** Request lines for a batch input, output lines for a batch output; 0 when not counted. */
  lines: number;
  created_at: number;
}

export function filesMigration(): Migration {
  return {
    async up(db: Kysely<unknown>) {
      await db.schema
        .createTable('files')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('owner', 'text', (c) => c.notNull())
        .addColumn('purpose', 'text', (c) => c.notNull())
        .addColumn('filename', 'text', (c) => c.notNull())
        .addColumn('bytes', 'bigint', (c) => c.notNull())
        .addColumn('lines', 'integer', (c) => c.notNull())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('files_owner_created').on('files').columns(['owner', 'created_at']).execute();
    },
  };
}

export interface BatchesTable {
  /** `batch_…`: random, 128 bits. */
  id: string;
  /** As files.owner: whose files and batches these are. */
  owner: string;
  /** The key that made it: its lines run as this key (usage, limits, budgets); 'anonymous' when no key is asked. */
  key_id: string;
  input_file_id: string;
  endpoint: string;
  completion_window: string;
  /** JSON object of strings; null = none. */
  metadata: string | null;
  /** validating, in_progress, finalizing, completed, failed, expired, cancelling, cancelled. */
  status: string;
  created_at: number;
  /** When its completion window ends (ms); lines not answered by then are reported expired. */
  expires_at: number;
  in_progress_at: number | null;
  finalizing_at: number | null;
  completed_at: number | null;
  failed_at: number | null;
  expired_at: number | null;
  cancelling_at: number | null;
  cancelled_at: number | null;
  output_file_id: string | null;
  error_file_id: string | null;
  /** JSON: OpenAI's errors.data, for a failed batch; null = none. */
  errors: string | null;
  /** Lines in the input. */
  total: number;
  /** Set when it ends (its lines' rows are then deleted); before, counted from the lines. */
  completed: number;
  failed: number;
  /** The instance ending the batch (writing its files) and until when; null = none. */
  lease_owner: string | null;
  lease_until: number | null;
}

export interface BatchLinesTable {
  batch_id: string;
  /** 1-based, as the input file's lines. */
  line: number;
  custom_id: string;
  /** The model the line's body names: the runner paces by it. */
  model: string;
  /** pending, running, done. */
  state: string;
  /** Epoch ms before which a pending line is not started again (a retry's wait); 0 = at once. */
  not_before: number;
  lease_owner: string | null;
  lease_until: number | null;
  /** Tries that failed (500, 502, 504); waits for a busy gateway (429, 503, 408) are not counted. */
  attempts: number;
  /** 1: its entry goes to the error file; 0: to the output file. */
  failed: number;
  /** The output line's JSON; null with error_code set (closed unanswered) or while not done. */
  result: string | null;
  /** batch_expired or batch_cancelled for a line closed without an answer; null otherwise. */
  error_code: string | null;
}

export function batchesMigration(): Migration {
  return {
    async up(db: Kysely<unknown>) {
      let table = db.schema.createTable('batches').addColumn('id', 'text', (c) => c.primaryKey());
      for (const col of ['owner', 'key_id', 'input_file_id', 'endpoint', 'completion_window', 'status'])
        table = table.addColumn(col, 'text', (c) => c.notNull());
      table = table.addColumn('metadata', 'text');
      table = table.addColumn('created_at', 'bigint', (c) => c.notNull());
      table = table.addColumn('expires_at', 'bigint', (c) => c.notNull());
      for (const col of [
        'in_progress_at',
        'finalizing_at',
        'completed_at',
        'failed_at',
        'expired_at',
        'cancelling_at',
        'cancelled_at',
        'lease_until',
      ])
        table = table.addColumn(col, 'bigint');
      for (const col of ['output_file_id', 'error_file_id', 'errors', 'lease_owner'])
        table = table.addColumn(col, 'text');
      for (const col of ['total', 'completed', 'failed']) table = table.addColumn(col, 'integer', (c) => c.notNull());
      await table.execute();
      await db.schema.createIndex('batches_owner_created').on('batches').columns(['owner', 'created_at']).execute();
      await db.schema.createIndex('batches_status').on('batches').column('status').execute();
      await db.schema
        .createTable('batch_lines')
        .addColumn('batch_id', 'text', (c) => c.notNull())
        .addColumn('line', 'integer', (c) => c.notNull())
        .addColumn('custom_id', 'text', (c) => c.notNull())
        .addColumn('model', 'text', (c) => c.notNull())
        .addColumn('state', 'text', (c) => c.notNull())
        .addColumn('not_before', 'bigint', (c) => c.notNull())
        .addColumn('lease_owner', 'text')
        .addColumn('lease_until', 'bigint')
        .addColumn('attempts', 'integer', (c) => c.notNull())
        .addColumn('failed', 'integer', (c) => c.notNull())
        .addColumn('result', 'text')
        .addColumn('error_code', 'text')
        .addPrimaryKeyConstraint('batch_lines_pk', ['batch_id', 'line'])
        .execute();
      await db.schema
        .createIndex('batch_lines_state')
        .on('batch_lines')
        .columns(['batch_id', 'state', 'model'])
        .execute();
    },
  };
}

/**
 * Migration 0027_batch_lines_state_model: the scaler's and the gauges' batch
 * demand (batches/demand.ts) counts open lines per model across every batch,
 * every 2 s. The index of 0023 leads with batch_id, which that query does not
 * name, so it read the whole table, done lines and all; this one lets it read
 * only the pending and running lines.
 */
export function batchLinesStateModelMigration(): Migration {
  return {
    async up(db: Kysely<unknown>) {
      await db.schema.createIndex('batch_lines_state_model').on('batch_lines').columns(['state', 'model']).execute();
    },
  };
}
