// Money budgets and per-replica rates of a model priced by GPU-hours, through
// a real SQLite store. Guards against a USD budget counting such a model as
// free (its cost is known only when the interval is priced), against the
// budget's spend drifting from the usage rows' cost_usd once estimates and
// true rates differ, and against a gateway process (a non-leader) pricing a
// replica's tokens at the model's pooled rate rather than that replica's.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { StoredUsage } from '../keys/index.js';
import { StoreConnection } from '../store/connection.js';
import { StoredBudgetBook } from './book.js';
import { periodOf } from './budgets.js';
import { GpuMeter, StoredGpuBook } from './gpu-meter.js';
import { BudgetLeases } from './leases.js';
import { catalogPrices } from './prices.js';
import { budgetRecord, TEAM_KEY } from '../../../test/support/budget-records.js';

const H100 = { name: 'NVIDIA H100 80GB HBM3', class: 'h100-80gb' };
const A10 = { name: 'NVIDIA A10G', class: 'a10g-24gb' };
// A dollar a second on the H100, a tenth on the A10: ten seconds make figures no rounding hides.
const PRICES = new Map([
  ['H100', 3600],
  ['A10G', 360],
]);
const REPLICAS = [
  { id: 'r-h100', model: 'm', gpus: [H100] },
  { id: 'r-a10', model: 'm', gpus: [A10] },
];
const T0 = Date.parse('2026-12-06T10:00:00Z');
const logger = pino({ level: 'silent' });
const key = TEAM_KEY;
const budget = budgetRecord({ id: 'bud_usd', scope: 'key', subject: 'key_a', unit: 'usd', amount: 1000 });

