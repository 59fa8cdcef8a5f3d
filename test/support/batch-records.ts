// The batch row the batch tests create in the store: one batch of chat
// completions, in progress since `at`, with a day to run, unless a test says
// otherwise. In one place so that each test names only what it is about
// (its id, owner, total, key), and a column added to the table is added to
// every test's row at once.
import { NEW_BATCH_ROW, type BatchRow } from '../../src/control/batches/batch-store.js';

/** Batch `batch_1` of team `a`, chat completions, in progress since `at` (ms) with 24 h to run, nothing counted yet. */
export function batchRow(at: number, over: Partial<BatchRow> = {}): BatchRow {
  return {
    ...NEW_BATCH_ROW,
    id: 'batch_1',
    owner: 'team:a',
    key_id: 'anonymous',
    input_file_id: 'file-1',
    endpoint: '/v1/chat/completions',
    completion_window: '24h',
    metadata: null,
    status: 'in_progress',
    created_at: at,
    expires_at: at + 86_400_000,
    in_progress_at: at,
    total: 0,
    ...over,
  };
}
