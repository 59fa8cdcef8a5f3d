// The batch store's durability on both dialects. Guards against a line
// answered twice (two runners holding it, or a runner whose lease lapsed
// writing over the one that took it over), a line lost (a lease that never
// lapses), and a batch ended without every line's entry.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Store } from '../store/index.js';
import { batchRow } from '../../../test/support/batch-records.js';
import { storeBackends } from '../../../test/support/postgres.js';
import { BatchRepository, type BatchRow } from './batch-store.js';

function row(id: string, total: number, now: number): BatchRow {
  return batchRow(now, { id, key_id: 'k1', input_file_id: 'file-x', total });
}

const lines = (n: number) => Array.from({ length: n }, (_, i) => ({ line: i + 1, customId: `c${i}`, model: 'm' }));

for (const backend of storeBackends('llmgw-batch-store')) {
  describe.skipIf(backend.skip)(`batch lines on ${backend.name}`, () => {
    let store: Store;
    let teardown: () => Promise<void>;
    let now = 1_000_000;
    beforeEach(async () => {
      const b = await backend.setup();
      teardown = b.teardown;
      store = await Store.open({ location: b.location, now: () => now });
    });
    afterEach(async () => {
      await store.close();
      await teardown();
    });

    it('gives each line to one runner; a lapsed lease passes it on, and the late runner cannot answer it', async () => {
      const repo = new BatchRepository(store.connection);
      await repo.create(row('b1', 10, now), lines(10));
      const [a, b] = await Promise.all([
        repo.claim(['b1'], 'm', 6, 'A', now + 1000, now),
        repo.claim(['b1'], 'm', 6, 'B', now + 1000, now),
      ]);
      // Both saw the same six candidates: one took them, the other's UPDATE found them taken.
      const both = [...a, ...b].map((l) => l.line);
      expect(new Set(both).size, 'no line held twice').toBe(both.length);
      const rest = await repo.claim(['b1'], 'm', 10, 'B', now + 1000, now);
      b.push(...rest);
      expect(new Set([...a, ...b].map((l) => l.line)).size).toBe(10);
      expect(a.length + b.length).toBe(10);
      // Whichever won the race for the first six dies (B always holds the rest); its leases lapse, and C takes its lines over.
      const [dead, live] =
        a.length > 0
          ? [
              { id: 'A', lines: a },
              { id: 'B', lines: b },
            ]
          : [
              { id: 'B', lines: b },
              { id: 'A', lines: a },
            ];
      expect(dead.lines.length, 'the runner that dies holds lines').toBeGreaterThan(0);
      now += 2000;
      await repo.renew(live.id, now + 1000);
      const c = await repo.claim(['b1'], 'm', 10, 'C', now + 1000, now);
      expect(c.map((l) => l.line).sort((x, y) => x - y)).toEqual(dead.lines.map((l) => l.line).sort((x, y) => x - y));
      expect(
        await repo.finish(dead.lines[0]!, dead.id, '{"late":true}', false),
        'the lapsed runner writes nothing',
      ).toBe(false);
      for (const l of c) expect(await repo.finish(l, 'C', `{"line":${l.line}}`, false)).toBe(true);
      for (const l of live.lines)
        expect(await repo.finish(l, live.id, `{"line":${l.line}}`, l.line % 2 === 0)).toBe(true);
      const counts = await repo.counts('b1', now);
      expect(counts).toMatchObject({ total: 10, running: 0, waiting: 0 });
      expect(counts.completed + counts.failed).toBe(10);
      const done = await repo.doneLines('b1', 0, 100);
      expect(done.map((d) => d.line)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
      expect(done.some((d) => d.result === '{"late":true}')).toBe(false);
    });

    it('puts a retried line back until its time, and closes the rest of an expired batch', async () => {
      const repo = new BatchRepository(store.connection);
      await repo.create(row('b2', 3, now), lines(3));
      const [first] = await repo.claim(['b2'], 'm', 1, 'A', now + 1000, now);
      expect(await repo.retryLater(first!, 'A', now + 5000)).toBe(true);
      const next = await repo.claim(['b2'], 'm', 3, 'A', now + 1000, now);
      expect(
        next.map((l) => l.line),
        'the retried line waits',
      ).toEqual([2, 3]);
      await repo.close('b2', 'batch_expired', now, true);
      expect(await repo.finish(next[0]!, 'A', '{}', false), 'a closed line takes no late answer').toBe(false);
      const done = await repo.doneLines('b2', 0, 10);
      expect(done.map((d) => d.errorCode)).toEqual(['batch_expired', 'batch_expired', 'batch_expired']);
    });

    it('says a batch has open lines while any is pending or running, under a live lease or a lapsed one', async () => {
      const repo = new BatchRepository(store.connection);
      await repo.create(row('b4', 2, now), lines(2));
      await repo.create(row('b5', 1, now), lines(1));
      expect(await repo.anyOpen('b4')).toBe(true);
      const [one, two] = await repo.claim(['b4'], 'm', 2, 'A', now + 1000, now);
      await repo.finish(one!, 'A', '{}', false);
      now += 2000;
      expect(await repo.anyOpen('b4'), 'a line under a lapsed lease is still open').toBe(true);
      expect(await repo.retryLater(two!, 'A', now + 60_000)).toBe(true);
      expect(await repo.anyOpen('b4'), 'a line waiting out a retry is still open').toBe(true);
      await repo.close('b4', 'batch_cancelled', now, false);
      expect(await repo.anyOpen('b4')).toBe(false);
      expect(await repo.anyOpen('b5'), "another batch's lines are its own").toBe(true);
      expect(await repo.anyOpen('no-such-batch')).toBe(false);
    });

    it("counts a line's failed tries, not its waits, and lists batches by owner", async () => {
      const repo = new BatchRepository(store.connection);
      await repo.create(row('b6', 1, now), lines(1));
      await repo.create({ ...row('b7', 1, now + 1), owner: 'team:b' }, lines(1));
      let [l] = await repo.claim(['b6'], 'm', 1, 'A', now + 1000, now);
      expect(l!.attempts).toBe(0);
      await repo.retryLater(l!, 'A', now, false);
      [l] = await repo.claim(['b6'], 'm', 1, 'A', now + 1000, now);
      expect(l!.attempts, 'a wait for a busy gateway is no failed try').toBe(0);
      await repo.retryLater(l!, 'A', now, true);
      [l] = await repo.claim(['b6'], 'm', 1, 'A', now + 1000, now);
      expect(l!.attempts).toBe(1);
      expect((await repo.listAll(null, 10)).map((b) => b.id)).toEqual(['b7', 'b6']);
      expect((await repo.listAll(['team:a'], 10)).map((b) => [b.id, b.total, b.created_at])).toEqual([['b6', 1, now]]);
      expect(await repo.listAll([], 10)).toEqual([]);
    });

    it('frees every running line at a lone restart (SQLite) and ends a batch once', async () => {
      const repo = new BatchRepository(store.connection);
      await repo.create(row('b3', 2, now), lines(2));
      await repo.claim(['b3'], 'm', 2, 'dead', now + 60_000, now);
      expect(await repo.releaseAll()).toBe(2);
      const again = await repo.claim(['b3'], 'm', 2, 'new', now + 1000, now);
      expect(again.length).toBe(2);
      for (const l of again) await repo.finish(l, 'new', '{}', false);
      expect(await repo.inputInUse('file-x'), 'its input may not be deleted while it runs').toBe(true);
      expect(await repo.claimEnding('b3', 'X', now + 1000, now)).toBe(true);
      expect(await repo.claimEnding('b3', 'Y', now + 1000, now), 'one instance ends it').toBe(false);
      expect(
        await repo.end('b3', 'X', 'completed', now, { completed: 2, failed: 0 }, { output: null, error: null }),
      ).toBe(true);
      expect((await repo.get('b3'))!).toMatchObject({ status: 'completed', completed: 2, completed_at: now });
      expect(await repo.doneLines('b3', 0, 10)).toEqual([]);
      expect(await repo.inputInUse('file-x')).toBe(false);
    });
  });
}
