// The fleet's nodes on /metrics: how many are up, stale or lost, by admin
// state. Read at scrape time from the inventory, so it costs nothing between
// scrapes. Its own file because the inventory is about records and
// liveness; this is only what a dashboard or an alert reads of them.
import { Gauge, type Registry } from 'prom-client';
import type { Inventory } from './inventory.js';

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
