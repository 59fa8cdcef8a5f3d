// What usage costs: each row adds up its requests' tokens at the model's
// price, and a model without a price costs nothing. A row priced wrongly
// would misstate a team's spend and spend its money budget early or late.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { StoredUsage } from '../keys/index.js';
import { StoreConnection } from '../store/connection.js';
import { catalogPrices, tokensCost } from './prices.js';

describe('cost per usage row', () => {
  it('prices input and output apart, per million tokens', () => {
    expect(tokensCost({ input_per_million: 0.5, output_per_million: 1.5 }, 2_000_000, 1_000_000)).toBe(2.5);
  });

  it('adds each request at its model price to the stored row, and nothing for a model without one', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-cost-'));
    const store = await StoreConnection.open({ location: { kind: 'sqlite', path: join(dir, 'llmgw.db') } });
    try {
      const prices = catalogPrices((m) =>
        m === 'alpha' ? { input_per_million: 1, output_per_million: 4 } : undefined,
      );
      const usage = new StoredUsage(store, () => 1, 0, prices.cost);
      const event = { keyId: 'key_a', endpoint: 'chat', status: 200 };
      usage.record({ ...event, model: 'alpha', promptTokens: 1000, completionTokens: 500 });
      usage.record({ ...event, model: 'alpha', promptTokens: 3000, completionTokens: 0, endpoint: 'embeddings' });
      usage.record({ ...event, model: 'beta', promptTokens: 1000, completionTokens: 1000 });
      await usage.flush();
      usage.record({ ...event, model: 'alpha', promptTokens: 0, completionTokens: 250 });
      await usage.close();
      const rows = await new StoredUsage(store, () => 2, 0).costs();
      expect(rows.map((r) => [r.model, r.requests, r.prompt_tokens, r.completion_tokens, r.cost_usd])).toEqual([
        // (1000 × 1 + 500 × 4) + (3000 × 1) + (250 × 4), per million
        ['alpha', 3, 4000, 750, 0.007],
        ['beta', 1, 1000, 1000, 0],
      ]);
    } finally {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
