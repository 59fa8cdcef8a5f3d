// What the replica records add up to per node: how many replicas have a
// shard there and which GPUs those shards hold. The node views and node
// removal read it; its own module, pure, so one walk over the records (not
// one per node) is tested and benchmarked at fleet size (bench/fleet.mjs).
import type { ReplicaRecord } from './types.js';

export interface NodeUsage {
  /** Replicas with at least one shard here that has not stopped. */
  replicas: number;
  /** GPU indices those shards hold; empty = none. */
  gpusInUse: Set<number>;
}

/** Whether a replica holds its GPUs: from placement until it fails (a failed one has given them back). */
export function replicaHolds(r: ReplicaRecord): boolean {
  return r.state !== 'failed';
}

/** Whether a shard of a holding replica still holds its GPUs: a stopped one has let its engine go. */
export function shardHolds(s: ReplicaRecord['shards'][number]): boolean {
  return s.state !== 'stopped';
}

/** Per node id; a node with no entry runs nothing. Failed replicas and stopped shards hold nothing. */
export function nodeUsageOf(records: readonly ReplicaRecord[]): Map<string, NodeUsage> {
  const out = new Map<string, NodeUsage>();
  for (const r of records) {
    if (!replicaHolds(r)) continue;
    // A replica has a few shards: a short list, not a Set per replica, remembers the nodes counted.
    const counted: string[] = [];
    for (const s of r.shards) {
      if (!shardHolds(s)) continue;
      let u = out.get(s.nodeId);
      if (!u) out.set(s.nodeId, (u = { replicas: 0, gpusInUse: new Set<number>() }));
      if (!counted.includes(s.nodeId)) {
        u.replicas++;
        counted.push(s.nodeId);
      }
      for (const g of s.gpuIndices) u.gpusInUse.add(g);
    }
  }
  return out;
}
