// The fleet's nodes as the store keeps them: identity, credentials (as
// hashes), admin state, approval, and the newest heartbeat. A removed node
// stays as a tombstone so every instance sees the removal.
import { LlmgwError } from '../../errors/index.js';
import { type AuditInput, insertAudit } from './audit.js';
import type { StoreConnection } from './connection.js';
import { GroupCommit } from './group-commit.js';
import { setImmediate as yieldToListeners } from 'node:timers/promises';
import { type Kysely, type Selectable, sql, type Transaction } from 'kysely';
import type { Database, NodesTable } from './schema.js';

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
  /** Moves on every write to the row (not on heartbeats' last_seen): whether a row read again holds anything new. */
  version: number;
}

/** A node row's id and version: enough to tell whether it changed since it was last read whole. */
export interface NodeVersion {
  id: string;
  version: number;
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

export interface HeartbeatWrite {
  id: string;
  lastSeenMs: number;
  /** Absent: the report did not change since it was last written; the stored one is kept. */
  report?: unknown;
  /** Absent: the agent's versions did not change; the stored ones are kept. */
  versions?: { agentVersion: string | null; protocolVersion: number | null };
  /** The GPUs the node's first report showed, to approve it with where none are yet; absent = nothing to set. */
  approvedHardware?: string;
}

/** A node's newest saved heartbeat, without the rest of its row. */
export interface LastSeenRow {
  id: string;
  lastSeenMs: number;
}

/**
 * Rows per statement of a flush's last_seen upsert: two parameters each,
 * well inside SQLite's 32,766 and Postgres's 65,535, and few statements for
 * a flush of thousands.
 */
const LAST_SEEN_ROWS_PER_STATEMENT = 1000;

/** Node rows (reports, versions, first GPUs) a flush writes per transaction; more wait for the next, after the listeners had a turn. */
const ROW_WRITES_PER_TRANSACTION = 100;

/** Ids per `IN (…)` list when rows are read by id. */
const IDS_PER_STATEMENT = 1000;

/** The next version of a row being updated; an inserted row starts at the column's default. */
const nextVersion = sql<number>`version + 1`;

export class NodeRepository {
  /** Joins, committed together on SQLite when they arrive together (src/control/store/group-commit.ts). */
  private readonly joins: GroupCommit;

  constructor(private readonly connection: StoreConnection) {
    this.joins = new GroupCommit(connection);
  }

  /**
   * Every node; with `changedSinceMs`, only those changed (joined, state
   * set, report or versions written, removed) at or after it. A heartbeat
   * that changed only liveness does not count: lastSeenSince reads those.
   */
  async list(options: { changedSinceMs?: number } = {}): Promise<NodeRow[]> {
    let query = withLastSeen(this.connection.db).orderBy('nodes.id');
    const since = options.changedSinceMs;
    if (since !== undefined) query = query.where('nodes.updated_at', '>=', since);
    const rows = await query.execute();
    return rows.map(toNodeRow);
  }

  /**
   * The id and version of each node row written at or after `sinceMs`: a
   * reader that kept the versions it merged fetches whole only the rows
   * that moved on (rowsById), instead of every row in its look-back window
   * each time it looks.
   */
  async versionsSince(sinceMs: number): Promise<NodeVersion[]> {
    const rows = await this.connection.db
      .selectFrom('nodes')
      .select(['id', 'version'])
      .where('updated_at', '>=', sinceMs)
      .execute();
    return rows.map((r) => ({ id: r.id, version: Number(r.version) }));
  }

  /** These nodes' rows, removed ones too; an id with no row is left out. */
  async rowsById(ids: readonly string[]): Promise<NodeRow[]> {
    const out: NodeRow[] = [];
    for (let i = 0; i < ids.length; i += IDS_PER_STATEMENT) {
      const rows = await withLastSeen(this.connection.db)
        .where('nodes.id', 'in', ids.slice(i, i + IDS_PER_STATEMENT))
        .execute();
      out.push(...rows.map(toNodeRow));
    }
    return out;
  }

  /** Nodes whose newest saved heartbeat is at or after `sinceMs`: liveness only, a few bytes a node. */
  async lastSeenSince(sinceMs: number): Promise<LastSeenRow[]> {
    const rows = await this.connection.db
      .selectFrom('node_last_seen')
      .select(['id', 'last_seen'])
      .where('last_seen', '>=', sinceMs)
      .execute();
    return rows.map((r) => ({ id: r.id, lastSeenMs: r.last_seen }));
  }

