import { describe, expect, it } from 'vitest';
import { MemoryUsageSink, UsageRows } from './usage.js';

describe('usage in memory', () => {
  it('adds each request to its key, model and endpoint, and drain hands the totals over once', () => {
    const sink = new MemoryUsageSink();
    const at = (keyId: string, model: string, endpoint: string, status: number, p: number, c: number) =>
      sink.record({ keyId, model, endpoint, status, promptTokens: p, completionTokens: c });
    at('k1', 'm', 'chat', 200, 10, 5);
    at('k1', 'm', 'chat', 500, 3, 0);
    at('k1', 'm', 'embeddings', 200, 7, 0);
    // The same strings joined differently are other rows: no key is built by joining them.
    at('k1\u0000m', 'chat', 'x', 0, 1, 1);
    at('k2', 'm', 'chat', 200, 1, 2);
    const row = (keyId: string, model: string, endpoint: string) =>
      sink.snapshot().find((t) => t.keyId === keyId && t.model === model && t.endpoint === endpoint);
    expect(row('k1', 'm', 'chat')).toEqual({
      keyId: 'k1',
      model: 'm',
      endpoint: 'chat',
      requests: 2,
      errors: 1,
      promptTokens: 13,
      completionTokens: 5,
    });
    expect(row('k1\u0000m', 'chat', 'x')?.errors, 'a client gone (status 0) counts as an error').toBe(1);
    expect(sink.drain()).toHaveLength(4);
    expect(sink.drain()).toEqual([]);
  });

  it('counts its rows', () => {
    const rows = new UsageRows<number>();
    rows.set('a', 'm', 'chat', 1);
    rows.set('a', 'm', 'chat', 2);
    rows.set('a', 'n', 'chat', 3);
    expect(rows.size).toBe(2);
    expect(rows.get('a', 'm', 'chat')).toBe(2);
    expect(rows.take()).toEqual([2, 3]);
    expect(rows.size).toBe(0);
  });
});
