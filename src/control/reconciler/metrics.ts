// The reconciler's Prometheus metrics: how often it passes, how long a pass
// takes, what its passes did, the replicas it holds by model and state, and
// the agents' shard statuses it did not believe.
// Registered on the caller's Registry (the admin listener serves it at
// /metrics), never on prom-client's global one, so two control planes in one
// process do not collide. Kept apart from reconciler.ts so the pass reads as
// decisions and I/O, with counting at its edge.
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { REPORT_REFUSALS, type ReportRefusal } from './report-trust.js';
import type { ReplicaRecord } from './types.js';

/** A pass is milliseconds when healthy; seconds mean a slow store. */
const PASS_BUCKETS_S = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];

export class ReconcilerMetrics {
  private readonly passes: Counter;
  private readonly duration: Histogram;
  private readonly actions: Counter<'action'>;
  private readonly refusedReports: Counter<'reason'>;

  /** `replicas` is read at each scrape: the gauge is the records as they are then, not as a pass last left them. */
  constructor(registry: Registry, replicas: () => readonly ReplicaRecord[]) {
    this.passes = new Counter({
      name: 'llmgw_reconciler_passes_total',
      help: 'Reconciler passes run by this control plane (only the leader runs them).',
      registers: [registry],
    });
    this.duration = new Histogram({
      name: 'llmgw_reconciler_pass_seconds',
      help: 'Time one reconciler pass took, the store write included.',
      buckets: PASS_BUCKETS_S,
      registers: [registry],
    });
    this.actions = new Counter({
      name: 'llmgw_reconciler_actions_total',
      help: 'Actions reconciler passes took, by kind: create, retry, stop, drain, forget, markLost, markFailed.',
      labelNames: ['action'],
      registers: [registry],
    });
    this.refusedReports = new Counter({
      name: 'llmgw_agent_reports_refused_total',
      help:
        'Shard statuses in agent heartbeats this control plane did not believe, by reason: node_pending (the node waits for approval), ' +
        'not_assigned (the shard is not assigned to that node), unknown_shard (no replica has it), not_api_shard (a load from a shard that does not serve the API).',
      labelNames: ['reason'],
      registers: [registry],
    });
    // Every reason from the start at 0: an alert on the rate sees the first refusal, not a series that appears.
    for (const reason of REPORT_REFUSALS) this.refusedReports.inc({ reason }, 0);
    new Gauge({
      name: 'llmgw_replicas',
      help: 'Replicas this control plane knows of, by model and state.',
      labelNames: ['model', 'state'],
      registers: [registry],
      collect() {
        this.reset();
        const counts = new Map<string, { model: string; state: string; n: number }>();
        for (const r of replicas()) {
          const k = `${r.model}\u0000${r.state}`;
          const c = counts.get(k);
          if (c) c.n++;
          else counts.set(k, { model: r.model, state: r.state, n: 1 });
        }
        for (const { model, state, n } of counts.values()) this.set({ model, state }, n);
      },
    });
  }

  /** Shard statuses of one heartbeat that were not believed. */
  refused(refusals: readonly { readonly reason: ReportRefusal }[]): void {
    for (const r of refusals) this.refusedReports.inc({ reason: r.reason });
  }

  /** One pass done in `seconds`, having taken these actions. */
  passed(seconds: number, actions: readonly { readonly kind: string }[]): void {
    this.passes.inc();
    this.duration.observe(seconds);
    for (const a of actions) this.actions.inc({ action: a.kind });
  }
}