  /**
   * Records a join: a new node, or a node joining again (new credential,
   * fresh identity facts). The admin state and approval survive a rejoin: an
   * agent that restarts must not uncordon or approve its own node. A node an
   * admin removed joins as new: its old state, report and approval are gone.
   */
  async upsertOnJoin(node: NodeJoin, audit: AuditInput): Promise<NodeRow> {
    const at = this.connection.now();
    const raced = () =>
      new LlmgwError(
        'LLMGW_NODE_ID_TAKEN',
        `node id "${node.id}" was taken by another join at the same moment; this join was refused, and the agent retries`,
      );
    // Grouped on SQLite: a fleet joining at once shares fsyncs instead of queueing one per join.
    return this.joins.run(async (tx) => {
      // Postgres runs transactions at READ COMMITTED: without the row lock two
      // joins under one id both read the old credential and both win. The lock
      // makes the later one wait and then read what the first wrote. SQLite
      // runs one write transaction at a time, and has no FOR UPDATE.
      const select = tx.selectFrom('nodes').selectAll().where('id', '=', node.id);
      const existing = await this.connection.forUpdate(select).executeTakeFirst();
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
          .set({ ...(existing.removed_at === null ? values : { ...values, ...afresh }), version: nextVersion })
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
      // Joining afresh: no heartbeat yet, whatever an earlier member under this id sent.
      if (!existing || existing.removed_at !== null)
        await tx.deleteFrom('node_last_seen').where('id', '=', node.id).execute();
      await insertAudit(tx, at, audit);
      await this.connection.announce(tx, 'nodes');
      const row = await withLastSeen(tx).where('nodes.id', '=', node.id).executeTakeFirstOrThrow();
      return toNodeRow(row);
    });
  }

  /** One node as stored, removed or not; undefined when the id was never seen. */
  async get(id: string): Promise<NodeRow | undefined> {
    const row = await withLastSeen(this.connection.db).where('nodes.id', '=', id).executeTakeFirst();
    return row ? toNodeRow(row) : undefined;
  }

