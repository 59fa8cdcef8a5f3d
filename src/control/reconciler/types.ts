// The reconciler's records: replicas and their shards as the control plane
// remembers them (and the store keeps them). They are plain readonly values,
// replaced rather than mutated, so a plan computed from one set of records
// can never see a later change half-way through.
import type { ShardState } from '../../protocol/index.js';

/** Pending, fetching, starting and ready count toward the wanted number; the rest do not. */
export type ReplicaState = 'pending' | 'fetching' | 'starting' | 'ready' | 'draining' | 'stopping' | 'failed';
export const REPLICA_STATES: readonly ReplicaState[] = [
  'pending',
  'fetching',
  'starting',
  'ready',
  'draining',
  'stopping',
  'failed',
];
export const COUNTING_STATES: ReadonlySet<ReplicaState> = new Set<ReplicaState>([
  'pending',
  'fetching',
  'starting',
  'ready',
]);

/**
 * What an agent last said about one shard, defined with the wire in
 * src/protocol. `stopped` is also set by the control plane when an agent no
 * longer reports a shard it was told to stop.
 */
export { SHARD_STATES, type ShardState } from '../../protocol/index.js';

export interface ShardRecord {
  readonly id: string;
  readonly nodeId: string;
  readonly rank: number;
  readonly gpuIndices: readonly number[];
  readonly state: ShardState;
  /** The agent's last error for this shard; null = none. */
  readonly error: string | null;
  /** http://host:port where the shard serves; null = not listening yet, or a rank that does not serve the API. */
  readonly endpoint: string | null;
}

export interface ReplicaRecord {
  readonly id: string;
  readonly model: string;
  readonly profile: string;
  /** The profile's label selector when it has one; null = every node. */
  readonly pool: string | null;
  /** The fabric a multi-node replica uses; null for a one-node replica. */
  readonly fabric: string | null;
  readonly state: ReplicaState;
  /** Rank 0's endpoint once it listens; null before. */
  readonly endpoint: string | null;
  /** The last error, kept across retries so the operator sees why it is failing; null = none. */
  readonly error: string | null;
  readonly createdAtMs: number;
  /** When the router last sent it a request; null = the router has reported no use (not the same as idle). */
  readonly lastUsedAtMs: number | null;
  /** Consecutive failures; reset when the replica becomes ready. */
  readonly failures: number;
  /** When a failed replica may be placed again; null = not waiting. */
  readonly nextRetryAtMs: number | null;
  /** When the state last changed: the start of a drain or a stop, for their deadlines. */
  readonly stateSinceMs: number;
  readonly updatedAtMs: number;
  /** The replica this one was placed to replace (make-before-break on a draining node); null = none. */
  readonly replaces: string | null;
  /**
   * The secret its engines ask of every API request (--api-key) and the
   * router sends; made with the replica and kept for its life, retries
   * included. Null or absent = none (a replica made before secrets: its
   * engine asks no key). Never shown in a view, an event or a log.
   */
  readonly engineSecret?: string | null;
  /** Rank order. */
  readonly shards: readonly ShardRecord[];
}
