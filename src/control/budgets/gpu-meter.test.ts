// The GPU meter through a real SQLite store: a model with no token price
// must have its usage rows charged the interval's GPU cost over the tokens
// each row served, a token-priced model must not be charged twice, and the
// store's model_gpu_cost must carry the hours, dollars and tokens from which
// the measured cost per million tokens is read.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { StoredUsage } from '../keys/index.js';
import { StoreConnection } from '../store/connection.js';
import { GpuMeter, MemoryGpuBook, StoredGpuBook } from './gpu-meter.js';

const H100 = { name: 'NVIDIA H100 80GB HBM3', class: 'h100-80gb' };
const HOUR = 3_600_000;
const logger = pino({ level: 'silent' });

describe('GpuMeter', () => {
  let dir: string;
  let store: StoreConnection;
  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'llmgw-gpu-'));
    store = await StoreConnection.open({ location: { kind: 'sqlite', path: join(dir, 'llmgw.db') } });
  });
  afterEach(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("charges each usage row its share of the interval's GPU cost, and keeps the model's totals", async () => {
    let now = 0;
    const usage = new StoredUsage(
      store,
      () => now,
      0,
      (m, p, c) => (m === 'priced' ? (p + c) / 1_000_000 : undefined),
    );
    const meter = new GpuMeter({
      prices: new Map([['H100', 2]]),
      replicas: () => [
        { model: 'derived', gpus: [H100, H100] },
        { model: 'priced', gpus: [H100] },
      ],
      tokenPriced: (m) => m === 'priced',
      charge: (k, m, e, usd) => usage.charge(k, m, e, usd),
      book: new StoredGpuBook(store),
      now: () => now,
      logger,
      intervalMs: 0,
    });
    const sink = meter.wrap(usage);
    const ok = { endpoint: 'chat', status: 200 };
    sink.record({ ...ok, keyId: 'key_a', model: 'derived', promptTokens: 600_000, completionTokens: 150_000 });
    sink.record({ ...ok, keyId: 'key_b', model: 'derived', promptTokens: 200_000, completionTokens: 50_000 });
    sink.record({ ...ok, keyId: 'key_a', model: 'priced', promptTokens: 1_000_000, completionTokens: 0 });
    now = HOUR;
    await meter.settle();
    // An idle hour: counted in the totals, charged to nobody.
    now = 2 * HOUR;
    await meter.settle();
    await usage.flush();

    const rows = new Map((await usage.costs()).map((r) => [`${r.key_id} ${r.model}`, r]));
    // Two H100s for an hour at $2: $4 over a million tokens, three quarters of them key_a's.
    expect(rows.get('key_a derived')?.cost_usd).toBeCloseTo(3, 9);
    expect(rows.get('key_b derived')?.cost_usd).toBeCloseTo(1, 9);
    expect(rows.get('key_a derived')?.requests).toBe(1);
    // The token price alone: the meter adds nothing to it.
    expect(rows.get('key_a priced')?.cost_usd).toBeCloseTo(1, 9);

    const totals = await meter.totals();
    expect(totals.get('derived')).toEqual({ gpuHours: 4, costUsd: 8, tokens: 1_000_000 });
    expect(totals.get('priced')).toEqual({ gpuHours: 2, costUsd: 4, tokens: 1_000_000 });
  });

  it('on several control planes, only the leader adds GPU-hours and each charges at the measured rate', async () => {
    let now = 0;
    const book = new StoredGpuBook(store);
    const charged: [string, number][] = [];
    const plane = (leads: boolean) =>
      new GpuMeter({
        prices: new Map([['h100-80gb', 1]]),
        replicas: () => [{ model: 'm', gpus: [H100] }],
        tokenPriced: () => false,
        charge: (k, _m, _e, usd) => charged.push([k, usd]),
        book,
        now: () => now,
        logger,
        cluster: { leads: () => leads },
        intervalMs: 0,
      });
    const leader = plane(true);
    const other = plane(false);
    const ok = { model: 'm', endpoint: 'chat', status: 200, completionTokens: 0 };
    leader.observe({ ...ok, keyId: 'lead', promptTokens: 1000 });
    other.observe({ ...ok, keyId: 'other', promptTokens: 1000 });
    now = HOUR;
    await leader.settle();
    await other.settle();
    // One GPU-hour at $1, counted once, over both planes' 2,000 tokens.
    expect(await book.totals()).toEqual(new Map([['m', { gpuHours: 1, costUsd: 1, tokens: 2000 }]]));
    expect(charged).toEqual([
      ['lead', 1],
      ['other', 0.5],
    ]);
  });

  it('gives the tokens back when the store is away, so the next interval charges them', async () => {
    let now = 0;
    let away = true;
    const mem = new MemoryGpuBook();
    const charged: number[] = [];
    const meter = new GpuMeter({
      prices: new Map([['H100', 1]]),
      replicas: () => [{ model: 'm', gpus: [H100] }],
      tokenPriced: () => false,
      charge: (_k, _m, _e, usd) => charged.push(usd),
      book: {
        add: (rows) => (away ? Promise.reject(new Error('store away')) : mem.add(rows)),
        totals: () => mem.totals(),
      },
      now: () => now,
      logger,
      intervalMs: 0,
    });
    meter.observe({ keyId: 'k', model: 'm', endpoint: 'chat', status: 200, promptTokens: 100, completionTokens: 0 });
    now = HOUR;
    await meter.settle();
    expect(charged).toEqual([]);
    away = false;
    now = 2 * HOUR;
    await meter.settle();
    expect(charged).toEqual([1]);
    expect((await mem.totals()).get('m')?.tokens).toBe(100);
  });
});
