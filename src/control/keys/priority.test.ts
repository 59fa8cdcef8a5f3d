// A key's priority class: set when the key is made, kept in the store
// (migration 0021) on every dialect, read back after a restart, shown by the
// admin API, and refused with words when it names no class. A key made
// before 0021, or without a class, is interactive.
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { storeBackends } from '../../../test/support/postgres.js';
import { StoreConnection } from '../store/connection.js';
import { issueKey, keyView, MemoryKeyStore } from './keys.js';
import { StoredKeys } from './stored.js';
import { registerKeyAdmin } from './admin.js';
import { createJsonApp } from '../../http/index.js';

const backends = storeBackends('llmgw-priority');

for (const backend of backends) {
  describe.skipIf(backend.skip !== '')(`a key's priority in the store on ${backend.name}`, () => {
    const drops: (() => Promise<void>)[] = [];
    afterAll(async () => {
      for (const d of drops) await d();
    });

    it('keeps a batch key batch across a reopen, and reads a key without one as interactive', async () => {
      const { location: at, teardown } = await backend.setup();
      drops.push(teardown);
      const first = await StoreConnection.open({ location: at });
      const keys = await StoredKeys.create(first);
      const bulk = await issueKey(keys, { name: 'bulk', priority: 'batch' }, Date.now(), 'test');
      const app = await issueKey(keys, { name: 'app' }, Date.now(), 'test');
      await first.close();
      const second = await StoreConnection.open({ location: at });
      const again = await StoredKeys.create(second);
      expect(again.lookupByHash(bulk.record.hash)).toMatchObject({ priority: 'batch' });
      expect(again.lookupByHash(app.record.hash)).not.toHaveProperty('priority');
      expect(keyView(again.lookupByHash(app.record.hash) as never, Date.now()).priority).toBe('interactive');
      await second.close();
    });
  });
}

describe("a key's priority through the admin API", () => {
  it('makes a batch key, lists it as batch, and refuses a class that does not exist', async () => {
    const keys = new MemoryKeyStore();
    const app = createJsonApp({ logger: pino({ level: 'silent' }), bodyLimitBytes: 1 << 20 });
    registerKeyAdmin(app, { keys, now: () => Date.now(), audit: () => undefined });
    const made = await app.inject({
      method: 'POST',
      url: '/api/v1/keys',
      payload: { name: 'bulk', priority: 'batch' },
    });
    expect(made.statusCode).toBe(201);
    expect(made.json()).toMatchObject({ name: 'bulk', priority: 'batch' });
    const listed = await app.inject({ method: 'GET', url: '/api/v1/keys' });
    expect(listed.json().keys[0]).toMatchObject({ priority: 'batch' });
    const bad = await app.inject({ method: 'POST', url: '/api/v1/keys', payload: { name: 'x', priority: 'urgent' } });
    expect(bad.statusCode).toBe(400);
    expect(bad.body).toMatch(/priority.*want one of interactive, batch/);
    await app.close();
  });
});
