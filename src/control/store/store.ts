// The control plane's persistent state behind one class, over Kysely, for
// SQLite (embedded default) and Postgres (several control planes). Everything
// above it speaks in records, never in SQL, so the contract suite can run the
// same expectations against both dialects.
import type { Kysely, Transaction } from 'kysely';
import { LlmgwError } from '../../errors/index.js';
import { type ChangeTopic, type LeaderFence, type Queryable, StoreConnection, type StoreOptions } from './connection.js';
import type { Dialect } from './migrations.js';
import type { Database, NodesTable, ReplicasTable, ShardsTable } from './schema.js';
import { AuditRepository, type AuditInput, insertAudit } from './audit.js';
import { EventRepository } from './events.js';
import { ModelRepository } from './models.js';

export { type AuditActor, actorText, auditActor } from './actor.js';
export {
  CHANGES_CHANNEL,
  type ChangeTopic,
  type LeaderFence,
  type StoreLocation,
  type StoreOptions,
} from './connection.js';
export { postgresWhere } from './postgres.js';

export interface NodeRow {
  id: string;
  hostname: string | null;
  mgmtAddr: string | null;
  labels: Record<string, string>;
  adminState: string;
  credentialHash: string;
  /** Null: no derived management token yet (a migrated row); see inventory/node-secrets.ts. */
  mgmtNonce: string | null;
  mgmtTokenHash: string | null;
  approval: string;
  approvedHardware: string | null;
  hardwareChange: string | null;
  /** Epoch ms an admin removed it; null = a member of the fleet. */
  removedAtMs: number | null;
  agentVersion: string | null;
  protocolVersion: number | null;
  lastSeenMs: number | null;
  /** The newest report as stored: unvalidated JSON, read through the protocol's lenient schema by the inventory. */
  report: unknown;
  /** Epoch ms of its latest join (a rejoin too): until its first heartbeat, every instance counts its silence from here. */
  joinedAt: number;
}

export interface NodeJoin {
  id: string;
  hostname: string | null;
  mgmtAddr: string | null;
  labels: Record<string, string>;
  credentialHash: string;
  mgmtNonce: string;
  mgmtTokenHash: string;
  /** The approval a node that joins afresh (new, or removed before) gets; a rejoin keeps the one it has. */
  approvalIfNew: string;
  /** Set: the approval this join gives even a known node (another machine taking a lost node's id). */
  approval?: string;
  /**
   * The credential hash the caller decided on (null = no member held the
   * id). Checked in the transaction, so two joins racing for one id cannot
   * both win: the later finds the row changed and is refused. Absent = no check.
   */
  expectCredentialHash?: string | null;
  agentVersion: string | null;
  protocolVersion: number | null;
}

/** A per-node join token as listed: never its secret. */
export interface JoinTokenRow {
  id: string;
  node: string;
  expiresAtMs: number;
  createdAtMs: number;
  createdBy: string;
  /** Null = unused. */
  usedAtMs: number | null;
}

export interface HeartbeatWrite {
  id: string;
  lastSeenMs: number;
  /** Absent: the heartbeat carried no report; the stored one is kept. */
  report?: unknown;
  agentVersion: string | null;
  protocolVersion: number | null;
}

/** A replica as stored; states are not checked here (the reconciler reads them leniently). */
export interface ReplicaRow {
  id: string;
  model: string;
  profile: string;
  pool: string | null;
  fabric: string | null;
  state: string;
  endpoint: string | null;
  error: string | null;
  createdAtMs: number;
  lastUsedAtMs: number | null;
  failures: number;
  nextRetryAtMs: number | null;
  stateSinceMs: number;
  replaces: string | null;
  updatedAtMs: number;
  /** The engine's --api-key; null or absent = none. Never shown in a view or a log. */
  engineSecret?: string | null;
  /** Rank order. */
  shards: ShardRow[];
}

export interface ShardRow {
  id: string;
  nodeId: string;
  rank: number;
  gpuIndices: number[];
  state: string;
  error: string | null;
  endpoint: string | null;
}

/** What saveReplicas writes: the same shape, read-only, so the reconciler's records can be passed as they are. */
export type ReplicaWrite = Readonly<Omit<ReplicaRow, 'shards'>> & { readonly shards: readonly Readonly<Omit<ShardRow, 'gpuIndices'> & { gpuIndices: readonly number[] }>[] };

