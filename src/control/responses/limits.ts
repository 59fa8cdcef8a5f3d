// What both response stores share: their limits, a response's size, and
// which of a key's responses the size cap drops. Pure, so the memory and
// stored implementations cannot disagree on what is kept.
import type { Logger } from 'pino';
import type { StoredResponse } from './types.js';

export interface ResponseStoreOptions {
  /** How long a response is kept after it is put, in ms. */
  readonly ttlMs: number;
  /** The most bytes of responses one key keeps (their JSON, UTF-8); 0 = none are kept. */
  readonly maxBytesPerKey: number;
  /** The clock; absent = Date.now. */
  readonly now?: () => number;
  /** Where a response too big to keep is said; absent = nowhere. */
  readonly logger?: Logger;
}

/** Defaults the configuration documents (responses_ttl, responses_max_per_key). */
export const RESPONSE_STORE_DEFAULTS = Object.freeze({ ttlMs: 30 * 86_400_000, maxBytesPerKey: 64 * 2 ** 20 });

/** The JSON a response is kept as, the response and its conversation. */
export function responseBody(r: StoredResponse): string {
  return JSON.stringify({ response: r.response, items: r.items });
}

/**
 * The ids to drop so a key's responses fit its cap: walking from the newest
 * (`newestFirst`, the one just put among them), everything from the first
 * response that takes the total past the cap onwards, older ones included,
 * so the oldest go first and the cap holds. `keep` is never dropped.
 */
export function overCap(
  newestFirst: readonly { id: string; bytes: number }[],
  keep: string,
  capBytes: number,
): string[] {
  let total = newestFirst.find((r) => r.id === keep)?.bytes ?? 0;
  const drop: string[] = [];
  let full = false;
  for (const r of newestFirst) {
    if (r.id === keep) continue;
    if (!full && total + r.bytes <= capBytes) total += r.bytes;
    else {
      full = true;
      drop.push(r.id);
    }
  }
  return drop;
}

/** Says, once per response, that it was too big to keep; the client is not told (its answer stands, only continuing it fails). */
export function logTooBig(logger: Logger | undefined, r: StoredResponse, bytes: number, capBytes: number): void {
  logger?.warn(
    { responseId: r.id, keyId: r.keyId, bytes, maxBytesPerKey: capBytes },
    capBytes === 0
      ? 'a response was not kept: responses_max_per_key is 0'
      : 'a response was not kept: it alone is bigger than responses_max_per_key; raise it to continue such conversations by previous_response_id',
  );
}

/** A kept response's output items that have an id, by id: what item_reference inputs name. */
export function outputItems(response: Readonly<Record<string, unknown>>): Map<string, unknown> {
  const out = new Map<string, unknown>();
  const output = response.output;
  if (!Array.isArray(output)) return out;
  for (const item of output) {
    const id = typeof item === 'object' && item !== null ? (item as { id?: unknown }).id : undefined;
    if (typeof id === 'string' && id !== '') out.set(id, item);
  }
  return out;
}
