// Per-key request and token counts per one-minute window, added up across
// instances, so a key's rate limit holds for the fleet and not per control
// plane (src/control/leader/shared-rate-limit.ts keeps the rules).
import type { StoreConnection } from './connection.js';

export interface RateCount {
  keyId: string;
  /** Epoch ms, a multiple of the window length. */
  windowStartMs: number;
  requests: number;
  tokens: number;
}

export class RateCountRepository {
  constructor(private readonly connection: StoreConnection) {}

  /**
   * Adds this instance's counts to the shared ones and returns the totals of
   * every window of those keys (null = of every key) at or after `sinceMs`
   * (all instances' counts, this batch's included), in one transaction.
   */
  async add(adds: readonly RateCount[], keyIds: readonly string[] | null, sinceMs: number): Promise<RateCount[]> {
    return this.connection.db.transaction().execute(async (tx) => {
      for (const a of adds) {
        await tx
          .insertInto('rate_windows')
          .values({ key_id: a.keyId, window_start: a.windowStartMs, requests: a.requests, tokens: a.tokens })
          .onConflict((oc) =>
            oc.columns(['key_id', 'window_start']).doUpdateSet((eb) => ({
              requests: eb('rate_windows.requests', '+', a.requests),
              tokens: eb('rate_windows.tokens', '+', a.tokens),
            })),
          )
          .execute();
      }
      if (keyIds !== null && keyIds.length === 0) return [];
      let query = tx.selectFrom('rate_windows').selectAll().where('window_start', '>=', sinceMs);
      if (keyIds !== null) query = query.where('key_id', 'in', [...keyIds]);
      const rows = await query.execute();
      return rows.map((r) => ({
        keyId: r.key_id,
        windowStartMs: Number(r.window_start),
        requests: Number(r.requests),
        tokens: Number(r.tokens),
      }));
    });
  }

  /** Deletes windows that ended before `beforeMs`; any instance may call it, it is idempotent. */
  async prune(beforeMs: number): Promise<void> {
    await this.connection.db.deleteFrom('rate_windows').where('window_start', '<', beforeMs).execute();
  }
}