function toReplicaRow(r: ReplicasTable, shards: ShardsTable[]): ReplicaRow {
  return {
    id: r.id,
    model: r.model,
    profile: r.profile,
    pool: r.pool,
    fabric: r.fabric,
    state: r.state,
    endpoint: r.endpoint,
    error: r.error,
    createdAtMs: r.created_at,
    lastUsedAtMs: r.last_used_at,
    failures: r.failures,
    nextRetryAtMs: r.next_retry_at,
    stateSinceMs: r.state_since,
    replaces: r.replaces,
    updatedAtMs: r.updated_at,
    engineSecret: r.engine_secret,
    shards: shards
      .map((s) => ({
        id: s.id,
        nodeId: s.node_id,
        rank: s.rank,
        gpuIndices: JSON.parse(s.gpu_indices) as number[],
        state: s.state,
        error: s.error,
        endpoint: s.endpoint,
      }))
      .sort((a, b) => a.rank - b.rank),
  };
}

function toNodeRow(r: NodesTable): NodeRow {
  return {
    id: r.id,
    hostname: r.hostname,
    mgmtAddr: r.mgmt_addr,
    labels: JSON.parse(r.labels) as Record<string, string>,
    adminState: r.admin_state,
    credentialHash: r.credential_hash,
    mgmtNonce: r.mgmt_nonce,
    mgmtTokenHash: r.mgmt_token_hash,
    approval: r.approval,
    approvedHardware: r.approved_hardware,
    hardwareChange: r.hardware_change,
    removedAtMs: r.removed_at,
    agentVersion: r.agent_version,
    protocolVersion: r.protocol_version,
    lastSeenMs: r.last_seen,
    report: r.report === null ? null : (JSON.parse(r.report) as unknown),
    joinedAt: r.joined_at,
  };
}

export class Store {
  readonly models: ModelRepository;
  readonly audit: AuditRepository;
  readonly events: EventRepository;

  private constructor(readonly connection: StoreConnection) {
    this.models = new ModelRepository(connection);
    this.audit = new AuditRepository(connection);
    this.events = new EventRepository(connection);
  }

  /** Opens the store and brings its schema up to date. */
  static async open(options: StoreOptions): Promise<Store> {
    return new Store(await StoreConnection.open(options));
  }

  /** The connection's Kysely handle, for the modules that still query it themselves (stored keys, usage and sessions). */
  get db(): Kysely<Database> {
    return this.connection.db;
  }

  private get dialect(): Dialect {
    return this.connection.dialect;
  }

  private now(): number {
    return this.connection.now();
  }

  /** Fences replica and shard writes from now on (Postgres with several instances); null removes the fence. */
  setLeaderFence(fence: LeaderFence | null): void {
    this.connection.setLeaderFence(fence);
  }

  async close(): Promise<void> {
    await this.connection.close();
  }

  // --- nodes ---

  /** Every node; with `changedSinceMs`, only those heard from or changed (joined, state set) at or after it. */
  async listNodes(options: { changedSinceMs?: number } = {}): Promise<NodeRow[]> {
    let query = this.db.selectFrom('nodes').selectAll().orderBy('id');
    const since = options.changedSinceMs;
    if (since !== undefined) query = query.where((eb) => eb.or([eb('last_seen', '>=', since), eb('updated_at', '>=', since)]));
    const rows = await query.execute();
    return rows.map(toNodeRow);
  }

