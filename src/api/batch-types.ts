// The wire shapes of batches on the admin listener (docs/batches.md):
// GET /api/v1/batches and /api/v1/batches/:id, what `ctl batches` and the
// dashboard's Batches page show. Not OpenAI's Batch object (that is the
// client listener's /v1/batches): this one adds what an operator asks of a
// running batch, where it stands against interactive traffic and when it
// will likely finish. Apart from types.ts so one feature's shapes read
// together.

/** What the pace said last for one model of a running batch. */
export interface BatchPaceView {
  model: string;
  /** spare: lines start; full: no spare place beyond the headroom; paused: interactive requests wait; no-replica. */
  reason: 'spare' | 'full' | 'paused' | 'no-replica';
  /** The same in words: "paused: 3 interactive requests waiting; 4 batch lines finishing". */
  message: string;
  /** Batch lines of the model in flight from this control plane now. */
  in_flight: number;
}

export interface BatchAdminView {
  /** `batch_…`, as the client listener's /v1/batches/:id. */
  id: string;
  /** Whose it is: `team:<name>`, `key:<id>` for a key without a team, or `anonymous`. */
  owner: string;
  /** The key that made it (its lines run as this key). */
  key_id: string;
  /** The API its lines call: /v1/chat/completions, /v1/embeddings or /v1/responses. */
  endpoint: string;
  /** Models its lines name; empty once it has ended (its lines' rows are gone, the files keep them). */
  models: string[];
  /** OpenAI's batch statuses: validating, in_progress, finalizing, completed, failed, expired, cancelling, cancelled. */
  status: string;
  total: number;
  completed: number;
  failed: number;
  /** Lines running now (under a live lease). */
  running: number;
  /** Epoch ms. */
  created_at: number;
  /** When it went in progress; null = not yet. */
  started_at: number | null;
  /** When it ended (completed, failed, expired or cancelled); null = not yet. */
  ended_at: number | null;
  /** When its completion window ends. */
  expires_at: number;
  /** Done lines per second since it started; null = nothing done yet. */
  lines_per_second: number | null;
  /** When the rest will likely be done, at the rate so far; null = unknown or ended. */
  estimated_finish_at: number | null;
  /** For a batch still running, the pace of each of its models; absent = it has ended, or this control plane paces none. */
  pace?: BatchPaceView[];
}

export interface BatchesAdminView {
  /** Newest first; a team-admin sees its teams' only. */
  batches: BatchAdminView[];
}
