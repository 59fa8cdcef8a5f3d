// Checking that replicas already placed can stay where they are: the half of
// a reconciler pass that runs every tick when nothing has changed, so it has
// to cost next to nothing (one map of nodes, then a few comparisons per
// shard). It reports; the reconciler decides. Cordoned and stale nodes are not
// problems here: cordon only stops new placement, and a stale node is given
// until it is lost.
import type { PlacedShard, PlacementGpu, PlacementNode, PlacementSnapshot } from './types.js';

export interface ExistingReplica {
  /** The replica's id, echoed in problems; absent = the caller matches by position. */
  readonly id?: string;
  readonly model: string;
  /** When given, each node must still have this engine. */
  readonly engine?: string;
  /** The fabric a multi-node replica uses; absent = any fabric its nodes all share. */
  readonly fabric?: string;
  readonly shards: readonly PlacedShard[];
}

export type ReplicaProblemCode =
  'node_missing' | 'lost' | 'draining' | 'engine_missing' | 'gpu_missing' | 'gpu_unhealthy' | 'gpu_shared' | 'fabric';

export interface ReplicaProblem {
  /** Index of the replica in the input. */
  readonly replicaIndex: number;
  readonly replica?: string;
  readonly model: string;
  /** Absent for a problem of the replica as a whole (its fabric). */
  readonly node?: string;
  readonly code: ReplicaProblemCode;
  readonly reason: string;
}

/** Every reason an existing replica cannot stay as it is; empty when all can (the idle pass). */
export function checkReplicas(snapshot: PlacementSnapshot, replicas: readonly ExistingReplica[]): ReplicaProblem[] {
  const nodes = new Map<string, { readonly node: PlacementNode; readonly ordinal: number }>();
  snapshot.nodes.forEach((node, ordinal) => nodes.set(node.id, { node, ordinal }));
  // Which replica each GPU is given to, keyed by node ordinal × 2^16 + GPU index: numbers, not strings, on the hot path.
  const owners = new Map<number, number>();
  const problems: ReplicaProblem[] = [];

  replicas.forEach((replica, replicaIndex) => {
    const report = (code: ReplicaProblemCode, reason: string, node?: string): void => {
      problems.push({
        replicaIndex,
        ...(replica.id === undefined ? {} : { replica: replica.id }),
        model: replica.model,
        ...(node === undefined ? {} : { node }),
        code,
        reason,
      });
    };
    const multiNode = replica.shards.length > 1;
    let shared: Set<string> | null = null;
    for (const shard of replica.shards) {
      const found = nodes.get(shard.nodeId);
      if (!found) {
        report(
          'node_missing',
          `shard ${shard.rank} is on node ${shard.nodeId}, which is no longer in the inventory`,
          shard.nodeId,
        );
        continue;
      }
      const { node, ordinal } = found;
      if (node.liveness === 'lost')
        report('lost', `shard ${shard.rank} is on a lost node; the replica must be replaced`, node.id);
      if (node.adminState === 'draining') {
        report(
          'draining',
          `shard ${shard.rank} is on a draining node; a replacement should be placed before it stops`,
          node.id,
        );
      }
      if (replica.engine !== undefined && !node.engines.includes(replica.engine)) {
        report('engine_missing', `engine ${replica.engine} is no longer reported on this node`, node.id);
      }
      for (const index of shard.gpuIndices) {
        const key = ordinal * 65_536 + index;
        const owner = owners.get(key);
        if (owner !== undefined && owner !== replicaIndex) {
          const other = replicas[owner]!;
          report(
            'gpu_shared',
            `GPU ${index} is also given to ${other.id ?? `a replica of ${other.model}`}; one of them must move`,
            node.id,
          );
        } else {
          owners.set(key, replicaIndex);
        }
        // Unknown GPUs (not reported) cannot be checked, and are not taken as gone.
        if (node.gpus === undefined) continue;
        const gpu = findGpu(node.gpus, index);
        if (!gpu) report('gpu_missing', `GPU ${index} is no longer reported on this node`, node.id);
        else if (!gpu.healthy)
          report('gpu_unhealthy', `GPU ${index} is unhealthy${gpu.problem ? `: ${gpu.problem}` : ''}`, node.id);
      }
      if (multiNode) {
        const names = node.fabrics.map((f) => f.name);
        if (shared === null) shared = new Set(names);
        else for (const f of shared) if (!names.includes(f)) shared.delete(f);
      }
    }
    if (multiNode && shared !== null) {
      const ok = replica.fabric === undefined ? shared.size > 0 : shared.has(replica.fabric);
      if (!ok) {
        const want = replica.fabric === undefined ? 'a fabric' : `fabric ${replica.fabric}`;
        report('fabric', `the nodes of ${replica.id ?? `this replica of ${replica.model}`} no longer share ${want}`);
      }
    }
  });
  return problems;
}

function findGpu(gpus: readonly PlacementGpu[], index: number): PlacementGpu | undefined {
  for (const gpu of gpus) if (gpu.index === index) return gpu;
  return undefined;
}
