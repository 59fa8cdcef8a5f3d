// Per-key limits counted across control planes: with two instances behind
// one address, a key limited to 10 requests a minute must not get 20 because
// each instance counted only its own. Synchronised by hand here (interval 0)
// so the test states exactly when each instance learns of the other's counts.
import pino from 'pino';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createTestDatabase, describePostgres, type TestDatabase } from '../../../test/support/postgres.js';
import { Store } from '../store/index.js';
import { SharedRateLimiter } from './shared-rate-limit.js';

describePostgres('rate limits shared through Postgres', () => {
  let db: TestDatabase;
  let storeA: Store;
  let storeB: Store;
  let clock = 600_000; // the start of a minute

  beforeAll(async () => {
    db = await createTestDatabase();
    storeA = await Store.open({ location: { kind: 'postgres', url: db.url } });
    storeB = await Store.open({ location: { kind: 'postgres', url: db.url } });
  });

  afterAll(async () => {
    await storeA?.close();
    await storeB?.close();
    await db?.drop();
  });

  const make = (store: Store) =>
    new SharedRateLimiter({ store, now: () => clock, logger: pino({ level: 'silent' }), syncIntervalMs: 0 });

  it('admits a key no more than its requests per minute over two instances, once they have synced', async () => {
    const a = make(storeA);
    const b = make(storeB);
    let admitted = 0;
    for (let i = 0; i < 6; i++) if (a.admit('key-1', 10, null).ok) admitted++;
    await a.sync();
    await b.sync();
    const onB = b.admit('key-1', 10, null);
    expect(onB.remaining, "what is left counts the other instance's six").toEqual({ requests: 3 });
    if (onB.ok) admitted++;
    for (let i = 0; i < 5; i++) if (b.admit('key-1', 10, null).ok) admitted++;
    await b.sync();
    await a.sync();
    const refused = a.admit('key-1', 10, null);
    expect(admitted, 'the second instance admits only what the first left').toBe(10);
    expect(refused).toMatchObject({ ok: false, limit: 'requests' });
    expect(refused.retryAfterS).toBeGreaterThanOrEqual(1);

    // Half a minute into the next window, half of the previous minute still counts: 10 × 0.5 = 5 used, 5 free.
    clock += 90_000;
    await a.sync();
    let later = 0;
    for (let i = 0; i < 10; i++) if (a.admit('key-1', 10, null).ok) later++;
    expect(later, 'the sliding minute frees requests as the previous one fades').toBe(5);
    await a.close();
    await b.close();
  });

  it('counts admissions being written while their sync is in flight', async () => {
    // Guards a gap that let one request too many through on a busy instance: counts taken out of "pending" for a
    // sync were, until the totals came back, in neither the pending nor the shared counts.
    const a = make(storeA);
    for (let i = 0; i < 4; i++) expect(a.admit('key-4', 4, null).ok).toBe(true);
    const inFlight = a.sync();
    expect(a.admit('key-4', 4, null).ok, 'refused while its counts are on their way to the store').toBe(false);
    await inFlight;
    expect(a.admit('key-4', 4, null).ok, 'and after').toBe(false);
    await a.close();
  });

  it('charges tokens on one instance against admissions on the other', async () => {
    const a = make(storeA);
    const b = make(storeB);
    expect(a.admit('key-2', null, 1000).ok).toBe(true);
    a.settle('key-2', 1000, 0, 1200);
    await a.sync();
    await b.sync();
    expect(b.admit('key-2', null, 1000)).toMatchObject({ ok: false, limit: 'tokens' });
    await a.close();
    await b.close();
  });

  // Every concurrent request was admitted while the balance was above zero, so a burst spent minutes' worth of tokens.
  it('reserves tokens at admission on each instance, counts the reservations across instances, and settles them', async () => {
    const a = make(storeA);
    const b = make(storeB);
    expect(
      [0, 1, 2].map(() => a.admit('key-5', null, 100, 40).ok),
      'two reservations of 40 fit in 100 on one instance',
    ).toEqual([true, true, false]);
    await a.sync();
    await b.sync();
    expect(b.admit('key-5', null, 100, 40).ok, 'the other instance sees the 80 reserved').toBe(false);
    a.settle('key-5', 100, 40, 0);
    a.settle('key-5', 100, 40, 5);
    await a.sync();
    await b.sync();
    expect(b.admit('key-5', null, 100, 90).ok, 'after settling only 5 are spent, everywhere').toBe(true);
    await a.close();
    await b.close();
  });

  it('gives a reservation back to the minute it was made in, so a refund in the next minute frees no extra room', async () => {
    // A refund settled in the next minute was counted there as negative tokens while the reservation still weighed
    // in the previous minute: a key that reserved at a minute's end and used nothing got up to twice its limit.
    const a = make(storeA);
    const b = make(storeB);
    const minute = (Math.floor(clock / 60_000) + 10) * 60_000;
    clock = minute + 59_000;
    expect(a.admit('key-6', null, 1000, 1000).ok, 'a whole minute reserved at the end of a minute').toBe(true);
    clock = minute + 61_000;
    a.settle('key-6', 1000, 1000, 0);
    expect(a.admit('key-6', null, 1000, 1000).ok, 'nothing was used, so the whole limit is free again').toBe(true);
    a.settle('key-6', 1000, 1000, 1000);
    await a.sync();
    await b.sync();
    clock = minute + 90_000;
    const onB = b.admit('key-6', null, 1000, 200);
    expect(
      onB,
      'the key used its 1000 tokens 29 s ago: the other instance has nothing left to give this minute',
    ).toMatchObject({ ok: false, limit: 'tokens' });
    expect(a.admit('key-6', null, 1000, 200), 'nor has this one').toMatchObject({ ok: false, limit: 'tokens' });
    await a.close();
    await b.close();
  });

  it('settles a reservation and the use of the same minute as one difference', async () => {
    const a = make(storeA);
    const minute = (Math.floor(clock / 60_000) + 10) * 60_000;
    clock = minute + 1_000;
    expect(a.admit('key-7', null, 100, 60).ok).toBe(true);
    expect(a.admit('key-7', null, 100, 60).ok, '60 + 60 reserved does not fit in 100').toBe(false);
    a.settle('key-7', 100, 60, 10);
    expect(a.admit('key-7', null, 100, 90), 'only the 10 used still count').toMatchObject({
      ok: true,
      remaining: { tokens: 0 },
    });
    await a.close();
  });

  it('keeps enforcing on what it knows when the store is away, and carries its counts over when it returns', async () => {
    const a = make(storeA);
    const broken = await Store.open({ location: { kind: 'postgres', url: db.url } });
    const c = make(broken);
    await broken.close(); // every query now fails
    for (let i = 0; i < 3; i++) expect(c.admit('key-3', 3, null).ok).toBe(true);
    await c.sync(); // fails quietly
    expect(c.admit('key-3', 3, null).ok, 'its own counts still hold it to the limit').toBe(false);
    expect(a.admit('key-3', 3, null).ok).toBe(true);
    await a.close();
  });
});
