// A replica's state machine: which state may follow which, and why, in one
// table (as the agent's shard has its own in src/agent/supervisor/shard.ts),
// and the one function that moves a record along it. Every change of a
// replica's state (a plan applied, a report folded, the plan's own view of
// what it marks failed) goes through `transitionReplica`, so a rule that
// would move a replica where it cannot go (a stopping one back to ready, a
// failed one to draining) is a bug that fails loudly with IllegalStateError
// instead of a record that silently reads wrong.
import { IllegalStateError } from '../../errors/index.js';
import type { ReplicaRecord, ReplicaState } from './types.js';

/**
 * What moves a replica: `report` (its shards' states as agents report them
 * add up to another stage), `drain` (surplus, or on a draining node whose
 * replacement serves: it finishes what it serves), `stop` (surplus, cannot
 * run where it is, its model or profile left the catalog, or drained),
 * `lost` (a node under it was lost), `fail` (a shard failed: it waits for a
 * retry with backoff), `retry` (placed again after its backoff).
 */
export type ReplicaTransitionReason = 'report' | 'drain' | 'stop' | 'lost' | 'fail' | 'retry';

type Moves = Readonly<Partial<Record<ReplicaState, readonly ReplicaTransitionReason[]>>>;

/** The counting states' moves: a report moves among them; each may be drained, stopped, lost or failed. */
const counting = (self: ReplicaState): Moves => {
  const moves: Partial<Record<ReplicaState, readonly ReplicaTransitionReason[]>> = {
    draining: ['drain'],
    stopping: ['stop', 'lost'],
    failed: ['fail'],
  };
  // A shard restarting in place, or one re-fetching, takes a ready replica back a stage: that too is a report.
  for (const to of ['pending', 'fetching', 'starting', 'ready'] as const) if (to !== self) moves[to] = ['report'];
  return Object.freeze(moves);
};

/** from → to → the reasons that may make that move; a pair not here is illegal. A new replica is born pending. */
export const REPLICA_TRANSITIONS: Readonly<Record<ReplicaState, Moves>> = Object.freeze<Record<ReplicaState, Moves>>({
  pending: counting('pending'),
  fetching: counting('fetching'),
  starting: counting('starting'),
  ready: counting('ready'),
  // Draining serves what it has: only a stop (drained, or its deadline) or its node's loss ends it; a failed shard is not retried.
  draining: { stopping: ['stop', 'lost'] },
  // Stopping ends in the record being forgotten, which is no state.
  stopping: {},
  failed: { pending: ['retry'] },
});

/** What else changes with the state: the fields an action sets beside it (never the id, state or stateSinceMs). */
export type ReplicaChange = Partial<Omit<ReplicaRecord, 'id' | 'state' | 'stateSinceMs'>>;

/** True when the table lets `reason` move a replica from `from` to `to`. */
export function canTransition(from: ReplicaState, to: ReplicaState, reason: ReplicaTransitionReason): boolean {
  return REPLICA_TRANSITIONS[from][to]?.includes(reason) === true;
}

/**
 * The record moved to `to` at `now` (epoch ms, the new stateSinceMs), with
 * `change`'s fields set too; a new object, the old one untouched. Throws
 * IllegalStateError (LLMGW_ILLEGAL_STATE) naming the replica, from, to and
 * reason when the table does not allow the move.
 */
export function transitionReplica(
  record: ReplicaRecord,
  to: ReplicaState,
  reason: ReplicaTransitionReason,
  now: number,
  change: ReplicaChange = {},
): ReplicaRecord {
  const from = record.state;
  if (!canTransition(from, to, reason)) {
    const allowed = Object.entries(REPLICA_TRANSITIONS[from])
      .filter(([, reasons]) => reasons?.includes(reason))
      .map(([state]) => state);
    throw new IllegalStateError(
      `replica ${record.id} cannot go from ${from} to ${to} (${reason}); ` +
        (allowed.length
          ? `${reason} moves a ${from} replica only to ${allowed.join(' or ')}`
          : `${reason} does not apply to a ${from} replica`) +
        ', so the rule that asked for it is wrong',
      { replicaId: record.id, from, to, reason },
    );
  }
  return { ...record, ...change, state: to, stateSinceMs: now };
}
