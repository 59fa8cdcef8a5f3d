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

/** Where an entry is filed: by key and id together, as the store files rows, so two keys' responses of one id stay apart. */
function slot(keyId: string, id: string): string {
  return `${keyId}\0${id}`;
}

export class MemoryResponseStore implements ResponseStore {
  private readonly entries = new Map<string, Entry>();
  /** slot(key, engine id) → the router's id of that key's newest response the engine gave that id. */
  private readonly engineIds = new Map<string, string>();
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
    this.entries.set(slot(response.keyId, response.id), {
      response,
      expiresAtMs: nowMs + this.options.ttlMs,
      bytes,
      seq: this.seq++,
    });
    if (response.engineId) this.engineIds.set(slot(response.keyId, response.engineId), response.id);
    const mine = [...this.entries.values()]
      .filter((e) => e.response.keyId === response.keyId && e.expiresAtMs > nowMs)
      .sort((a, b) => b.response.createdAtMs - a.response.createdAtMs || b.seq - a.seq);
    for (const id of overCap(
      mine.map((e) => ({ id: e.response.id, bytes: e.bytes })),
      response.id,
      cap,
    ))
      this.drop(response.keyId, id);
  }

  async get(keyId: string, id: string): Promise<StoredResponse | undefined> {
    const nowMs = this.now();
    const e =
      this.entries.get(slot(keyId, id)) ?? this.entries.get(slot(keyId, this.engineIds.get(slot(keyId, id)) ?? ''));
    return e && e.expiresAtMs > nowMs ? e.response : undefined;
  }

  async delete(keyId: string, id: string): Promise<boolean> {
    const found = await this.get(keyId, id);
    if (found === undefined) return false;
    this.drop(keyId, found.id);
    return true;
  }

  private drop(keyId: string, id: string): void {
    const e = this.entries.get(slot(keyId, id));
    if (!e) return;
    this.entries.delete(slot(keyId, id));
    const engineId = e.response.engineId;
    if (engineId && this.engineIds.get(slot(keyId, engineId)) === id) this.engineIds.delete(slot(keyId, engineId));
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
    for (const e of [...this.entries.values()]) {
      if (e.expiresAtMs <= nowMs) {
        this.drop(e.response.keyId, e.response.id);
        dropped++;
      }
    }
    return dropped;
  }
}
