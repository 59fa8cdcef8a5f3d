// Folding one agent's shard report into the replica records: each shard
// reported takes the state, endpoint and error the agent gave, a shard the
// agent no longer reports is stopped when it was told to stop, and a replica
// that should run takes the state its shards add up to. Its own module, pure
// (the time is passed in), because it is the one place the agents' word
// becomes the records': what a report means is tested here, apart from the
// queue and the store the Reconciler class wraps it in.
import type { ShardStatus } from '../../protocol/index.js';
import { COUNTING_STATES, type ReplicaRecord, type ReplicaState, SHARD_STATES, type ShardRecord, type ShardState } from './types.js';

export interface FoldedReport {
  /** Every record after the report, in the order given; unchanged ones are the same objects. */
  readonly records: ReplicaRecord[];
  /** The records the report changed (to persist); empty = nothing to do. */
  readonly changed: ReplicaRecord[];
  /** True when a pass should run now rather than at the next tick: a replica changed state, or a shard failed (the pass marks it failed, with backoff). */
  readonly wake: boolean;
}

/** Folds the shard states the agent on `nodeId` reported at `now` (epoch ms) into `records`; shards on other nodes are untouched. */
export function foldReport(records: readonly ReplicaRecord[], nodeId: string, statuses: readonly ShardStatus[], now: number): FoldedReport {
  const reported = new Map(statuses.map((s) => [s.shard_id, s]));
  const changed: ReplicaRecord[] = [];
  let wake = false;
  const next = records.map((r) => {
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
    if (!touched) return r;
    let out: ReplicaRecord = { ...r, shards, updatedAtMs: now };
    if (COUNTING_STATES.has(r.state)) {
      const state = derivedState(shards);
      if (state !== r.state) {
        out = { ...out, state, stateSinceMs: now };
        wake = true;
      }
      if (state === 'ready') out = { ...out, endpoint: shards.find((s) => s.rank === 0)?.endpoint ?? null, failures: 0, error: null };
      if (shards.some((s) => s.state === 'failed')) wake = true;
    }
    changed.push(out);
    return out;
  });
  return { records: next, changed, wake };
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
