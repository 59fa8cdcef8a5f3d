// How far a batch has come and when it will likely finish, from its counts
// and the rate observed since it started: done lines over the time it has
// been in progress. Pure, for ctl and the dashboard alike. The rate includes
// the time the batch spent paused for interactive traffic, which is what
// an estimate should assume of the hours ahead as well: a batch on idle
// GPUs runs as fast as the fleet is idle.

export interface ProgressInput {
  readonly status: string;
  readonly total: number;
  readonly completed: number;
  readonly failed: number;
  /** When it went in progress (ms); null = not yet. */
  readonly startedAtMs: number | null;
  readonly nowMs: number;
}

export interface Progress {
  /** Lines answered or failed. */
  readonly done: number;
  /** Lines per second since it started; null = not started, or nothing done yet to measure by. */
  readonly linesPerSecond: number | null;
  /** When the rest will likely be done (ms); null = unknown (nothing done yet) or the batch has ended. */
  readonly estimatedFinishAtMs: number | null;
}

/** Statuses after which nothing more runs. */
export const ENDED_STATUSES: ReadonlySet<string> = new Set(['completed', 'failed', 'expired', 'cancelled']);

export function progressOf(p: ProgressInput): Progress {
  const done = p.completed + p.failed;
  const elapsedMs = p.startedAtMs === null ? 0 : p.nowMs - p.startedAtMs;
  const linesPerSecond = elapsedMs > 0 && done > 0 ? done / (elapsedMs / 1000) : null;
  const left = Math.max(0, p.total - done);
  const estimatedFinishAtMs =
    ENDED_STATUSES.has(p.status) || linesPerSecond === null
      ? null
      : p.nowMs + Math.round((left / linesPerSecond) * 1000);
  return { done, linesPerSecond, estimatedFinishAtMs };
}
