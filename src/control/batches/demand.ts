// Batch lines per model as the store holds them: how many run under a live
// lease (in flight, on whichever control plane) and how many wait to start,
// for the scaler (counted up to scaling.batch_max_replicas) and the gauges
// llmgw_batch_lines_in_flight and llmgw_batch_lines_waiting. Read from the
// store every few seconds rather than from one runner's memory, so the
// leader of several control planes sees every instance's lines. Separate
// from the runner, which claims lines, and from the pace, which is asked on
// every start and must not wait on the store.
import { Gauge, type Registry } from 'prom-client';
import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { BatchDemand } from '../scaling/index.js';
import type { Database } from '../store/schema.js';

export class BatchDemandReader {
  private current = new Map<string, BatchDemand>();
  private timer: NodeJS.Timeout | null = null;
  private reading: Promise<void> | null = null;

  constructor(
    private readonly db: Kysely<Database>,
    private readonly now: () => number,
    private readonly logger: Logger,
    registry?: Registry,
  ) {
    const read = () => this.current;
    if (registry) {
      new Gauge({
        name: 'llmgw_batch_lines_in_flight',
        help: 'By model: batch lines running now under a live lease, on every control plane of the store.',
        labelNames: ['model'],
        registers: [registry],
        collect() {
          this.reset();
          for (const [model, d] of read()) this.set({ model }, d.inFlight);
        },
      });
      new Gauge({
        name: 'llmgw_batch_lines_waiting',
        help: 'By model: batch lines of running batches not started yet.',
        labelNames: ['model'],
        registers: [registry],
        collect() {
          this.reset();
          for (const [model, d] of read()) this.set({ model }, d.waiting);
        },
      });
    }
  }

  /** Per model as last read; no entry = none. */
  demand(): ReadonlyMap<string, BatchDemand> {
    return this.current;
  }

  /** Lines of `model` in flight as last read; 0 = none. */
  inFlight(model: string): number {
    return this.current.get(model)?.inFlight ?? 0;
  }

  /** Reads the store now; a read in progress is shared. A failed read keeps the last numbers (logged). */
  refresh(): Promise<void> {
    this.reading ??= this.read().finally(() => (this.reading = null));
    return this.reading;
  }

  /** Reads every `everyMs` until stop(). */
  start(everyMs: number): void {
    if (this.timer) return;
    void this.refresh();
    this.timer = setInterval(() => void this.refresh(), everyMs).unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  private async read(): Promise<void> {
    const now = this.now();
    try {
      const rows = await openLinesByModel(this.db, now).execute();
      const next = new Map<string, { inFlight: number; waiting: number }>();
      for (const r of rows) {
        let d = next.get(r.model);
        if (!d) next.set(r.model, (d = { inFlight: 0, waiting: 0 }));
        if (r.state === 'running') d.inFlight += Number(r.n);
        else d.waiting += Number(r.n);
      }
      this.current = next;
    } catch (err) {
      this.logger.warn({ err }, 'reading batch lines per model failed; the scaler keeps the last numbers');
    }
  }
}

/**
 * Pending lines, and running lines under a live lease, per model and state,
 * over every batch. The state comes first as one IN so the store reads only
 * open lines through the index of 0027_batch_lines_state_model: done lines,
 * which a long batch piles up until it ends, are never read.
 */
export function openLinesByModel(db: Kysely<Database>, nowMs: number) {
  return db
    .selectFrom('batch_lines')
    .select(['model', 'state', (eb) => eb.fn.countAll<number>().as('n')])
    .where('state', 'in', ['pending', 'running'])
    .where((eb) => eb.or([eb('state', '=', 'pending'), eb('lease_until', '>=', nowMs)]))
    .groupBy(['model', 'state']);
}
