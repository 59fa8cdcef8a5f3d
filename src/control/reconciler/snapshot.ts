// The inventory's nodes as placement reads them. Kept beside the reconciler
// (its only caller) rather than in the inventory, so the inventory does not
// learn placement's shapes and placement does not learn the wire report's.
// Absent stays absent: a fact the agent did not report is unknown to
// placement too, never zero.
import type { Node } from '../inventory/index.js';
import { localDisk } from '../inventory/index.js';
import type { Liveness, PlacementNode } from '../placement/index.js';

export function toPlacementNode(node: Node, liveness: Liveness): PlacementNode {
  const report = node.report;
  const disk = localDisk(node);
  const weightsHeld = new Set<string>();
  for (const w of report?.weights ?? []) {
    if (w.cache_name) weightsHeld.add(w.cache_name);
    if (w.source) weightsHeld.add(w.source);
  }
  const hostname = node.hostname ?? report?.hostname;
  return {
    id: node.id,
    ...(hostname ? { hostname } : {}),
    labels: node.labels,
    adminState: node.adminState,
    liveness,
    ...(node.approval === 'pending' ? { pendingApproval: true } : {}),
    gpus: report?.gpus?.map((g) => ({
      index: g.index,
      ...(g.class === undefined ? {} : { class: g.class }),
      ...(g.memory_total_mib === undefined ? {} : { memoryTotalMiB: g.memory_total_mib }),
      healthy: g.problems.length === 0,
      ...(g.problems[0] === undefined ? {} : { problem: g.problems[0] }),
    })),
    // The reconciler's pass adds the GPUs its replicas hold.
    gpusInUse: [],
    ...(report?.memory_total_bytes === undefined ? {} : { memoryTotalBytes: report.memory_total_bytes }),
    // What the machine has free now, which already counts CPU shards that run; one placed but not yet started is not in it.
    ...(report?.memory_available_bytes === undefined ? {} : { memoryFreeBytes: report.memory_available_bytes }),
    ...(disk === null ? {} : { localDiskFreeBytes: disk.freeBytes }),
    weightsHeld,
    fabrics: (report?.fabrics ?? []).map((f) => ({ name: f.name, ...(f.address === undefined ? {} : { address: f.address }) })),
    engines: (report?.engines ?? []).map((e) => e.name),
  };
}
