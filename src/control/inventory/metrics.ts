// The fleet's nodes on /metrics: how many are up, stale or lost, by admin
// state. Read at scrape time from the inventory, so it costs nothing between
// scrapes. Its own file because the inventory is about records and
// liveness; this is only what a dashboard or an alert reads of them.
import { Counter, Gauge, type Registry } from 'prom-client';
import type { HeartbeatCounts, Inventory } from './inventory.js';

/** Registers `llmgw_nodes{liveness, state, approval}` on the registry. A combination with no node is absent, not 0. */
export function registerNodeMetrics(registry: Registry, inventory: Pick<Inventory, 'list' | 'liveness'>): void {
  new Gauge({
    name: 'llmgw_nodes',
    help: 'Nodes this control plane knows of, by liveness (up, stale, lost), admin state (ready, cordoned, draining) and approval (approved, pending).',
    labelNames: ['liveness', 'state', 'approval'],
    registers: [registry],
    collect() {
      this.reset();
      const counts = new Map<string, { liveness: string; state: string; approval: string; n: number }>();
      for (const n of inventory.list()) {
        const liveness = inventory.liveness(n);
        const k = `${liveness}\u0000${n.adminState}\u0000${n.approval}`;
        const c = counts.get(k);
        if (c) c.n++;
        else counts.set(k, { liveness, state: n.adminState, approval: n.approval, n: 1 });
      }
      for (const { n, ...labels } of counts.values()) this.set(labels, n);
    },
  });
}

/**
 * Registers what heartbeats cost: `llmgw_heartbeat_reports_total{kind}`
 * (full: the report was sent and parsed; keepalive: only its hash, nothing
 * parsed), `llmgw_heartbeat_report_requests_total` (keep-alives answered
 * send_report) and `llmgw_store_node_writes_total` (node rows heartbeats
 * wrote to the store). Read from the inventory's counts at scrape time.
 */
export function registerHeartbeatMetrics(registry: Registry, inventory: { readonly counts: HeartbeatCounts }): void {
  const counts = inventory.counts;
  new Counter({
    name: 'llmgw_heartbeat_reports_total',
    help: 'Heartbeats received here, by how they carried the node report: full (sent and parsed) or keepalive (its hash only, nothing parsed).',
    labelNames: ['kind'],
    registers: [registry],
    collect() {
      this.reset();
      this.inc({ kind: 'full' }, counts.reports.full);
      this.inc({ kind: 'keepalive' }, counts.reports.keepalive);
    },
  });
  new Counter({
    name: 'llmgw_heartbeat_report_requests_total',
    help: 'Keep-alives answered with send_report, because the report hash they named was not the one held here.',
    registers: [registry],
    collect() {
      this.reset();
      this.inc(counts.reportsAsked);
    },
  });
  new Counter({
    name: 'llmgw_store_node_writes_total',
    help: 'Node rows written to the store by heartbeats (last_seen, and the report when it changed).',
    registers: [registry],
    collect() {
      this.reset();
      this.inc(counts.storeNodeWrites);
    },
  });
}