  /** Records a new derived management token (its nonce and hash); false when there is no such node. */
  async setMgmtToken(id: string, nonce: string, hash: string): Promise<boolean> {
    const result = await this.connection.db
      .updateTable('nodes')
      .set({ mgmt_nonce: nonce, mgmt_token_hash: hash, updated_at: this.connection.now(), version: nextVersion })
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
  async setApproval(
    id: string,
    fields: { approval: string; approvedHardware: string | null; hardwareChange: string | null },
    audit: AuditInput | null,
  ): Promise<boolean> {
    const at = this.connection.now();
    return this.connection.db.transaction().execute(async (tx) => {
      const result = await tx
        .updateTable('nodes')
        .set({
          approval: fields.approval,
          approved_hardware: fields.approvedHardware,
          hardware_change: fields.hardwareChange,
          updated_at: at,
          version: nextVersion,
        })
        .where('id', '=', id)
        .where('removed_at', 'is', null)
        .executeTakeFirst();
      if (Number(result.numUpdatedRows) === 0) return false;
      if (audit) await insertAudit(tx, at, audit);
      await this.connection.announce(tx, 'nodes');
      return true;
    });
  }

  /**
   * Removes a node from the fleet: its credential and management token are
   * wiped and its id is free to join again. The row stays as a tombstone so
   * other control planes on this store see the removal (a deleted row
   * would look like an unchanged one). False when there is no such node.
   */
  async remove(id: string, audit: AuditInput): Promise<boolean> {
    const at = this.connection.now();
    return this.connection.db.transaction().execute(async (tx) => {
      const result = await tx
        .updateTable('nodes')
        .set({
          removed_at: at,
          credential_hash: '',
          mgmt_nonce: null,
          mgmt_token_hash: null,
          updated_at: at,
          version: nextVersion,
        })
        .where('id', '=', id)
        .where('removed_at', 'is', null)
        .executeTakeFirst();
      if (Number(result.numUpdatedRows) === 0) return false;
      await insertAudit(tx, at, audit);
      await this.connection.announce(tx, 'nodes');
      return true;
    });
  }

  /** Sets a node's admin state with its audit row; false when there is no such node. */
  async setState(id: string, state: string, audit: AuditInput): Promise<boolean> {
    const at = this.connection.now();
    return this.connection.db.transaction().execute(async (tx) => {
      const result = await tx
        .updateTable('nodes')
        .set({ admin_state: state, updated_at: at, version: nextVersion })
        .where('id', '=', id)
        .executeTakeFirst();
      if (Number(result.numUpdatedRows) === 0) return false;
      await insertAudit(tx, at, audit);
      await this.connection.announce(tx, 'nodes');
      return true;
    });
  }

  /**
   * Writes the newest heartbeat of many nodes: every last_seen in one
   * transaction, with the first hundred node rows; any more rows in
   * transactions of a hundred after it. Heartbeats arrive hundreds a second
   * in a large fleet; one fsync per batch instead of per heartbeat, and one
   * statement per thousand last_seen values (or hundred rows) instead of
   * one per node, is what keeps the store from being the bottleneck. A
   * write never moves last_seen backwards, nor replaces a report sent with
   * a newer heartbeat (another control plane may have newer). Each id at
   * most once per call: Postgres refuses an upsert that touches one row twice.
   */
  async saveHeartbeats(beats: readonly HeartbeatWrite[]): Promise<void> {
    if (beats.length === 0) return;
    const at = this.connection.now();
    // Rare: a report that changed what placement reads, an agent of another version, a node's first GPUs.
    const rowWrites = beats.filter(
      (b) => b.report !== undefined || b.versions !== undefined || b.approvedHardware !== undefined,
    );
    await this.connection.db.transaction().execute(async (tx) => {
      for (let i = 0; i < beats.length; i += LAST_SEEN_ROWS_PER_STATEMENT) {
        const rows = beats
          .slice(i, i + LAST_SEEN_ROWS_PER_STATEMENT)
          .map((b) => ({ id: b.id, last_seen: b.lastSeenMs }));
        await tx
          .insertInto('node_last_seen')
          .values(rows)
          .onConflict((oc) =>
            oc
              .column('id')
              .doUpdateSet((eb) => ({ last_seen: eb.ref('excluded.last_seen') }))
              .whereRef('node_last_seen.last_seen', '<', 'excluded.last_seen'),
          )
          .execute();
      }
      await writeNodeRows(tx, rowWrites.slice(0, ROW_WRITES_PER_TRANSACTION), at);
    });
    // Not rare after a restart: every node's first report is a row write.
    // SQLite runs a transaction without ever yielding, and two thousand of
    // them blocked every heartbeat for a third of a second; in transactions
    // of a hundred the listener is served in between. Each write stands on
    // its own (an earlier heartbeat's last_seen is already saved above), so
    // a failure part way leaves nothing half-written that a retry would not mend.
    for (let i = ROW_WRITES_PER_TRANSACTION; i < rowWrites.length; i += ROW_WRITES_PER_TRANSACTION) {
      await yieldToListeners();
      await this.connection.db
        .transaction()
        .execute((tx) => writeNodeRows(tx, rowWrites.slice(i, i + ROW_WRITES_PER_TRANSACTION), at));
    }
  }
}

/**
 * A flush's writes to whole node rows, in one statement: a statement a row
 * cost a query build, a compile and (on SQLite) a prepare each, 0.3 ms a
 * row, and every node's first report after a restart is one. Each row is
 * guarded so that a newer heartbeat another control plane saved is not
 * overwritten. The rows come as text where Postgres cannot tell a
 * parameter's type inside VALUES, and are cast where they are used.
 */
async function writeNodeRows(tx: Transaction<Database>, writes: readonly HeartbeatWrite[], at: number): Promise<void> {
  if (writes.length === 0) return;
  const rows = writes.map(
    (b) =>
      sql`(${b.id}, ${b.report === undefined ? null : JSON.stringify(b.report)}, ${b.versions === undefined ? '0' : '1'}, ${b.versions?.agentVersion ?? null}, ${b.versions?.protocolVersion ?? null}, ${b.approvedHardware ?? null}, ${b.lastSeenMs})`,
  );
  await sql`
    with w (id, report, has_versions, agent_version, protocol_version, approved_hardware, last_seen) as (values ${sql.join(rows)})
    update nodes set
      report = coalesce(w.report, nodes.report),
      agent_version = case when w.has_versions = '1' then w.agent_version else nodes.agent_version end,
      protocol_version = case when w.has_versions = '1' then cast(w.protocol_version as integer) else nodes.protocol_version end,
      approved_hardware = coalesce(nodes.approved_hardware, w.approved_hardware),
      updated_at = ${at},
      version = ${nextVersion}
    from w
    where nodes.id = w.id
      and not exists (select 1 from node_last_seen where node_last_seen.id = nodes.id and node_last_seen.last_seen > cast(w.last_seen as bigint))
  `.execute(tx);
}

/** The nodes rows with each one's newest saved heartbeat beside it (null = none since joining). */
function withLastSeen(db: Kysely<Database>) {
  return db
    .selectFrom('nodes')
    .leftJoin('node_last_seen', 'node_last_seen.id', 'nodes.id')
    .selectAll('nodes')
    .select('node_last_seen.last_seen');
}

function toNodeRow(r: Selectable<NodesTable> & { last_seen: number | null }): NodeRow {
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
    version: Number(r.version),
  };
}
