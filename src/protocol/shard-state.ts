// A shard's state, defined once for both sides: the agent reports it in each
// heartbeat, the control plane keeps it (and shows it to ctl), and the
// agent's supervisor drives the part of it that has an engine process. Each
// side's type is derived from the one list here, so a state added on one
// side is a state the other side's code must handle.
import { z } from 'zod';

/**
 * 'pending': assigned, not yet reported (the control plane's own; an agent
 * has no reason to send it). 'fetching': the agent is getting the weights. 'starting': the
 * engine runs and has not answered its probe yet. 'ready': it answered.
 * 'failed': it exited or never became ready. 'stopping': asked to exit, not
 * yet gone. 'stopped': nothing of it runs.
 */
export const SHARD_STATES = ['pending', 'fetching', 'starting', 'ready', 'failed', 'stopping', 'stopped'] as const;
export const ShardStateSchema = z.enum(SHARD_STATES);
export type ShardState = z.infer<typeof ShardStateSchema>;

/** The states of an engine process, which the agent's supervisor drives: 'pending' and 'fetching' come before there is one. */
export type EngineShardState = Exclude<ShardState, 'pending' | 'fetching'>;

/**
 * A reported state as the control plane reads it: a state it knows, or
 * 'unknown' for one it does not (sent by a newer agent), which leaves the
 * shard in the state last known. Refusing it instead would refuse the whole
 * heartbeat, and a node whose heartbeats are refused looks silent and has
 * its replicas replaced, for one word an upgrade added. A state that is not
 * a string at all is refused, as any malformed field is.
 */
export const ReadShardStateSchema = z
  .string()
  .transform((state): ShardState | 'unknown' => ShardStateSchema.safeParse(state).data ?? 'unknown');
