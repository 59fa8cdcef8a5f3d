// The store: where the control plane keeps what must survive a restart (the
// catalog, the audit log, nodes, replicas, keys and usage) and what several
// control planes on one database tell each other. SQLite by default, Postgres
// when several control planes share one. A connection (open, migrate, the
// leader fence) and one repository per kind of record, gathered in Store.
export { Store } from './store.js';
export {
  CHANGES_CHANNEL,
  StoreConnection,
  type ChangeTopic,
  type LeaderFence,
  type Queryable,
  type StoreLocation,
  type StoreOptions,
} from './connection.js';
export { openSqlite, type StoreWarning } from './sqlite.js';
export { openPostgres } from './postgres.js';
export { actorText, auditActor, type AuditActor } from '../../http/actor.js';
export { AuditRepository, type AuditEntry, type AuditInput } from './audit.js';
export { EventRepository, type EventInput, type EventRow } from './events.js';
export { JoinTokenRepository, type JoinTokenRow } from './join-tokens.js';
export { ModelRepository, type StoredModel } from './models.js';
export { NodeRepository, type HeartbeatWrite, type NodeJoin, type NodeRow } from './nodes.js';
export { ReplicaRepository, type ReplicaRow, type ReplicaWrite, type ShardRow } from './replicas.js';
export { LeadershipRepository, type Leadership, type StoredLeaderNotes } from './leadership.js';
export { ControlPlaneRepository, type ControlPlaneRow } from './control-planes.js';
export { ShardReportRepository, type ShardReportRow } from './shard-reports.js';
export { ReplicaUseRepository, type ReplicaUseRow } from './replica-use.js';
export { ModelDemandRepository } from './model-demand.js';
export { RateCountRepository, type RateCount } from './rate-counts.js';
export { ResponseRepository, type ResponseRow, type ResponseSize } from './responses.js';
export type { Database } from './schema.js';
export type { Dialect } from './migrations.js';
export { StoredSessions, type SessionBackend, type StoredSession } from './sessions.js';
