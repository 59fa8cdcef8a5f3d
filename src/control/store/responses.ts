// Kept Responses API responses: the store's SQL for them, in rows. The
// rules (time to live, the size cap per key, what is too big to keep) are
// src/control/responses/stored.ts's; this file knows only that every read
// and delete is by key and that an expired row is as good as gone.
import type { StoreConnection } from './connection.js';

export interface ResponseRow {
  readonly id: string;
  readonly keyId: string;
  readonly model: string;
  readonly createdAtMs: number;
  readonly expiresAtMs: number;
  /** UTF-8 bytes of `body`. */
  readonly bytes: number;
  /** JSON of the response and its conversation; the store does not read it. */
  readonly body: string;
}

/** What the size cap needs of a key's rows: no bodies. */
export interface ResponseSize {
  readonly id: string;
  readonly bytes: number;
}

export class ResponseRepository {
  constructor(private readonly connection: StoreConnection) {}

  /** Keeps a row; one with the same id (the same response kept again) is replaced. */
  async put(row: ResponseRow): Promise<void> {
    const values = {
      id: row.id,
      key_id: row.keyId,
      model: row.model,
      created_at_ms: row.createdAtMs,
      expires_at_ms: row.expiresAtMs,
      bytes: row.bytes,
      body: row.body,
    };
    const { id: _id, ...update } = values;
    await this.connection.db
      .insertInto('responses')
      .values(values)
      .onConflict((oc) => oc.column('id').doUpdateSet(update))
      .execute();
  }

  /** The row if this key has it and it expires after `nowMs`. */
  async get(keyId: string, id: string, nowMs: number): Promise<ResponseRow | undefined> {
    const r = await this.connection.db
      .selectFrom('responses')
      .selectAll()
      .where('id', '=', id)
      .where('key_id', '=', keyId)
      .where('expires_at_ms', '>', nowMs)
      .executeTakeFirst();
    if (!r) return undefined;
    // Postgres gives bigint as text.
    return {
      id: r.id,
      keyId: r.key_id,
      model: r.model,
      createdAtMs: Number(r.created_at_ms),
      expiresAtMs: Number(r.expires_at_ms),
      bytes: Number(r.bytes),
      body: r.body,
    };
  }

  /** Deletes this key's unexpired row; true when there was one. */
  async delete(keyId: string, id: string, nowMs: number): Promise<boolean> {
    const result = await this.connection.db
      .deleteFrom('responses')
      .where('id', '=', id)
      .where('key_id', '=', keyId)
      .where('expires_at_ms', '>', nowMs)
      .executeTakeFirst();
    return Number(result.numDeletedRows) > 0;
  }

  /** A key's unexpired rows' sizes, newest first (ties by id, so every instance orders them alike). */
  async sizesOfKey(keyId: string, nowMs: number): Promise<ResponseSize[]> {
    const rows = await this.connection.db
      .selectFrom('responses')
      .select(['id', 'bytes'])
      .where('key_id', '=', keyId)
      .where('expires_at_ms', '>', nowMs)
      .orderBy('created_at_ms', 'desc')
      .orderBy('id', 'desc')
      .execute();
    return rows.map((r) => ({ id: r.id, bytes: Number(r.bytes) }));
  }

  async deleteIds(keyId: string, ids: readonly string[]): Promise<void> {
    if (ids.length === 0) return;
    await this.connection.db.deleteFrom('responses').where('key_id', '=', keyId).where('id', 'in', [...ids]).execute();
  }

  /** Deletes every row that expired at or before `nowMs`; returns how many. */
  async deleteExpired(nowMs: number): Promise<number> {
    const result = await this.connection.db.deleteFrom('responses').where('expires_at_ms', '<=', nowMs).executeTakeFirst();
    return Number(result.numDeletedRows);
  }
}
