// Per-node join tokens: single-use secrets an admin makes for one node id,
// kept as hashes. Apart from the nodes because a token is made before its
// node exists and is used up by a conditional update of its own, never
// through the node's row.
import { type AuditInput, insertAudit } from './audit.js';
import type { StoreConnection } from './connection.js';

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

export class JoinTokenRepository {
  constructor(private readonly connection: StoreConnection) {}

  /** Stores a new token (its hash, never the secret) with its audit row. */
  async create(
    token: { id: string; node: string; hash: string; expiresAtMs: number; createdBy: string },
    audit: AuditInput,
  ): Promise<JoinTokenRow> {
    const at = this.connection.now();
    await this.connection.db.transaction().execute(async (tx) => {
      await tx
        .insertInto('join_tokens')
        .values({
          id: token.id,
          node: token.node,
          hash: token.hash,
          expires_at: token.expiresAtMs,
          created_at: at,
          created_by: token.createdBy,
          used_at: null,
        })
        .execute();
      await insertAudit(tx, at, audit);
    });
    return {
      id: token.id,
      node: token.node,
      expiresAtMs: token.expiresAtMs,
      createdAtMs: at,
      createdBy: token.createdBy,
      usedAtMs: null,
    };
  }

  /** Newest first. */
  async list(): Promise<JoinTokenRow[]> {
    const rows = await this.connection.db
      .selectFrom('join_tokens')
      .selectAll()
      .orderBy('created_at', 'desc')
      .orderBy('id')
      .execute();
    return rows.map((r) => ({
      id: r.id,
      node: r.node,
      expiresAtMs: r.expires_at,
      createdAtMs: r.created_at,
      createdBy: r.created_by,
      usedAtMs: r.used_at,
    }));
  }

  /**
   * Uses up the token with this hash for this node, if it is unused and
   * unexpired: one conditional update, so two control planes racing with
   * the same token cannot both win. Null when it admits nothing.
   */
  async consume(hash: string, nodeId: string, nowMs: number): Promise<JoinTokenRow | null> {
    const result = await this.connection.db
      .updateTable('join_tokens')
      .set({ used_at: nowMs })
      .where('hash', '=', hash)
      .where('node', '=', nodeId)
      .where('used_at', 'is', null)
      .where('expires_at', '>', nowMs)
      .executeTakeFirst();
    if (Number(result.numUpdatedRows) === 0) return null;
    const r = await this.connection.db
      .selectFrom('join_tokens')
      .selectAll()
      .where('hash', '=', hash)
      .executeTakeFirstOrThrow();
    return {
      id: r.id,
      node: r.node,
      expiresAtMs: r.expires_at,
      createdAtMs: r.created_at,
      createdBy: r.created_by,
      usedAtMs: r.used_at,
    };
  }
}
