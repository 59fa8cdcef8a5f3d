// Records for the reconciler's unit tests (src/control/reconciler/*.test.ts):
// a placement node, a shard, a replica and a catalog model, each with every
// field a plain healthy default so that a test names only what it is about.
// Here rather than beside the tests so that it is never built into dist.
import type { PlacementNode } from '../../src/control/placement/index.js';
import type { PlanModel } from '../../src/control/reconciler/plan-types.js';
import type { ReplicaRecord, ShardRecord } from '../../src/control/reconciler/types.js';

/** `count` GPUs, indices 0 up, every one healthy. */
export function healthyGpus(count: number): PlacementNode['gpus'] {
  return Array.from({ length: count }, (_, index) => ({ index, healthy: true }));
}

/** A ready, live node with four healthy GPUs free, no weights held, no fabric, running vllm. */
export function placementNode(id: string, over: Partial<PlacementNode> = {}): PlacementNode {
  return {
    id,
    labels: {},
    adminState: 'ready',
    liveness: 'up',
    gpus: healthyGpus(4),
    gpusInUse: [],
    weightsHeld: [],
    fabrics: [],
    engines: ['vllm'],
    ...over,
  };
}

/** Shard s1: rank 0 on n1's GPU 0, ready, no endpoint yet. */
export function shardRecord(over: Partial<ShardRecord> = {}): ShardRecord {
  return { id: 's1', nodeId: 'n1', rank: 0, gpuIndices: [0], state: 'ready', error: null, endpoint: null, ...over };
}

/** A ready replica of model m, profile p, that never failed and has no shards (zero times throughout). */
export function replicaRecord(id: string, over: Partial<ReplicaRecord> = {}): ReplicaRecord {
  return {
    id,
    model: 'm',
    profile: 'p',
    pool: null,
    fabric: null,
    state: 'ready',
    endpoint: null,
    error: null,
    createdAtMs: 0,
    lastUsedAtMs: null,
    failures: 0,
    nextRetryAtMs: null,
    stateSinceMs: 0,
    updatedAtMs: 0,
    replaces: null,
    shards: [],
    ...over,
  };
}

/** Model m scaled between `min` and `max`, with one profile p: one vllm shard on one GPU of any class, no other needs. */
export function planModel(min: number, max = min, over: Partial<PlanModel> = {}): PlanModel {
  return {
    name: 'm',
    source: 'hf://org/m',
    scaling: { min, max },
    profiles: [
      {
        name: 'p',
        engine: 'vllm',
        gpus: 1,
        shards: 1,
        gpuClasses: [],
        gpuMemoryGiB: null,
        memoryGiB: null,
        diskGiB: null,
        pool: null,
      },
    ],
    ...over,
  };
}
