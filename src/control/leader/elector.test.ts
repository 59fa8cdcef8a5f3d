// Leader election on a real Postgres: one of two instances leads; when the
// leader's lock connection is cut (the server ends its session, as when the
// process dies or the network drops), it steps down at once and the other
// takes the lock within a few retry intervals, with a higher epoch. Without
// this, a dead leader would leave the fleet with no reconciler at all.
import pg from 'pg';
import pino from 'pino';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createTestDatabase, describePostgres, type TestDatabase } from '../../../test/support/postgres.js';
import { waitFor } from '../../../test/support/wait.js';
import { Store } from '../store/index.js';
import { LeaderElector } from './elector.js';

describePostgres('leader election over an advisory lock', () => {
  let db: TestDatabase;
  const stores: Store[] = [];
  const electors: LeaderElector[] = [];
  const events: string[] = [];

  beforeAll(async () => {
    db = await createTestDatabase();
  });

  afterAll(async () => {
    for (const e of electors) await e.close();
    for (const s of stores) await s.close();
    await db?.drop();
  });

  async function elector(id: string, idleSessionTimeoutMs?: number): Promise<LeaderElector> {
    const store = await Store.open({ location: { kind: 'postgres', url: db.url } });
    stores.push(store);
    const e = new LeaderElector({
      store,
      url: db.url,
      instanceId: id,
      retryIntervalMs: 100,
      ...(idleSessionTimeoutMs === undefined ? {} : { idleSessionTimeoutMs }),
      now: Date.now,
      logger: pino({ level: 'silent' }),
      onElected: async (epoch) => {
        events.push(`${id} elected ${epoch}`);
      },
      onDeposed: (reason) => {
        events.push(`${id} deposed: ${reason}`);
      },
    });
    electors.push(e);
    return e;
  }

  it('elects exactly one, and hands over within a few retries when the leader loses its connection', async () => {
    const a = await elector('cp-a');
    await a.kick();
    expect(a.leading, 'the first instance takes the free lock').toBe(true);
    const b = await elector('cp-b');
    await b.kick();
    expect(b.leading, 'the second cannot take a held lock').toBe(false);
    b.start();
    a.start();

    // The server ends cp-a's lock session: what a kill -9 or a partition looks like from Postgres.
    const admin = new pg.Client({ connectionString: db.url });
    await admin.connect();
    await admin.query(
      "select pg_terminate_backend(pid) from pg_locks where locktype = 'advisory' and granted and pid <> pg_backend_pid()",
    );
    await admin.end();

    const started = Date.now();
    await waitFor('cp-b to lead', async () => (b.leading ? true : undefined), 5000);
    expect(Date.now() - started, 'the takeover is bounded by a few retry intervals').toBeLessThan(3000);
    expect(a.leading, 'the old leader stepped down').toBe(false);
    expect(events.filter((e) => e.startsWith('cp-a deposed')).length).toBe(1);
    expect(events).toContain('cp-b elected 2');
    expect(await stores[1]!.leadership.read('reconciler')).toMatchObject({ epoch: 2, holder: 'cp-b' });

    // cp-a reconnects as a follower and never leads while cp-b holds the lock: attempts of its
    // own, awaited (the first reconnects and tries the lock, the second tries again), not slept through.
    await a.kick();
    await a.kick();
    expect(a.leading, 'cp-a tried for the held lock and stayed a follower').toBe(false);

    // A clean shutdown releases the lock at once.
    await b.close();
    await waitFor('cp-a to lead again', async () => (a.leading ? true : undefined), 5000);
    expect(a.heldEpoch).toBe(3);
  });
});

describePostgres('a paused leader', () => {
  it('loses the lead once the server ends its idle session, and steps down when it wakes', async () => {
    // A SIGSTOPped leader keeps its TCP connection and, without a server-side timeout, its lock forever:
    // no instance would lead again until someone killed it by hand.
    const db = await createTestDatabase();
    const stores: Store[] = [];
    const made: LeaderElector[] = [];
    const deposed: string[] = [];
    const make = async (id: string) => {
      const store = await Store.open({ location: { kind: 'postgres', url: db.url } });
      stores.push(store);
      const e = new LeaderElector({
        store,
        url: db.url,
        instanceId: id,
        retryIntervalMs: 100,
        idleSessionTimeoutMs: 600,
        now: Date.now,
        logger: pino({ level: 'silent' }),
        onElected: async () => {},
        onDeposed: (reason) => void deposed.push(`${id}: ${reason}`),
      });
      made.push(e);
      return e;
    };
    try {
      const paused = await make('cp-paused');
      await paused.kick(); // leads, then never probes again: paused
      expect(paused.leading).toBe(true);
      const other = await make('cp-other');
      other.start();
      await waitFor('the other instance to lead', async () => (other.leading ? true : undefined), 5000);
      expect(other.heldEpoch).toBe(2);
      await paused.kick(); // wakes up
      expect(paused.leading, 'the woken leader found its session gone and stepped down').toBe(false);
      expect(deposed.some((d) => d.startsWith('cp-paused'))).toBe(true);
    } finally {
      for (const e of made) await e.close();
      for (const s of stores) await s.close();
      await db.drop();
    }
  });
});
