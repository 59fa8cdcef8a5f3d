// The fleet as placement sees it during a pass: every GPU a replica still
// holds is taken, whatever the agent last reported. Its own rule because the
// agents' reports lag the plan: a replica placed last pass may not run yet,
// and one being stopped still holds its GPUs until its agent lets go, so
// only the records can say which GPUs are free.
import type { PlacementNode } from '../placement/index.js';
import type { ReplicaRecord } from './types.js';

/**
 * `nodes` with the GPUs of `holders` added to each node's gpusInUse (sorted,
 * no repeats). A node no holder uses is returned as it was, the same object.
 */
export function holdGpus(nodes: readonly PlacementNode[], holders: readonly ReplicaRecord[]): PlacementNode[] {
  const inUse = new Map<string, Set<number>>();
  for (const r of holders) {
    for (const s of r.shards) {
      let set = inUse.get(s.nodeId);
      if (!set) inUse.set(s.nodeId, (set = new Set()));
      for (const g of s.gpuIndices) set.add(g);
    }
  }
  return nodes.map((n) => {
    const held = inUse.get(n.id);
    if (!held) return n;
    return { ...n, gpusInUse: [...new Set([...n.gpusInUse, ...held])].sort((a, b) => a - b) };
  });
}
