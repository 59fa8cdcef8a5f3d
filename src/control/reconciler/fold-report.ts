// Folding one agent's shard report into the replica records: each shard
// reported takes the state, endpoint and error the agent gave, a shard the
// agent no longer reports is stopped when it was told to stop, and a replica
// that should run takes the state its shards add up to. Its own module, pure
// (the time is passed in), because it is the one place the agents' word
// becomes the records': what a report means is tested here, apart from the
// queue and the store the Reconciler class wraps it in.
import type { ShardStatus } from '../../protocol/index.js';
import {
  COUNTING_STATES,
  type ReplicaRecord,
  type ReplicaState,
  SHARD_STATES,
  type ShardRecord,
  type ShardState,
} from './types.js';
import { transitionReplica } from './transitions.js';

export interface FoldedReport {
  /** Every record after the report, in the order given (the same positions); unchanged ones are the same objects, and with nothing changed the same array. */
  readonly records: readonly ReplicaRecord[];
  /** The records the report changed (to persist); empty = nothing to do. */
  readonly changed: ReplicaRecord[];
  /** True when a pass should run now rather than at the next tick: a replica changed state, or a shard failed (the pass marks it failed, with backoff). */
  readonly wake: boolean;
}

/**
 * Folds the shard states the agent on `nodeId` reported at `now` (epoch ms)
 * into `records`; shards on other nodes are untouched. `onNode` lists the
 * positions of the records with a shard on that node (ShardIndex): with it
 * a heartbeat costs what its node runs, not a walk over every replica of
 * the fleet, which at 10,000 nodes was 1.3 ms a heartbeat, 2,000 times a
 * second. Absent = every record is looked at.
 */
export function foldReport(
  records: readonly ReplicaRecord[],
  nodeId: string,
  statuses: readonly ShardStatus[],
  now: number,
  onNode?: readonly number[],
): FoldedReport {
  const reported = new Map(statuses.map((s) => [s.shard_id, s]));
  const changed: ReplicaRecord[] = [];
  let wake = false;
  let next: ReplicaRecord[] | null = null;
  const count = onNode ? onNode.length : records.length;
  for (let k = 0; k < count; k++) {
    const i = onNode ? onNode[k]! : k;
    const r = records[i];
    if (!r) continue;
    let touched = false;
    const shards = r.shards.map((s): ShardRecord => {
      if (s.nodeId !== nodeId) return s;
      const status = reported.get(s.id);
      if (!status || status.replica_id !== r.id) {
        // Not reported by the agent: a shard it was told to stop is gone.
        if ((r.state === 'stopping' || r.state === 'failed') && s.state !== 'stopped') {
          touched = true;
          return { ...s, state: 'stopped', endpoint: null };
        }
        return s;
      }
      // A failed engine its agent is about to restart in place is starting again, not a failed replica: placing the
      // replica anew would throw away a warm node (weights on disk, GPUs held) for a crash the agent handles in a second.
      const restarting = status.state === 'failed' && status.restarting === true;
      const state = restarting ? 'starting' : (shardStateOf(status.state) ?? s.state);
      const folded: ShardRecord = {
        ...s,
        state,
        endpoint: restarting ? null : (status.endpoint ?? null),
        error: status.error ?? (state === 'failed' ? s.error : null),
      };
      if (folded.state !== s.state || folded.endpoint !== s.endpoint || folded.error !== s.error) touched = true;
      return folded;
    });
    if (!touched) continue;
    let out: ReplicaRecord = { ...r, shards, updatedAtMs: now };
    if (COUNTING_STATES.has(r.state)) {
      const state = derivedState(shards);
      if (state !== r.state) {
        out = transitionReplica(out, state, 'report', now);
        wake = true;
      }
      if (state === 'ready')
        out = { ...out, endpoint: shards.find((s) => s.rank === 0)?.endpoint ?? null, failures: 0, error: null };
      if (shards.some((s) => s.state === 'failed')) wake = true;
    }
    changed.push(out);
    (next ??= [...records])[i] = out;
  }
  return { records: next ?? records, changed, wake };
}

/**
 * Where each node's shards are among a list of records: the positions
 * foldReport visits. Built once per list (a pass makes a new one) and kept
 * across changes that leave every record where it was.
 */
export class ShardIndex {
  private indexed: readonly ReplicaRecord[] | null = null;
  private readonly byNode = new Map<string, number[]>();
  /** The position of the record that holds each shard id. */
  private readonly byShard = new Map<string, number>();

  /** Positions in `records` of those with a shard on `nodeId`, ascending; empty = none. */
  on(records: readonly ReplicaRecord[], nodeId: string): readonly number[] {
    this.index(records);
    return this.byNode.get(nodeId) ?? [];
  }

  /** The position in `records` of the record with shard `shardId`; undefined = no record has it. */
  holding(records: readonly ReplicaRecord[], shardId: string): number | undefined {
    this.index(records);
    return this.byShard.get(shardId);
  }

  private index(records: readonly ReplicaRecord[]): void {
    if (this.indexed === records) return;
    this.byNode.clear();
    this.byShard.clear();
    records.forEach((r, i) => {
      for (const s of r.shards) {
        this.byShard.set(s.id, i);
        const list = this.byNode.get(s.nodeId);
        if (!list) this.byNode.set(s.nodeId, [i]);
        else if (list[list.length - 1] !== i) list.push(i);
      }
    });
    this.indexed = records;
  }

  /**
   * `next` holds the records of `from` at the same positions, on the same
   * nodes (a folded report, last uses taken): the index still holds. Any
   * other list is indexed afresh when first asked of.
   */
  carry(from: readonly ReplicaRecord[], next: readonly ReplicaRecord[]): void {
    if (this.indexed === from) this.indexed = next;
  }
}

/** A replica that should run, as its shards show it: ready when all are, else the least advanced shard's stage. */
export function derivedState(shards: readonly ShardRecord[]): ReplicaState {
  if (shards.length > 0 && shards.every((s) => s.state === 'ready')) return 'ready';
  if (shards.some((s) => s.state === 'pending')) return 'pending';
  if (shards.some((s) => s.state === 'fetching')) return 'fetching';
  return 'starting';
}

/** A reported shard state, or undefined for one this control plane does not know (a newer agent's). */
export function shardStateOf(reported: string): ShardState | undefined {
  return (SHARD_STATES as readonly string[]).includes(reported) ? (reported as ShardState) : undefined;
}
