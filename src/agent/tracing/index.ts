// The agent's traces of its shards' lives: a span per weights fetch
// (llmgw.shard.fetch) and one per engine start, from the process's start
// until it answered its health check (llmgw.shard.start, with a `ready`
// event) or failed. The starts are drawn from the supervisor's status after
// the fact (each carries when its process started and became ready), so the
// supervisor's state machine is not touched and a start is traced once
// however often the status is read. Made only when the agent was given a
// tracer (OTEL_EXPORTER_OTLP_* or --otlp-endpoint): with none, nothing here
// is constructed. Apart from shards.ts and the supervisor, which know
// nothing of OpenTelemetry.
import { SpanKind, SpanStatusCode, type Tracer } from '@opentelemetry/api';

/** What a start is traced from: the supervisor's ShardStatus fields it reads. */
export interface StartSnapshot {
  readonly shardId: string;
  readonly replicaId: string;
  readonly engine: string;
  readonly state: string;
  /** ISO 8601; absent = no process runs. */
  readonly startedAt?: string;
  /** ISO 8601; absent = not ready (yet). */
  readonly readyAt?: string;
  readonly error?: { readonly message: string };
}

/** A start to draw, decided from one snapshot: pure, so it is table-tested without a tracer. */
export type StartSpan =
  | { readonly kind: 'ready'; readonly key: string; readonly startMs: number; readonly readyMs: number }
  | {
      readonly kind: 'failed';
      readonly key: string;
      readonly startMs: number;
      readonly endMs: number;
      readonly why: string;
    };

/**
 * The start spans `snapshots` complete that are not in `done` (keys are a
 * shard and its process's start time): a process that became ready, or one
 * that failed before it did. `nowMs` ends a failed one.
 */
export function completedStarts(
  snapshots: readonly StartSnapshot[],
  done: ReadonlySet<string>,
  nowMs: number,
): (StartSpan & { readonly shard: StartSnapshot })[] {
  const out: (StartSpan & { readonly shard: StartSnapshot })[] = [];
  for (const s of snapshots) {
    if (s.startedAt === undefined) continue;
    const key = `${s.shardId}@${s.startedAt}`;
    if (done.has(key)) continue;
    const startMs = Date.parse(s.startedAt);
    if (s.readyAt !== undefined) out.push({ kind: 'ready', key, startMs, readyMs: Date.parse(s.readyAt), shard: s });
    else if (s.state === 'failed')
      out.push({ kind: 'failed', key, startMs, endMs: nowMs, why: s.error?.message ?? 'failed', shard: s });
  }
  return out;
}

/** Keys remembered before the oldest are forgotten: a shard restarted thousands of times must not grow the set forever. */
const DONE_MAX = 4096;

export class ShardTracing {
  private readonly done = new Set<string>();

  constructor(
    private readonly tracer: Tracer,
    /** This node's id, on every span. */
    private readonly nodeId: string,
    private readonly now: () => number = Date.now,
  ) {}

  /** A fetch of `source` (as logs show it, credentials removed) begins; the returned function ends it, with the error if it failed. */
  fetchStarted(source: string): (error?: string) => void {
    const span = this.tracer.startSpan('llmgw.shard.fetch', {
      kind: SpanKind.INTERNAL,
      attributes: { 'llmgw.node': this.nodeId, 'llmgw.weights.source': source },
    });
    return (error) => {
      if (error !== undefined) span.setStatus({ code: SpanStatusCode.ERROR, message: error });
      span.end();
    };
  }

  /** Draws every start the supervisor's status completes since it was last read. */
  observe(snapshots: readonly StartSnapshot[]): void {
    for (const c of completedStarts(snapshots, this.done, this.now())) {
      if (this.done.size >= DONE_MAX) this.done.delete(this.done.values().next().value!);
      this.done.add(c.key);
      const span = this.tracer.startSpan('llmgw.shard.start', {
        kind: SpanKind.INTERNAL,
        startTime: c.startMs,
        attributes: {
          'llmgw.node': this.nodeId,
          'llmgw.shard.id': c.shard.shardId,
          'llmgw.replica.id': c.shard.replicaId,
          'llmgw.replica.engine': c.shard.engine,
        },
      });
      if (c.kind === 'ready') {
        span.addEvent('ready', undefined, c.readyMs);
        span.end(c.readyMs);
      } else {
        span.setStatus({ code: SpanStatusCode.ERROR, message: c.why });
        span.end(c.endMs);
      }
    }
  }
}
