// Which shard statuses in a node's heartbeat the control plane believes: only
// those of shards it assigned to that node, and none at all from a node that
// waits for approval. A heartbeat names shards by id, and nothing in the wire
// format stops a node from naming another node's: believed blindly, a node
// that had only the shared join token and was never approved set another
// node's replica's engine load to 1000 running and 1000 waiting, so the
// router sent it nothing and the scaler grew the model to scaling.max, and
// forged that replica's fetch progress (issue 33). foldReport already kept
// shard states to the reporting node; loads and fetch progress were taken
// straight from the report. Pure, so the rule is read and tested in one place
// apart from the reconciler's queue and clock.
import type { ShardStatus } from '../../protocol/index.js';
import type { ShardIndex } from './fold-report.js';
import type { ReplicaRecord } from './types.js';

/**
 * Why a shard status was not believed:
 * - node_pending: the node waits for an admin's approval, so nothing it says of shards counts;
 * - not_assigned: the shard is another node's, or belongs to another replica than the one named;
 * - unknown_shard: no replica has the shard (one forgotten a moment ago, or a store-less control plane that restarted);
 * - not_api_shard: a load from a shard that is not its replica's rank 0, the one that serves the API (the rest of the status is believed).
 */
export type ReportRefusal = 'node_pending' | 'not_assigned' | 'unknown_shard' | 'not_api_shard';
export const REPORT_REFUSALS: readonly ReportRefusal[] = [
  'node_pending',
  'not_assigned',
  'unknown_shard',
  'not_api_shard',
];

export interface RefusedShard {
  readonly shardId: string;
  /** The replica the status named (the node's word, not checked). */
  readonly replicaId: string;
  readonly reason: ReportRefusal;
}

export interface ScreenedReport {
  /** The statuses to believe, in the order reported: the shard is this node's, of the replica named; a load only from rank 0. */
  readonly believed: ShardStatus[];
  /** What was not believed, one entry per status (or per load, for not_api_shard); empty = everything was. */
  readonly refused: RefusedShard[];
}

/**
 * Screens the statuses node `nodeId` reported against `records`, the
 * replicas the control plane holds. `approved` false (the node waits for
 * approval): nothing is believed. `index`, when given, is the reconciler's
 * ShardIndex over the same records, so a heartbeat costs what it reports
 * rather than a walk over the fleet's replicas; absent = one is made here.
 */
export function screenReport(
  records: readonly ReplicaRecord[],
  nodeId: string,
  approved: boolean,
  statuses: readonly ShardStatus[],
  index?: ShardIndex,
): ScreenedReport {
  if (!approved)
    return {
      believed: [],
      refused: statuses.map((s) => ({ shardId: s.shard_id, replicaId: s.replica_id, reason: 'node_pending' })),
    };
  const holding = index ? (shardId: string) => index.holding(records, shardId) : positionsOf(records);
  const believed: ShardStatus[] = [];
  const refused: RefusedShard[] = [];
  for (const s of statuses) {
    const at = holding(s.shard_id);
    const record = at === undefined ? undefined : records[at];
    const shard = record?.shards.find((sh) => sh.id === s.shard_id);
    if (!record || !shard) {
      refused.push({ shardId: s.shard_id, replicaId: s.replica_id, reason: 'unknown_shard' });
      continue;
    }
    if (shard.nodeId !== nodeId || record.id !== s.replica_id) {
      refused.push({ shardId: s.shard_id, replicaId: s.replica_id, reason: 'not_assigned' });
      continue;
    }
    if (s.load !== undefined && shard.rank !== 0) {
      // Its state is the node's to tell; the replica's load is its API shard's alone.
      refused.push({ shardId: s.shard_id, replicaId: s.replica_id, reason: 'not_api_shard' });
      const { load: _notBelieved, ...rest } = s;
      believed.push(rest);
      continue;
    }
    believed.push(s);
  }
  return { believed, refused };
}

/** Where each shard id is among `records`, made once for one screening. */
function positionsOf(records: readonly ReplicaRecord[]): (shardId: string) => number | undefined {
  const at = new Map<string, number>();
  records.forEach((r, i) => {
    for (const s of r.shards) at.set(s.id, i);
  });
  return (shardId) => at.get(shardId);
}