  /**
   * Records a join: a new node, or a node joining again (new credential,
   * fresh identity facts). The admin state and approval survive a rejoin: an
   * agent that restarts must not uncordon or approve its own node. A node an
   * admin removed joins as new: its old state, report and approval are gone.
   */
  async upsertNodeOnJoin(node: NodeJoin, audit: AuditInput): Promise<NodeRow> {
    const at = this.now();
    const raced = () => new LlmgwError('LLMGW_NODE_ID_TAKEN', `node id "${node.id}" was taken by another join at the same moment; this join was refused, and the agent retries`);
    return this.db.transaction().execute(async (tx) => {
      // Postgres runs transactions at READ COMMITTED: without the row lock two
      // joins under one id both read the old credential and both win. The lock
      // makes the later one wait and then read what the first wrote. SQLite
      // runs one write transaction at a time, and has no FOR UPDATE.
      const select = tx.selectFrom('nodes').selectAll().where('id', '=', node.id);
      const existing = await (this.dialect === 'postgres' ? select.forUpdate() : select).executeTakeFirst();
      const held = existing && existing.removed_at === null ? existing.credential_hash : null;
      if (node.expectCredentialHash !== undefined && held !== node.expectCredentialHash) throw raced();
      const values = {
        hostname: node.hostname,
        mgmt_addr: node.mgmtAddr,
        labels: JSON.stringify(node.labels),
        credential_hash: node.credentialHash,
        mgmt_nonce: node.mgmtNonce,
        mgmt_token_hash: node.mgmtTokenHash,
        agent_version: node.agentVersion,
        protocol_version: node.protocolVersion,
        updated_at: at,
        // Every join, a rejoin too: another control plane judges a node that has not sent a heartbeat since by it.
        joined_at: at,
        ...(node.approval === undefined ? {} : { approval: node.approval }),
      };
      const afresh = {
        admin_state: 'ready',
        last_seen: null,
        report: null,
        approval: node.approvalIfNew,
        approved_hardware: null,
        hardware_change: null,
        removed_at: null,
      };
      // Each write also checks that the row is still as read, so a join that lost the race
      // changes nothing even where the lock above is not taken: no row to lock (a new id).
      let written: bigint | undefined;
      if (existing) {
        const result = await tx
          .updateTable('nodes')
          .set(existing.removed_at === null ? values : { ...values, ...afresh })
          .where('id', '=', node.id)
          .where('credential_hash', '=', existing.credential_hash)
          .where('removed_at', existing.removed_at === null ? 'is' : 'is not', null)
          .executeTakeFirst();
        written = result.numUpdatedRows;
      } else {
        const result = await tx
          .insertInto('nodes')
          .values({ id: node.id, ...values, ...afresh })
          .onConflict((oc) => oc.column('id').doNothing())
          .executeTakeFirst();
        written = result.numInsertedOrUpdatedRows;
      }
      if (Number(written ?? 0) === 0) throw raced();
      await insertAudit(tx, at, audit);
      await this.announce(tx, 'nodes');
      const row = await tx.selectFrom('nodes').selectAll().where('id', '=', node.id).executeTakeFirstOrThrow();
      return toNodeRow(row);
    });
  }

  /** One node as stored, removed or not; undefined when the id was never seen. */
  async getNode(id: string): Promise<NodeRow | undefined> {
    const row = await this.db.selectFrom('nodes').selectAll().where('id', '=', id).executeTakeFirst();
    return row ? toNodeRow(row) : undefined;
  }

  /** Records a new derived management token (its nonce and hash); false when there is no such node. */
  async setNodeMgmtToken(id: string, nonce: string, hash: string): Promise<boolean> {
    const result = await this.db
      .updateTable('nodes')
      .set({ mgmt_nonce: nonce, mgmt_token_hash: hash, updated_at: this.now() })
      .where('id', '=', id)
      .where('removed_at', 'is', null)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }

  /**
   * Sets a node's approval, the hardware it is approved with and the change
   * not yet approved, with an audit row when an admin acted; false when
   * there is no such node.
   */
  async setNodeApproval(
    id: string,
    fields: { approval: string; approvedHardware: string | null; hardwareChange: string | null },
    audit: AuditInput | null,
  ): Promise<boolean> {
    const at = this.now();
    return this.db.transaction().execute(async (tx) => {
      const result = await tx
        .updateTable('nodes')
        .set({ approval: fields.approval, approved_hardware: fields.approvedHardware, hardware_change: fields.hardwareChange, updated_at: at })
        .where('id', '=', id)
        .where('removed_at', 'is', null)
        .executeTakeFirst();
      if (Number(result.numUpdatedRows) === 0) return false;
      if (audit) await insertAudit(tx, at, audit);
      await this.announce(tx, 'nodes');
      return true;
    });
  }

