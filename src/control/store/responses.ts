// Kept Responses API responses: the store's SQL for them, in rows. The
// rules (time to live, the size cap per key, what is too big to keep) are
// src/control/responses/stored.ts's; this file knows only that a row is
// named by its key and id together (two keys may hold one id), that every
// read and delete is by key, and that an expired row is as good as gone.
import type { StoreConnection } from './connection.js';

export interface ResponseRow {
  readonly id: string;
  readonly keyId: string;
  /** The engine's own id for it, when the router replaced it; null = none other than `id`. */
  readonly engineId: string | null;
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

  /** Keeps a row; one of the same key and id (the same response kept again) is replaced. `itemIds`: its output items', for findByItems. */
  async put(row: ResponseRow, itemIds: readonly string[]): Promise<void> {
    const values = {
      id: row.id,
      key_id: row.keyId,
      engine_id: row.engineId,
      model: row.model,
      created_at_ms: row.createdAtMs,
      expires_at_ms: row.expiresAtMs,
      bytes: row.bytes,
      body: row.body,
    };
    const { id: _id, key_id: _keyId, ...update } = values;
    await this.connection.db.transaction().execute(async (tx) => {
      await tx
        .insertInto('responses')
        .values(values)
        .onConflict((oc) => oc.columns(['key_id', 'id']).doUpdateSet(update))
        .execute();
      for (const itemId of new Set(itemIds)) {
        // An item kept again (a response stored twice) points at the latest response that holds it.
        await tx
          .insertInto('response_items')
          .values({ key_id: row.keyId, item_id: itemId, response_id: row.id })
          .onConflict((oc) => oc.columns(['key_id', 'item_id']).doUpdateSet({ response_id: row.id }))
          .execute();
      }
    });
  }

  /** The bodies of this key's unexpired responses that hold any of these output items, with which item each holds. */
  async findByItems(
    keyId: string,
    itemIds: readonly string[],
    nowMs: number,
  ): Promise<Array<{ itemId: string; body: string }>> {
    if (itemIds.length === 0) return [];
    const rows = await this.connection.db
      .selectFrom('response_items')
      .innerJoin('responses', (join) =>
        join
          .onRef('responses.id', '=', 'response_items.response_id')
          .onRef('responses.key_id', '=', 'response_items.key_id'),
      )
      .select(['response_items.item_id as itemId', 'responses.body as body'])
      .where('response_items.key_id', '=', keyId)
      .where('responses.key_id', '=', keyId)
      .where('response_items.item_id', 'in', [...itemIds])
      .where('responses.expires_at_ms', '>', nowMs)
      .execute();
    return rows;
  }

  /**
   * The row if this key has it and it expires after `nowMs`: by the
   * router's id, else by the engine's (the newest of this key's rows that
   * the engine gave that id).
   */
  async get(keyId: string, id: string, nowMs: number): Promise<ResponseRow | undefined> {
    const base = this.connection.db
      .selectFrom('responses')
      .selectAll()
      .where('key_id', '=', keyId)
      .where('expires_at_ms', '>', nowMs);
    const r =
      (await base.where('id', '=', id).executeTakeFirst()) ??
      (await base
        .where('engine_id', '=', id)
        .orderBy('created_at_ms', 'desc')
        .orderBy('id', 'desc')
        .limit(1)
        .executeTakeFirst());
    if (!r) return undefined;
    // Postgres gives bigint as text.
    return {
      id: r.id,
      keyId: r.key_id,
      engineId: r.engine_id,
      model: r.model,
      createdAtMs: Number(r.created_at_ms),
      expiresAtMs: Number(r.expires_at_ms),
      bytes: Number(r.bytes),
      body: r.body,
    };
  }

  /** Deletes this key's unexpired row; true when there was one. */
  async delete(keyId: string, id: string, nowMs: number): Promise<boolean> {
    return this.connection.db.transaction().execute(async (tx) => {
      const result = await tx
        .deleteFrom('responses')
        .where('id', '=', id)
        .where('key_id', '=', keyId)
        .where('expires_at_ms', '>', nowMs)
        .executeTakeFirst();
      const deleted = Number(result.numDeletedRows) > 0;
      if (deleted)
        await tx.deleteFrom('response_items').where('key_id', '=', keyId).where('response_id', '=', id).execute();
      return deleted;
    });
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
    await this.connection.db.transaction().execute(async (tx) => {
      await tx
        .deleteFrom('response_items')
        .where('key_id', '=', keyId)
        .where('response_id', 'in', [...ids])
        .execute();
      await tx
        .deleteFrom('responses')
        .where('key_id', '=', keyId)
        .where('id', 'in', [...ids])
        .execute();
    });
  }

  /** Deletes every row that expired at or before `nowMs`, with its items; returns how many responses. */
  async deleteExpired(nowMs: number): Promise<number> {
    return this.connection.db.transaction().execute(async (tx) => {
      // An item goes with its own key's response of that id, never with another key's of the same id.
      await tx
        .deleteFrom('response_items')
        .where(({ exists, selectFrom }) =>
          exists(
            selectFrom('responses')
              .select('responses.id')
              .whereRef('responses.key_id', '=', 'response_items.key_id')
              .whereRef('responses.id', '=', 'response_items.response_id')
              .where('responses.expires_at_ms', '<=', nowMs),
          ),
        )
        .execute();
      const result = await tx.deleteFrom('responses').where('expires_at_ms', '<=', nowMs).executeTakeFirst();
      return Number(result.numDeletedRows);
    });
  }
}
