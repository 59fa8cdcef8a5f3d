// Usage accounting: what each key spent on each model, read from the
// engine's own `usage` (the body's, or a stream's final SSE chunk: the
// router asks every stream for it, and keeps it from a client that did
// not). The router hands each finished request to a UsageSink synchronously
// and never waits on it: a sink that writes to a store batches and flushes
// on its own timer. The event and the sink are the gateway's port
// (src/gateway/ports/index.ts).
import type { UsageEvent, UsageSink } from '../../gateway/ports/index.js';

export type { UsageEvent, UsageSink } from '../../gateway/ports/index.js';

export interface UsageTotals {
  requests: number;
  errors: number;
  promptTokens: number;
  completionTokens: number;
}

/** Totals per key, model and endpoint. */
export type UsageTotalsOf = UsageTotals & { keyId: string; model: string; endpoint: string };

/**
 * Rows by key id, model and endpoint, through nested maps of the strings
 * each event already holds: a sink adds every request to one, and a key
 * string joined per request (a new string, hashed anew at each lookup) was
 * most of what recording usage cost.
 */
export class UsageRows<T> {
  private rows = new Map<string, Map<string, Map<string, T>>>();
  private count = 0;

  get size(): number {
    return this.count;
  }

  get(keyId: string, model: string, endpoint: string): T | undefined {
    return this.rows.get(keyId)?.get(model)?.get(endpoint);
  }

  set(keyId: string, model: string, endpoint: string, row: T): void {
    let byModel = this.rows.get(keyId);
    if (!byModel) this.rows.set(keyId, (byModel = new Map()));
    let byEndpoint = byModel.get(model);
    if (!byEndpoint) byModel.set(model, (byEndpoint = new Map()));
    if (!byEndpoint.has(endpoint)) this.count++;
    byEndpoint.set(endpoint, row);
  }

  values(): T[] {
    const out: T[] = [];
    for (const byModel of this.rows.values())
      for (const byEndpoint of byModel.values()) for (const row of byEndpoint.values()) out.push(row);
    return out;
  }

  /** Every row, and the table empty again. */
  take(): T[] {
    const out = this.values();
    this.rows = new Map();
    this.count = 0;
    return out;
  }
}

/**
 * Totals per key, model and endpoint in memory; `drain()` hands them over and starts
 * again, so a store writer can flush them in one batch on its own timer.
 */
export class MemoryUsageSink implements UsageSink {
  private readonly totals = new UsageRows<UsageTotalsOf>();

  record(e: UsageEvent): void {
    let t = this.totals.get(e.keyId, e.model, e.endpoint);
    if (!t) {
      t = {
        keyId: e.keyId,
        model: e.model,
        endpoint: e.endpoint,
        requests: 0,
        errors: 0,
        promptTokens: 0,
        completionTokens: 0,
      };
      this.totals.set(e.keyId, e.model, e.endpoint, t);
    }
    t.requests++;
    if (e.status === 0 || e.status >= 400) t.errors++;
    t.promptTokens += e.promptTokens;
    t.completionTokens += e.completionTokens;
  }

  snapshot(): UsageTotalsOf[] {
    return this.totals.values().map((t) => ({ ...t }));
  }

  drain(): UsageTotalsOf[] {
    return this.totals.take();
  }
}