  /**
   * Removes a node from the fleet: its credential and management token are
   * wiped and its id is free to join again. The row stays as a tombstone so
   * other control planes on this store see the removal (a deleted row
   * would look like an unchanged one). False when there is no such node.
   */
  async removeNode(id: string, audit: AuditInput): Promise<boolean> {
    const at = this.now();
    return this.db.transaction().execute(async (tx) => {
      const result = await tx
        .updateTable('nodes')
        .set({ removed_at: at, credential_hash: '', mgmt_nonce: null, mgmt_token_hash: null, updated_at: at })
        .where('id', '=', id)
        .where('removed_at', 'is', null)
        .executeTakeFirst();
      if (Number(result.numUpdatedRows) === 0) return false;
      await insertAudit(tx, at, audit);
      await this.announce(tx, 'nodes');
      return true;
    });
  }

  // --- per-node join tokens ---

  async createJoinToken(token: { id: string; node: string; hash: string; expiresAtMs: number; createdBy: string }, audit: AuditInput): Promise<JoinTokenRow> {
    const at = this.now();
    await this.db.transaction().execute(async (tx) => {
      await tx
        .insertInto('join_tokens')
        .values({ id: token.id, node: token.node, hash: token.hash, expires_at: token.expiresAtMs, created_at: at, created_by: token.createdBy, used_at: null })
        .execute();
      await insertAudit(tx, at, audit);
    });
    return { id: token.id, node: token.node, expiresAtMs: token.expiresAtMs, createdAtMs: at, createdBy: token.createdBy, usedAtMs: null };
  }

  /** Newest first. */
  async listJoinTokens(): Promise<JoinTokenRow[]> {
    const rows = await this.db.selectFrom('join_tokens').selectAll().orderBy('created_at', 'desc').orderBy('id').execute();
    return rows.map((r) => ({ id: r.id, node: r.node, expiresAtMs: r.expires_at, createdAtMs: r.created_at, createdBy: r.created_by, usedAtMs: r.used_at }));
  }

  /**
   * Uses up the token with this hash for this node, if it is unused and
   * unexpired: one conditional update, so two control planes racing with
   * the same token cannot both win. Null when it admits nothing.
   */
  async consumeJoinToken(hash: string, nodeId: string, nowMs: number): Promise<JoinTokenRow | null> {
    const result = await this.db
      .updateTable('join_tokens')
      .set({ used_at: nowMs })
      .where('hash', '=', hash)
      .where('node', '=', nodeId)
      .where('used_at', 'is', null)
      .where('expires_at', '>', nowMs)
      .executeTakeFirst();
    if (Number(result.numUpdatedRows) === 0) return null;
    const r = await this.db.selectFrom('join_tokens').selectAll().where('hash', '=', hash).executeTakeFirstOrThrow();
    return { id: r.id, node: r.node, expiresAtMs: r.expires_at, createdAtMs: r.created_at, createdBy: r.created_by, usedAtMs: r.used_at };
  }

  /** Sets a node's admin state with its audit row; false when there is no such node. */
  async setNodeState(id: string, state: string, audit: AuditInput): Promise<boolean> {
    const at = this.now();
    return this.db.transaction().execute(async (tx) => {
      const result = await tx.updateTable('nodes').set({ admin_state: state, updated_at: at }).where('id', '=', id).executeTakeFirst();
      if (Number(result.numUpdatedRows) === 0) return false;
      await insertAudit(tx, at, audit);
      await this.announce(tx, 'nodes');
      return true;
    });
  }

  /**
   * Writes the newest heartbeat of many nodes in one transaction. Heartbeats
   * arrive hundreds a second in a large fleet; one fsync per batch instead of
   * per heartbeat is what keeps the store from being the bottleneck. A write
   * never moves last_seen backwards (another control plane may have newer).
   */
  async saveHeartbeats(beats: readonly HeartbeatWrite[]): Promise<void> {
    if (beats.length === 0) return;
    await this.db.transaction().execute(async (tx) => {
      for (const b of beats) {
        await tx
          .updateTable('nodes')
          .set({ last_seen: b.lastSeenMs, report: b.report === undefined ? undefined : JSON.stringify(b.report), agent_version: b.agentVersion, protocol_version: b.protocolVersion })
          .where('id', '=', b.id)
          .where((eb) => eb.or([eb('last_seen', 'is', null), eb('last_seen', '<=', b.lastSeenMs)]))
          .execute();
      }
    });
  }

  // --- replicas ---

