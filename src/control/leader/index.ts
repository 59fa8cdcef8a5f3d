// Several control planes on one Postgres: leader election for the
// reconciler (an advisory lock on a dedicated connection, writes fenced by an
// epoch), the shared state every instance reads and writes through the
// store, and per-key rate limits enforced across instances. Separate from the
// reconciler and router so that a single instance (SQLite) carries none of it.
export { Cluster, RECONCILER_ROLE, type ClusterOptions, type ClusterParts } from './cluster.js';
export { LeaderElector, type LeaderElectorOptions } from './elector.js';
export { SharedRateLimiter, type SharedRateLimiterOptions } from './shared-rate-limit.js';
export { registerControlPlanesRoute, type ControlPlanesRouteOptions } from './routes.js';
