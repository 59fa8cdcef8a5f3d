// Responses kept in the store (SQLite or Postgres), so a conversation
// continues on any control plane and across a restart. The SQL is the
// store's (store.responses); the rules are here and in limits.ts. Every
// write is a few statements, not a transaction: two puts of one key racing
// can leave it briefly over its cap, which the next put corrects.
import type { ResponseRepository } from '../store/index.js';
import { logTooBig, outputItems, overCap, responseBody, type ResponseStoreOptions } from './limits.js';
import type { ResponseStore, StoredResponse } from './types.js';

export class StoredResponses implements ResponseStore {
  private readonly now: () => number;

  constructor(
    private readonly repository: ResponseRepository,
    private readonly options: ResponseStoreOptions,
  ) {
    this.now = options.now ?? Date.now;
  }

  async put(response: StoredResponse): Promise<void> {
    const body = responseBody(response);
    const bytes = Buffer.byteLength(body);
    const cap = this.options.maxBytesPerKey;
    if (bytes > cap) {
      logTooBig(this.options.logger, response, bytes, cap);
      return;
    }
    const nowMs = this.now();
    const row = {
      id: response.id,
      keyId: response.keyId,
      engineId: response.engineId ?? null,
      model: response.model,
      createdAtMs: response.createdAtMs,
      expiresAtMs: nowMs + this.options.ttlMs,
      bytes,
      body,
    };
    await this.repository.put(row, [...outputItems(response.response).keys()]);
    const sizes = await this.repository.sizesOfKey(response.keyId, nowMs);
    await this.repository.deleteIds(response.keyId, overCap(sizes, response.id, cap));
  }

  async get(keyId: string, id: string): Promise<StoredResponse | undefined> {
    const row = await this.repository.get(keyId, id, this.now());
    if (!row) return undefined;
    const body = JSON.parse(row.body) as { response: Record<string, unknown>; items: unknown[] };
    return {
      id: row.id,
      keyId: row.keyId,
      ...(row.engineId === null ? {} : { engineId: row.engineId }),
      model: row.model,
      createdAtMs: row.createdAtMs,
      response: body.response,
      items: body.items,
    };
  }

  async delete(keyId: string, id: string): Promise<boolean> {
    const nowMs = this.now();
    // Named by the engine's id: the row it names, by its own.
    const row = await this.repository.get(keyId, id, nowMs);
    return row !== undefined && this.repository.delete(keyId, row.id, nowMs);
  }

  async findItems(keyId: string, itemIds: readonly string[]): Promise<ReadonlyMap<string, unknown>> {
    const found = new Map<string, unknown>();
    for (const row of await this.repository.findByItems(keyId, itemIds, this.now())) {
      const body = JSON.parse(row.body) as { response: Record<string, unknown> };
      const item = outputItems(body.response).get(row.itemId);
      if (item !== undefined) found.set(row.itemId, item);
    }
    return found;
  }

  async sweep(nowMs: number): Promise<number> {
    return this.repository.deleteExpired(nowMs);
  }
}