  /** Every replica with its shards, id order. */
  async listReplicas(): Promise<ReplicaRow[]> {
    const replicas = await this.db.selectFrom('replicas').selectAll().orderBy('id').execute();
    const shards = await this.db.selectFrom('shards').selectAll().orderBy('replica_id').orderBy('rank').execute();
    const byReplica = new Map<string, ShardsTable[]>();
    for (const s of shards) {
      const list = byReplica.get(s.replica_id) ?? [];
      list.push(s);
      byReplica.set(s.replica_id, list);
    }
    return replicas.map((r) => toReplicaRow(r, byReplica.get(r.id) ?? []));
  }

  /** Inserts a new replica with its shards. */
  async insertReplica(replica: ReplicaWrite): Promise<void> {
    await this.saveReplicas([replica], []);
  }

  /**
   * Writes what a reconciler pass changed, in one transaction: each replica
   * in `upserts` replaces its stored row and shards (state, endpoint, error,
   * a retry's new shards), and each id in `removed` is deleted with its
   * shards. One transaction so a crash never leaves a replica without the
   * shards that make it up.
   */
  async saveReplicas(upserts: readonly ReplicaWrite[], removed: readonly string[]): Promise<void> {
    if (upserts.length === 0 && removed.length === 0) return;
    await this.db.transaction().execute(async (tx) => {
      await this.checkFence(tx);
      if (removed.length) {
        await tx.deleteFrom('shards').where('replica_id', 'in', [...removed]).execute();
        await tx.deleteFrom('replicas').where('id', 'in', [...removed]).execute();
      }
      for (const r of upserts) {
        const row = {
          model: r.model,
          profile: r.profile,
          pool: r.pool,
          fabric: r.fabric,
          state: r.state,
          endpoint: r.endpoint,
          error: r.error,
          created_at: r.createdAtMs,
          last_used_at: r.lastUsedAtMs,
          failures: r.failures,
          next_retry_at: r.nextRetryAtMs,
          state_since: r.stateSinceMs,
          replaces: r.replaces,
          updated_at: r.updatedAtMs,
          engine_secret: r.engineSecret ?? null,
        };
        await tx
          .insertInto('replicas')
          .values({ id: r.id, ...row })
          .onConflict((oc) => oc.column('id').doUpdateSet(row))
          .execute();
        await tx.deleteFrom('shards').where('replica_id', '=', r.id).execute();
        if (r.shards.length) {
          await tx
            .insertInto('shards')
            .values(
              r.shards.map((s) => ({
                id: s.id,
                replica_id: r.id,
                node_id: s.nodeId,
                rank: s.rank,
                gpu_indices: JSON.stringify(s.gpuIndices),
                state: s.state,
                error: s.error,
                endpoint: s.endpoint,
              })),
            )
            .execute();
        }
      }
      await this.announce(tx, 'replicas');
    });
  }

  /** Sets one replica's state (and error, when given); false when there is no such replica. */
  async setReplicaState(id: string, state: string, options: { error?: string | null; stateSinceMs?: number } = {}): Promise<boolean> {
    const at = this.now();
    return this.db.transaction().execute(async (tx) => {
      await this.checkFence(tx);
      const result = await tx
        .updateTable('replicas')
        .set({ state, updated_at: at, state_since: options.stateSinceMs ?? at, ...(options.error === undefined ? {} : { error: options.error }) })
        .where('id', '=', id)
        .executeTakeFirst();
      await this.announce(tx, 'replicas');
      return Number(result.numUpdatedRows) > 0;
    });
  }

  /** Sets one shard's state as its agent reported it; false when there is no such shard. */
  async setShardState(id: string, state: string, options: { error?: string | null; endpoint?: string | null } = {}): Promise<boolean> {
    return this.db.transaction().execute(async (tx) => {
      await this.checkFence(tx);
      const result = await tx
        .updateTable('shards')
        .set({ state, ...(options.error === undefined ? {} : { error: options.error }), ...(options.endpoint === undefined ? {} : { endpoint: options.endpoint }) })
        .where('id', '=', id)
        .executeTakeFirst();
      await this.announce(tx, 'replicas');
      return Number(result.numUpdatedRows) > 0;
    });
  }

  /** Tells the other instances that `topic` changed; see StoreConnection.announce. */
  async announce(db: Queryable, topic: ChangeTopic): Promise<void> {
    await this.connection.announce(db, topic);
  }

  private async checkFence(tx: Transaction<Database>): Promise<void> {
    await this.connection.checkFence(tx);
  }
}
