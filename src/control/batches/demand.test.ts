import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { CompiledQuery } from 'kysely';
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import { batchRow } from '../../../test/support/batch-records.js';
import { Store } from '../store/index.js';
import { BatchRepository } from './batch-store.js';
import { BatchDemandReader, openLinesByModel } from './demand.js';

const stores: Store[] = [];
afterEach(async () => {
  for (const s of stores.splice(0)) await s.close();
});

describe('batch demand from the store', () => {
  it('counts lines per model: running under a live lease in flight, pending waiting, done neither', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-batch-demand-'));
    const store = await Store.open({ location: { kind: 'sqlite', path: join(dir, 'db') } });
    stores.push(store);
    const repo = new BatchRepository(store.connection);
    await repo.create(
      batchRow(0, {
        id: 'batch_a',
        owner: 'anonymous',
        input_file_id: 'f',
        endpoint: '/v1/embeddings',
        expires_at: 1e12,
        total: 6,
      }),
      Array.from({ length: 6 }, (_, i) => ({ line: i + 1, customId: `c${i}`, model: i < 4 ? 'embed' : 'chat' })),
    );
    const claimed = await repo.claim(['batch_a'], 'embed', 3, 'me', 10_000, 0);
    await repo.finish(claimed[0]!, 'me', '{}', false);
    const registry = new Registry();
    const reader = new BatchDemandReader(store.connection.db, () => 1_000, pino({ level: 'silent' }), registry);
    await reader.refresh();
    expect(Object.fromEntries(reader.demand())).toEqual({
      embed: { inFlight: 2, waiting: 1 },
      chat: { inFlight: 0, waiting: 2 },
    });
    expect(reader.inFlight('embed')).toBe(2);
    expect(await registry.metrics()).toContain('llmgw_batch_lines_in_flight{model="embed"} 2');
  });

  // Guards against the demand read (every 2 s, on the leader) scanning every batch line, done ones included: the
  // index of 0023 leads with batch_id, which this query does not name.
  it('reads only open lines, through the (state, model) index', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-batch-demand-'));
    const store = await Store.open({ location: { kind: 'sqlite', path: join(dir, 'db') } });
    stores.push(store);
    const q = openLinesByModel(store.connection.db, 1_000).compile();
    const plan = await store.connection.db.executeQuery<{ detail: string }>(
      CompiledQuery.raw(`EXPLAIN QUERY PLAN ${q.sql}`, [...q.parameters]),
    );
    const details = plan.rows.map((r) => r.detail).join('; ');
    expect(details).toContain('USING INDEX batch_lines_state_model');
    expect(details).not.toMatch(/SCAN batch_lines/);
  });
});
