// The shapes placement reads and writes. They are placement's own, not the
// store's or the inventory's: those map into these, so a change in how a node
// is recorded cannot quietly change how it is scheduled, and tests can build a
// fleet from plain objects.

export type AdminState = 'ready' | 'cordoned' | 'draining';
export type Liveness = 'up' | 'stale' | 'lost';

export interface PlacementGpu {
  /** The index the driver gives it (CUDA_VISIBLE_DEVICES order). */
  readonly index: number;
  /** Normalised class such as "h100-80gb"; absent = could not be derived, so no allow-list matches it. */
  readonly class?: string;
  /** Absent = not reported: a memory requirement is then not checked against this GPU. */
  readonly memoryTotalMiB?: number;
  readonly healthy: boolean;
  /** Why it is unhealthy, as the agent worded it ("12 uncorrectable ECC errors"). */
  readonly problem?: string;
}

export interface PlacementFabric {
  readonly name: string;
  /** This node's address on the fabric; absent = present but not configured. Membership alone counts. */
  readonly address?: string;
}

export interface PlacementNode {
  readonly id: string;
  readonly hostname?: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly adminState: AdminState;
  readonly liveness: Liveness;
  /** True: the node waits for an admin's approval (new, or its GPUs changed) and takes no new replicas. Absent = approved. */
  readonly pendingApproval?: boolean;
  /** Undefined = not reported (unknown); [] = looked and found none (a CPU node). */
  readonly gpus: readonly PlacementGpu[] | undefined;
  /** GPU indices already given to shards of existing replicas. */
  readonly gpusInUse: readonly number[];
  /** Absent = not reported. Shown as capacity in RAM rejections; never decides anything. */
  readonly memoryTotalBytes?: number;
  /** RAM not yet claimed by CPU shards. Absent = unknown: the RAM check is skipped and noted, never read as 0. */
  readonly memoryFreeBytes?: number;
  /**
   * Free bytes on the local filesystems holding the weight cache, summed.
   * Shared filesystems are never in it (the space on a filer is not this
   * node's to spend). Absent = unknown: the disk check is skipped and noted,
   * never read as a full disk.
   */
  readonly localDiskFreeBytes?: number;
  /** Cache names and/or sources of weights on this node's disk. */
  readonly weightsHeld: ReadonlySet<string> | readonly string[];
  readonly fabrics: readonly PlacementFabric[];
  /** Engine names available here: vllm, llamacpp, sglang, builtin, sim. */
  readonly engines: readonly string[];
}

export interface PlacementSnapshot {
  readonly nodes: readonly PlacementNode[];
}

/** One profile of a model, as placement needs it; the catalog maps its compiled profile into this. */
export interface PlacementProfile {
  readonly name: string;
  readonly engine: string;
  /** GPUs per shard; 0 = a CPU profile. */
  readonly gpus: number;
  /** Nodes per replica; absent = 1. More than 1 needs nodes that share one fabric. */
  readonly shards?: number;
  /** Allowed GPU classes; absent or empty = any class. */
  readonly gpuClasses?: readonly string[];
  /** Memory needed on each GPU; absent = no requirement beyond a free GPU. */
  readonly gpuMemoryGiB?: number;
  /** RAM per shard, checked for CPU profiles only (GPU shards do not claim RAM); absent = unknown, not checked. */
  readonly memoryGiB?: number;
  /** Size of the weights; absent = unknown: not a rejection, but explain says disk was not checked. */
  readonly diskGiB?: number;
  /** A Kubernetes-style label selector ("pool=a100", "zone in (a,b)", "!spot"); absent = every node. */
  readonly pool?: string;
}

/** An existing replica of the model being placed, for spreading. */
export interface ReplicaFootprint {
  /** The node of each shard, rank order. */
  readonly nodeIds: readonly string[];
  /** The fabric a multi-node replica uses; absent for single-node replicas. */
  readonly fabric?: string;
}

