// The supervisor: runs this node's shards as engine processes and keeps them
// honest. Each engine gets its own process group (a stop reaches every worker
// it forked, so no orphan keeps a GPU), a port from the agent's range, a log
// file rotated by size, a readiness probe with a start timeout, and restarts
// with backoff when it crashes. Records in the state directory let the next
// agent adopt running engines instead of starting them twice. Separate from
// the engine adapters because how to run a process is the same for every
// engine, and from the agent because it is the one part that signals
// processes: processes, clock, probes and ports are injected, so its state
// machine is tested without any of them.
export { Supervisor, type SupervisorOptions } from './supervisor.js';
export type { ShardState, ShardStatus } from './shard.js';
export { networkReadinessProber } from './readiness.js';
