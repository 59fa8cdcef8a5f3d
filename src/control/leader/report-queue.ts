// The shard reports this instance received, waiting to be written to the
// store for the other instances. Apart from the cluster's timers so what is
// written, and what is not written again, can be tested without a store.
// Reports are level-triggered (the newest says everything) and the leader
// keeps what it folded, so a report equal to the one last queued for its
// node says nothing new, unless it carries load samples: those are dated,
// and go stale if not sent again. At 10,000 nodes, writing every heartbeat's
// report was a row per heartbeat, most of them an unchanged empty list.
import type { ShardStatus } from '../../protocol/index.js';

export interface QueuedReport {
  nodeId: string;
  shards: ShardStatus[];
  atMs: number;
}

export class ShardReportQueue {
  private pending = new Map<string, QueuedReport>();
  /** Per node, the report last queued, as JSON; absent = none since this process started (the first is always written). */
  private readonly queued = new Map<string, string>();

  /** Queues a node's report unless it says nothing new; returns whether it was queued. */
  offer(nodeId: string, shards: readonly ShardStatus[], atMs: number): boolean {
    const json = JSON.stringify(shards);
    if (json === this.queued.get(nodeId) && !shards.some((s) => s.load !== undefined)) return false;
    this.queued.set(nodeId, json);
    this.pending.set(nodeId, { nodeId, shards: [...shards], atMs });
    return true;
  }

  /** Everything queued, newest per node, emptying the queue. */
  take(): QueuedReport[] {
    const batch = [...this.pending.values()];
    this.pending = new Map();
    return batch;
  }

  /** A batch the store did not take: queued again where nothing newer was queued meanwhile. */
  putBack(batch: readonly QueuedReport[]): void {
    for (const r of batch) if (!this.pending.has(r.nodeId)) this.pending.set(r.nodeId, r);
  }
}
