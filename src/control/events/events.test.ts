import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { Store } from '../store/index.js';
import { Events } from './events.js';

const logger = pino({ level: 'silent' });
const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe('Events', () => {
  it('without a store keeps the newest events in memory, newest first, filtered by model and id', async () => {
    let clock = 1000;
    const events = new Events({ store: null, now: () => clock++, logger, keep: 3 });
    events.record({ kind: 'node_joined', node: 'n1', message: 'node n1 joined' });
    events.record({ kind: 'scale', model: 'a', from: 0, to: 1, message: 'up' });
    events.record({ kind: 'scale', model: 'b', from: 1, to: 2, message: 'up b' });
    events.record({ kind: 'scale', model: 'a', from: 1, to: 3, message: 'up again' });
    const all = await events.list();
    expect(
      all.map((e) => e.message),
      'the oldest beyond `keep` is gone',
    ).toEqual(['up again', 'up b', 'up']);
    expect(all[0]).toEqual({
      id: 4,
      atMs: 1003,
      kind: 'scale',
      model: 'a',
      node: null,
      replica: null,
      from: 1,
      to: 3,
      message: 'up again',
    });
    expect((await events.list({ model: 'a' })).map((e) => e.id)).toEqual([4, 2]);
    expect((await events.list({ afterId: 2 })).map((e) => e.id)).toEqual([4, 3]);
    expect((await events.list({ limit: 1 })).map((e) => e.id)).toEqual([4]);
  });

  it('with a store, writes in order, lists what was recorded before the call, and stays bounded', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-events-'));
    dirs.push(dir);
    const store = await Store.open({ location: { kind: 'sqlite', path: join(dir, 'db') } });
    const events = new Events({ store, now: () => 5000, logger, keep: 50 });
    for (let i = 0; i < 250; i++) events.record({ kind: 'drain', model: 'm', replica: `r${i}`, message: `drain ${i}` });
    const newest = await events.list({ limit: 2 });
    expect(
      newest.map((e) => e.replica),
      'no write is lost or reordered',
    ).toEqual(['r249', 'r248']);
    const kept = await store.events.list({ limit: 1000 });
    expect(kept.length, 'pruned to the newest 50 every hundred appends').toBeLessThanOrEqual(50 + 100);
    expect(kept.at(-1)!.replica, 'what is kept is the newest').not.toBe('r0');
    await store.close();
  });
});