export interface PlacementRequest {
  readonly model: string;
  /** The cache name and/or source matched against each node's weightsHeld; any one matching counts. */
  readonly weightsKey: string | readonly string[];
  /** In order of preference; the first profile that fits anywhere wins. */
  readonly profiles: readonly PlacementProfile[];
  /** Replicas of this model already placed; absent = none. */
  readonly existingReplicas?: readonly ReplicaFootprint[];
  /** Nodes this replica must not land on, e.g. the node it is being drained off. */
  readonly excludeNodes?: readonly string[];
}

export interface PlacedShard {
  readonly nodeId: string;
  readonly rank: number;
  readonly gpuIndices: readonly number[];
}

export interface Placement {
  readonly profile: string;
  /** The profile's selector, when it has one. */
  readonly pool?: string;
  /** The fabric the shards share; only for multi-node replicas. */
  readonly fabric?: string;
  readonly shards: readonly PlacedShard[];
}

/**
 * Stable codes, one per check (and for the GPU check, per stage of the funnel
 * class → memory → health → free where the node fell short). Callers and
 * explain branch on these; the sentence is for people.
 */
export type RejectionCode =
  | 'pool_invalid'
  | 'excluded'
  | 'cordoned'
  | 'pending_approval'
  | 'draining'
  | 'stale'
  | 'lost'
  | 'pool_mismatch'
  | 'engine_missing'
  | 'gpus_unknown'
  | 'no_gpus'
  | 'gpu_class'
  | 'gpu_memory'
  | 'gpu_unhealthy'
  | 'gpus_free'
  | 'ram'
  | 'disk'
  | 'no_fabric'
  | 'fabric';

export type RejectionDimension = 'profile' | 'node' | 'pool' | 'engine' | 'gpus' | 'memory' | 'disk' | 'fabric';

/**
 * One failed check. `requested`, `free` and `capacity` are in `unit`: GPUs
 * for the GPU check, bytes for RAM and disk, nodes for a fabric; absent where
 * the check is not about a quantity or the node did not report it.
 */
export interface Rejection {
  readonly profile: string;
  readonly pool?: string;
  /** Absent for a rejection of the whole profile or of a fabric. */
  readonly node?: string;
  readonly fabric?: string;
  readonly code: RejectionCode;
  readonly dimension: RejectionDimension;
  readonly unit?: 'gpus' | 'bytes' | 'nodes';
  readonly requested?: number;
  readonly free?: number;
  readonly capacity?: number;
  /** A sentence an operator can act on. */
  readonly reason: string;
}

export type PlacementNoteCode =
  'disk_size_unknown' | 'disk_free_unknown' | 'memory_size_unknown' | 'memory_free_unknown';

/** A check that could not be made because a size was not known; never a rejection. */
export interface PlacementNote {
  readonly profile: string;
  readonly code: PlacementNoteCode;
  /** The nodes it applies to, id order; absent when it is about the profile itself. */
  readonly nodes?: readonly string[];
  readonly text: string;
}

export interface PlacementSuccess {
  readonly ok: true;
  readonly placement: Placement;
  /**
   * How wide the choice was, for logs and the dashboard. Single-node: nodes
   * that pass the chosen profile's node checks and have enough free GPUs
   * (RAM, disk and exclusion not counted: counting them would mean looking at
   * every node, which the index exists to avoid). Multi-node: nodes that fit
   * entirely, in fabrics with enough of them.
   */
  readonly candidatesConsidered: number;
  /** Checks skipped for the chosen profile and nodes because a size was unknown. */
  readonly notes: readonly PlacementNote[];
}

export interface PlacementFailure {
  readonly ok: false;
  /** Every failed check of every profile, profile order, then node id, then check order; fabrics last. */
  readonly rejections: readonly Rejection[];
  readonly notes: readonly PlacementNote[];
  /** Nodes in the snapshot: the denominator of explain's "0/12 nodes fit". */
  readonly nodeCount: number;
}

export type PlacementResult = PlacementSuccess | PlacementFailure;
