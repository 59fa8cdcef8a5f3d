// The batch pace on a running control plane: each time the runner asks how
// many lines of a model may start, a snapshot of that model is read from
// memory (the replica directory's ready replicas and their engine load, the
// router's in-flight count per replica and its interactive requests waiting)
// and handed to decidePace (pace.ts). The last decision per model is kept
// for the admin API, ctl and the dashboard, and for the metrics
// llmgw_batch_paused and llmgw_batch_spare_slots. Apart from pace.ts so the
// policy stays pure; nothing here touches the store or the network.
import { Gauge, type Registry } from 'prom-client';
import type { ReplicaDirectory, ReplicaUse } from '../../gateway/ports/index.js';
import { BATCH_PACE_DEFAULTS, decidePace, type BatchPaceOptions, type PaceDecision, type PaceReplica } from './pace.js';
import type { PaceReport } from './admin-api.js';

/** What the pace reads of a catalog model: the catalog's Model has these. */
export interface PacedModel {
  readonly name: string;
  /** Absent = not declared: a replica's places are then scaling.target_inflight. */
  readonly capacity?: { readonly perReplica: number };
  readonly scaling: { readonly targetInflight: number };
}

export interface LiveBatchPaceDeps {
  /** The catalog: a line names a model by its name or an alias. */
  readonly catalog: { resolve(nameOrAlias: string): PacedModel | undefined };
  readonly replicas: Pick<ReplicaDirectory, 'ready'>;
  /** The router's in-flight count and last use per replica id (Router.replicaUse). */
  readonly use: () => ReadonlyMap<string, ReplicaUse>;
  /** Interactive requests of the model waiting in the gateway now (Router.interactiveWaiting). */
  readonly interactiveWaiting: (model: string) => number;
  /** Batch lines of the model in flight; absent = not known (0, for the words only: the counts above include them). */
  readonly batchInFlight?: (model: string) => number;
  /** Epoch ms, the control plane's clock (engine samples are dated on it). */
  readonly now: () => number;
  /** An engine sample older than this is not used (the router's load_stale); absent = 4 s. */
  readonly loadFreshMs?: number;
  readonly options?: Partial<BatchPaceOptions>;
  /** Where the pace's gauges go; absent = none. */
  readonly registry?: Registry;
}

export class LiveBatchPace {
  private readonly options: BatchPaceOptions;
  private readonly last = new Map<string, PaceDecision & { inFlight: number }>();

  constructor(private readonly deps: LiveBatchPaceDeps) {
    this.options = { ...BATCH_PACE_DEFAULTS, ...deps.options };
    const last = this.last;
    if (deps.registry) {
      new Gauge({
        name: 'llmgw_batch_paused',
        help: 'By model: 1 while batch lines wait because interactive requests of the model queue, else 0.',
        labelNames: ['model'],
        registers: [deps.registry],
        collect() {
          this.reset();
          for (const [model, d] of last) this.set({ model }, d.reason === 'paused' ? 1 : 0);
        },
      });
      new Gauge({
        name: 'llmgw_batch_spare_slots',
        help: 'By model: batch lines the pace last let start (spare places less the headroom kept for interactive requests).',
        labelNames: ['model'],
        registers: [deps.registry],
        collect() {
          this.reset();
          for (const [model, d] of last) this.set({ model }, d.slots);
        },
      });
    }
  }

  /** How many more batch lines of `model` may start now; 0 = wait. */
  slots(model: string): number {
    const decision = decidePace(this.snapshot(model), this.options);
    this.last.set(model, { ...decision, inFlight: this.deps.batchInFlight?.(model) ?? 0 });
    return decision.slots;
  }

  /** What the pace last said of `model`; undefined = it was never asked. */
  report(model: string): PaceReport | undefined {
    const d = this.last.get(model);
    return d && { reason: d.reason, message: d.message, inFlight: d.inFlight };
  }

  private snapshot(model: string) {
    const m = this.deps.catalog.resolve(model);
    const perReplica = m ? (m.capacity?.perReplica ?? m.scaling.targetInflight) : 0;
    const now = this.deps.now();
    const freshMs = this.deps.loadFreshMs ?? 4_000;
    const use = this.deps.use();
    const replicas: PaceReplica[] = [];
    // Remote endpoints are no idle GPUs of this fleet; draining replicas take nothing new.
    for (const r of m ? this.deps.replicas.ready(m.name) : []) {
      if (r.draining || r.remote) continue;
      const load = r.load && now - r.load.sampledAtMs <= freshMs ? r.load : undefined;
      replicas.push({
        id: r.id,
        capacity: perReplica,
        inFlight: use.get(r.id)?.inFlight ?? 0,
        ...(load
          ? {
              engine: {
                running: load.running,
                waiting: load.waiting,
                ...(load.kvUsage === undefined ? {} : { kvUsage: load.kvUsage }),
              },
            }
          : {}),
      });
    }
    return {
      replicas,
      interactiveWaiting: m ? this.deps.interactiveWaiting(m.name) : 0,
      batchInFlight: this.deps.batchInFlight?.(model) ?? 0,
    };
  }
}
