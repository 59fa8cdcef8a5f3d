// Responses kept in this process's memory, for a control plane without a
// store: lost at a restart, and seen by this instance alone. The same rules
// as the stored ones (limits.ts).
import { logTooBig, outputItems, overCap, responseBody, type ResponseStoreOptions } from './limits.js';
import type { ResponseStore, StoredResponse } from './types.js';

interface Entry {
  readonly response: StoredResponse;
  readonly expiresAtMs: number;
  readonly bytes: number;
  /** Order of putting, to break ties in createdAtMs as the store does by id. */
  readonly seq: number;
}

export class MemoryResponseStore implements ResponseStore {
  private readonly entries = new Map<string, Entry>();
  private seq = 0;
  private readonly now: () => number;

  constructor(private readonly options: ResponseStoreOptions) {
    this.now = options.now ?? Date.now;
  }

  async put(response: StoredResponse): Promise<void> {
    const bytes = Buffer.byteLength(responseBody(response));
    const cap = this.options.maxBytesPerKey;
    if (bytes > cap) {
      logTooBig(this.options.logger, response, bytes, cap);
      return;
    }
    const nowMs = this.now();
    this.entries.set(response.id, { response, expiresAtMs: nowMs + this.options.ttlMs, bytes, seq: this.seq++ });
    const mine = [...this.entries.values()]
      .filter((e) => e.response.keyId === response.keyId && e.expiresAtMs > nowMs)
      .sort((a, b) => b.response.createdAtMs - a.response.createdAtMs || b.seq - a.seq);
    for (const id of overCap(mine.map((e) => ({ id: e.response.id, bytes: e.bytes })), response.id, cap)) this.entries.delete(id);
  }

  async get(keyId: string, id: string): Promise<StoredResponse | undefined> {
    const e = this.entries.get(id);
    return e && e.response.keyId === keyId && e.expiresAtMs > this.now() ? e.response : undefined;
  }

  async delete(keyId: string, id: string): Promise<boolean> {
    if ((await this.get(keyId, id)) === undefined) return false;
    return this.entries.delete(id);
  }

  async findItems(keyId: string, itemIds: readonly string[]): Promise<ReadonlyMap<string, unknown>> {
    const wanted = new Set(itemIds);
    const found = new Map<string, unknown>();
    const nowMs = this.now();
    for (const e of this.entries.values()) {
      if (e.response.keyId !== keyId || e.expiresAtMs <= nowMs) continue;
      for (const [id, item] of outputItems(e.response.response)) if (wanted.has(id)) found.set(id, item);
    }
    return found;
  }

  async sweep(nowMs: number): Promise<number> {
    let dropped = 0;
    for (const [id, e] of this.entries) {
      if (e.expiresAtMs <= nowMs) {
        this.entries.delete(id);
        dropped++;
      }
    }
    return dropped;
  }
}
