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
    fabrics: (report?.fabrics ?? []).map((f) => ({
      name: f.name,
      ...(f.address === undefined ? {} : { address: f.address }),
    })),
    engines: (report?.engines ?? []).map((e) => e.name),
  };
}

/** What toPlacementNode read to make a cached placement node; the node is made again once any of it differs. */
interface Converted {
  readonly report: Node['report'];
  readonly hostname: string | null;
  readonly labels: Node['labels'];
  readonly adminState: Node['adminState'];
  readonly approval: Node['approval'];
  readonly liveness: Liveness;
  readonly placement: PlacementNode;
  /** The convert() call that last asked for it; an entry an older call saw belongs to a node that left the inventory. */
  pass: number;
}

/**
 * Each inventory node's placement node, kept between passes and made again
 * only when what it is made of changed. At 10,000 nodes converting every node
 * at every pass (each notified one and each tick) was most of the
 * reconciler's time, though between two passes almost no node changes.
 *
 * Sound because the inventory never changes a report in place: a new report
 * replaces the object (a heartbeat's parse, a row read by refresh), so the
 * report's identity stands for its content; labels likewise are replaced,
 * never edited. The placement nodes handed out are shared between passes and
 * must be treated as frozen: a pass that needs a different gpusInUse copies
 * the node (holdGpus does).
 */
export class PlacementNodeCache {
  private readonly entries = new Map<string, Converted>();
  private pass = 0;

  /**
   * The placement node of each of `nodes`, in order; `liveness` is asked once
   * per node. Nodes missing from `nodes` are forgotten, so the cache holds the
   * inventory as it is, not every node that ever joined.
   */
  convert(nodes: readonly Node[], liveness: (node: Node) => Liveness): PlacementNode[] {
    const pass = ++this.pass;
    let seen = 0;
    const out = nodes.map((node) => {
      const live = liveness(node);
      let entry = this.entries.get(node.id);
      if (entry === undefined || !sameInputs(entry, node, live)) {
        const { report, hostname, labels, adminState, approval } = node;
        entry = {
          report,
          hostname,
          labels,
          adminState,
          approval,
          liveness: live,
          placement: toPlacementNode(node, live),
          pass: 0,
        };
        this.entries.set(node.id, entry);
      }
      if (entry.pass !== pass) {
        entry.pass = pass;
        seen++;
      }
      return entry.placement;
    });
    if (this.entries.size > seen)
      for (const [id, entry] of this.entries) if (entry.pass !== pass) this.entries.delete(id);
    return out;
  }

  /** How many nodes are held (for tests: removed nodes must not stay). */
  get size(): number {
    return this.entries.size;
  }
}

function sameInputs(entry: Converted, node: Node, liveness: Liveness): boolean {
  return (
    entry.report === node.report &&
    entry.liveness === liveness &&
    entry.adminState === node.adminState &&
    entry.approval === node.approval &&
    entry.hostname === node.hostname &&
    entry.labels === node.labels
  );
}
