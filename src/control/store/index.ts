// The store: where the control plane keeps what must survive a restart (the
// catalog, the audit log, and, as later parts land, nodes, replicas, keys and
// usage). SQLite by default, Postgres when several control planes share one.
export * from './store.js';
export type { Database } from './schema.js';
export type { Dialect } from './migrations.js';
export * from './shared-state.js';
export * from './sessions.js';