describe('GPU-priced usage in money budgets and per replica', () => {
  let dir: string;
  let store: StoreConnection;
  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'llmgw-gpu-true-up-'));
    store = await StoreConnection.open({ location: { kind: 'sqlite', path: join(dir, 'llmgw.db') } });
  });
  afterEach(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** Meters on `book` at the clock `now`, each charging into the one list: a lone plane's (watchOthers) or a gateway's. */
  const meters = (book: StoredGpuBook, now: () => number) => {
    const charged: [string, number][] = [];
    const meter = (o: { watchOthers?: boolean; cluster?: { leads: () => boolean } }) =>
      new GpuMeter({
        prices: PRICES,
        replicas: () => [REPLICAS[0]!],
        tokenPriced: () => false,
        charge: (k, _m, _e, usd) => charged.push([k, usd]),
        book,
        now,
        logger,
        intervalMs: 0,
        ...o,
      });
    return { charged, meter };
  };

  it("charges a USD budget an estimate, then trues it up to the usage rows' cost, replica by replica", async () => {
    let now = T0;
    const budgets = new StoredBudgetBook(store);
    await budgets.create(budget);
    // The model has no token price: without the meter, money budgets would count it as free.
    const gate = new BudgetLeases({
      book: budgets,
      prices: catalogPrices(() => undefined),
      now: () => now,
      logger,
      syncIntervalMs: 0,
    });
    await gate.reload();
    const usage = new StoredUsage(store, () => now, 0);
    const meter = new GpuMeter({
      prices: PRICES,
      replicas: () => REPLICAS,
      tokenPriced: () => false,
      charge: (k, m, e, usd) => usage.charge(k, m, e, usd),
      budgets: gate,
      book: new StoredGpuBook(store),
      now: () => now,
      logger,
      intervalMs: 0,
    });
    const sink = meter.wrap(usage);
    const serve = async (replicaId: string, tokens: number) => {
      const d = await gate.admit(key, 'm', tokens, 0);
      if (!d.ok) throw new Error(`refused: ${d.budget}`);
      d.hold!.settle('m', tokens, 0, replicaId);
      sink.record({
        keyId: key.id,
        model: 'm',
        endpoint: 'chat',
        promptTokens: tokens,
        completionTokens: 0,
        status: 200,
        replicaId,
      });
    };
    const spent = async () => {
      await gate.sync();
      const p = periodOf('day', now);
      return (await budgets.spendOf([{ budgetId: budget.id, periodStartMs: p.startMs }])).get(budget.id)?.spent ?? 0;
    };
    const cost = async () => {
      await usage.flush();
      return (await usage.costs()).reduce((s, r) => s + r.cost_usd, 0);
    };

    // First interval: nothing measured yet, so the estimate is 0; pricing it charges the whole $11.
    await serve('r-h100', 1000);
    await serve('r-a10', 1000);
    expect(await spent(), 'nothing is measured before the first interval').toBe(0);
    now += 10_000;
    await meter.settle();
    expect(await cost()).toBeCloseTo(11, 9);
    expect(await spent()).toBeCloseTo(11, 9);
    // Each replica's own rate: $10 over 1,000 tokens on the H100, $1 over 1,000 on the A10.
    expect(meter.estimate('m', 'r-h100')).toBeCloseTo(0.01, 12);
    expect(meter.estimate('m', 'r-a10')).toBeCloseTo(0.001, 12);

    // Second interval: 2,000 tokens on the H100 are estimated at $0.01 each ($20) but cost $10; the idle A10's $1 goes to nobody.
    await serve('r-h100', 2000);
    expect(await spent(), "charged the replica's last rate at once").toBeCloseTo(31, 9);
    now += 10_000;
    await meter.settle();
    expect(await cost()).toBeCloseTo(21, 9);
    expect(await spent(), "trued down to the usage rows' cost").toBeCloseTo(21, 9);
    await gate.close();
    await usage.close();
  });

  it("prices a gateway process's tokens at the replica's measured rate, not the model's pooled one", async () => {
    let now = T0;
    const book = new StoredGpuBook(store);
    const charged: [string, number][] = [];
    const meter = (leads: boolean) =>
      new GpuMeter({
        prices: PRICES,
        replicas: () => REPLICAS,
        tokenPriced: () => false,
        charge: (k, _m, _e, usd) => charged.push([k, usd]),
        book,
        now: () => now,
        logger,
        cluster: { leads: () => leads },
        intervalMs: 0,
      });
    const leader = meter(true);
    const gateway = meter(false);
    const ok = { model: 'm', endpoint: 'chat', status: 200, completionTokens: 0 };
    leader.observe({ ...ok, keyId: 'on-plane', promptTokens: 1000, replicaId: 'r-h100' });
    gateway.observe({ ...ok, keyId: 'on-gateway', promptTokens: 1000, replicaId: 'r-a10' });
    now += 10_000;
    await leader.settle();
    await gateway.settle();
    // Pooled, the plane's tokens would bear $11 / 1,000 and the gateway's $11 / 2,000 each: $11 and $5.50.
    expect(charged.map(([k, usd]) => [k, +usd.toFixed(9)])).toEqual([
      ['on-plane', 10],
      ['on-gateway', 1],
    ]);
    const replicas = await book.replicaTotals();
    expect(replicas.get('r-a10')).toEqual({ model: 'm', gpuHours: 10 / 3600, costUsd: 1, tokens: 1000 });
    expect((await book.totals()).get('m')?.tokens, 'both processes add their tokens').toBe(2000);

    // A day on, a replica gone since is dropped from the per-replica rows; one still held is kept, as is the model's total.
    now += 24 * 3_600_000 + 1;
    const lone = new GpuMeter({
      prices: PRICES,
      replicas: () => [REPLICAS[0]!],
      tokenPriced: () => false,
      book,
      now: () => now,
      logger,
      cluster: { leads: () => true },
      intervalMs: 0,
    });
    await lone.settle();
    expect([...(await book.replicaTotals()).keys()]).toEqual(['r-h100']);
    expect((await book.totals()).get('m')?.tokens).toBe(2000);
  });

  it('on a lone control plane, turns to measured rates once a gateway process adds tokens beside it', async () => {
    // Guards against the plane charging its own tokens the whole interval's cost while a gateway charges its own too.
    let now = T0;
    const book = new StoredGpuBook(store);
    const { charged, meter } = meters(book, () => now);
    const plane = meter({ watchOthers: true });
    const gateway = meter({ cluster: { leads: () => false } });
    const ok = { model: 'm', endpoint: 'chat', status: 200, completionTokens: 0, replicaId: 'r-h100' };
    plane.observe({ ...ok, keyId: 'plane', promptTokens: 1000 });
    now += 10_000;
    await plane.settle();
    expect(charged, 'alone: the interval is priced exactly').toEqual([['plane', 10]]);

    plane.observe({ ...ok, keyId: 'plane', promptTokens: 1000 });
    gateway.observe({ ...ok, keyId: 'gateway', promptTokens: 1000 });
    now += 10_000;
    await gateway.settle();
    await plane.settle();
    // The replica's measured rate: $20 over 3,000 tokens; alone the plane would have charged its 1,000 the whole $10.
    expect(charged.slice(1).map(([k, usd]) => [k, +usd.toFixed(9)])).toEqual([
      ['gateway', 5],
      ['plane', +(20 / 3).toFixed(9)],
    ]);
  });

  it("sees a gateway that adds tokens in a lone control plane's first interval, as in any other", async () => {
    // The plane read the store only at its first settle, so that interval it charged its own tokens the interval's whole
    // cost while the gateway charged its tokens too: a restarted plane charged every first interval twice.
    let now = T0;
    const book = new StoredGpuBook(store);
    // What the store holds from before this plane started: 10 s of the H100 ($10) over 1,000 tokens.
    const before = { gpuHours: 10 / 3600, costUsd: 10, tokens: 1000 };
    await book.add(new Map([['m', before]]), now, new Map([['r-h100', { ...before, model: 'm' }]]));
    const { charged, meter } = meters(book, () => now);
    const plane = meter({ watchOthers: true });
    // Queued after the plane's start read on the store's one connection: that read is done when this one is.
    await plane.totals();
    const gateway = meter({ cluster: { leads: () => false } });
    const ok = { model: 'm', endpoint: 'chat', status: 200, completionTokens: 0, replicaId: 'r-h100' };
    plane.observe({ ...ok, keyId: 'plane', promptTokens: 1000 });
    gateway.observe({ ...ok, keyId: 'gateway', promptTokens: 1000 });
    now += 10_000;
    await gateway.settle();
    await plane.settle();
    // As in a later interval: the replica's measured rate, $20 over 3,000 tokens, not the plane's 1,000 charged $10.
    expect(charged.map(([k, usd]) => [k, +usd.toFixed(9)])).toEqual([
      ['gateway', 5],
      ['plane', +(20 / 3).toFixed(9)],
    ]);
  });
});
