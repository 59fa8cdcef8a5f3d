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
 * Totals per key, model and endpoint in memory; `drain()` hands them over and starts
 * again, so a store writer can flush them in one batch on its own timer.
 */
export class MemoryUsageSink implements UsageSink {
  private totals = new Map<string, UsageTotalsOf>();

  record(e: UsageEvent): void {
    const k = `${e.keyId}\u0000${e.model}\u0000${e.endpoint}`;
    let t = this.totals.get(k);
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
      this.totals.set(k, t);
    }
    t.requests++;
    if (e.status === 0 || e.status >= 400) t.errors++;
    t.promptTokens += e.promptTokens;
    t.completionTokens += e.completionTokens;
  }

  snapshot(): UsageTotalsOf[] {
    return [...this.totals.values()].map((t) => ({ ...t }));
  }

  drain(): UsageTotalsOf[] {
    const out = [...this.totals.values()];
    this.totals = new Map();
    return out;
  }
}
