// Several control planes on one Postgres: leader election for the
// reconciler (an advisory lock on a dedicated connection, writes fenced by an
// epoch), the shared state every instance reads and writes through the
// store, and per-key rate limits enforced across instances. Separate from the
// reconciler and router so that a single instance (SQLite) carries none of it.
export { Cluster, type ClusterOptions } from './cluster.js';
export { registerControlPlanesRoute } from './routes.js';
export { GatewayDemand } from './gateway-demand.js';
