// A team's fair-share weight, from the admin route to the queue. The
// failures this guards against: a weight set through the API that never
// reaches the gateway's key (the queue weighing every team 1, as before
// weights could be set), a weight lost by the store, and a zero or negative
// weight accepted (a team that would never be served, or served first
// forever).
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { storeBackends } from '../../../test/support/postgres.js';
import type { ApiKeyRecord, ModelCapacity, RoutedModel } from '../../gateway/ports/index.js';
import { FairShare } from '../../gateway/fair-share/index.js';
import { createJsonApp } from '../../http/index.js';
import { Store, type StoreLocation } from '../store/index.js';
import { MemoryTeams, StoredTeams } from './store.js';
import { narrowKey, type TeamRecord } from './teams.js';
import { registerTeamAdmin } from './admin.js';

const canonical = (name: string) => name;
const team = (name: string, weight?: number): TeamRecord => ({
  name,
  allowedModels: null,
  requestsPerMinute: null,
  tokensPerMinute: null,
  ...(weight === undefined ? {} : { weight }),
  createdAtMs: 0,
  createdBy: 't',
  updatedAtMs: 0,
});
const key = (id: string, teamName: string): ApiKeyRecord => ({
  id,
  name: id,
  prefix: 'llmgw-xxxxxx',
  hash: id,
  allowedModels: null,
  requestsPerMinute: null,
  tokensPerMinute: null,
  expiresAtMs: null,
  createdAtMs: 0,
  createdBy: 't',
  revokedAtMs: null,
  team: teamName,
});

describe("a team's weight on the key the gateway reads", () => {
  it('is carried when it is not 1, and absent (weighing 1) otherwise', () => {
    expect(narrowKey(key('k', 'ml'), team('ml', 3), canonical).teamWeight).toBe(3);
    expect(narrowKey(key('k', 'ml'), team('ml', 1), canonical)).not.toHaveProperty('teamWeight');
    expect(narrowKey(key('k', 'ml'), team('ml'), canonical)).not.toHaveProperty('teamWeight');
  });
});

describe('the fair-share queue with weighted teams', () => {
  it('gives a team of weight 2 two turns for each of a team of weight 1', async () => {
    const capacity: ModelCapacity = { perReplica: 1, queueTimeoutMs: 60_000, queuePerTenant: 100 };
    const model = { name: 'alpha', capacity } as unknown as RoutedModel;
    const share = new FairShare(
      { ready: () => [], describe: () => 'none', demand: () => false } as never,
      () => 1,
      Date.now,
    );
    const heavy = narrowKey(key('k_heavy', 'heavy'), team('heavy', 2), canonical);
    const light = narrowKey(key('k_light', 'light'), team('light'), canonical);
    const waiter = (k: ApiKeyRecord) => ({ key: k, clientGone: false, timedOut: false, revoked: false, wake: null });
    // One place: a first request holds it while twelve of each team queue behind it.
    expect(await share.enter(waiter(light), model, undefined)).toMatchObject({ ok: true });
    const order: string[] = [];
    const queued = [];
    for (let i = 0; i < 12; i++)
      for (const k of [light, heavy])
        queued.push(
          Promise.resolve(share.enter(waiter(k), model, undefined)).then((p) => {
            if (p.ok) order.push(k.team!);
          }),
        );
    for (let i = 0; i < 12; i++) {
      share.leave(model);
      await new Promise((r) => setImmediate(r));
    }
    expect(order).toHaveLength(12);
    const heavyTurns = order.filter((t) => t === 'heavy').length;
    expect(heavyTurns, `turns in order: ${order.join(', ')}`).toBe(8);
    for (let i = 0; i < 12; i++) share.leave(model);
    await Promise.all(queued);
    share.close();
  });
});

describe('team routes', () => {
  it('set a weight at creation and later, show it, and refuse one out of range', async () => {
    const teams = new MemoryTeams();
    const app = createJsonApp({ logger: pino({ level: 'silent' }), bodyLimitBytes: 1 << 20 });
    registerTeamAdmin(app, { teams, keys: () => [], now: () => 1000, audit: () => undefined, canonical });
    const made = await app.inject({ method: 'POST', url: '/api/v1/teams', payload: { name: 'ml', weight: 2 } });
    expect(made.statusCode, made.body).toBe(201);
    expect(made.json()).toMatchObject({ name: 'ml', weight: 2 });
    expect(teams.get('ml')?.weight).toBe(2);
    const plain = await app.inject({ method: 'POST', url: '/api/v1/teams', payload: { name: 'ops' } });
    expect(plain.json(), 'a team made without one weighs 1').toMatchObject({ weight: 1 });
    const set = await app.inject({ method: 'POST', url: '/api/v1/teams/ml', payload: { weight: 0.5 } });
    expect(set.statusCode, set.body).toBe(200);
    expect(set.json()).toMatchObject({ weight: 0.5 });
    const other = await app.inject({ method: 'POST', url: '/api/v1/teams/ml', payload: { requests_per_minute: 60 } });
    expect(other.json(), 'another change keeps the weight').toMatchObject({ weight: 0.5, requests_per_minute: 60 });
    for (const weight of [0, -1, 5000]) {
      const bad = await app.inject({ method: 'POST', url: '/api/v1/teams/ml', payload: { weight } });
      expect(bad.statusCode, `weight ${weight}`).toBe(400);
      expect(bad.json<{ error: string }>().error).toContain('weight');
    }
  });
});

for (const backend of storeBackends('llmgw-team-weight')) {
  describe.skipIf(backend.skip !== '')(`a team's weight in the store on ${backend.name}`, () => {
    let location: StoreLocation;
    let teardown: () => Promise<void>;
    beforeAll(async () => {
      ({ location, teardown } = await backend.setup());
    });
    afterAll(async () => {
      await teardown();
    });

    it('is kept, changed, read by another control plane, and 1 for the default team migrated in', async () => {
      const stores = [await Store.open({ location }), await Store.open({ location })];
      try {
        const [a, b] = [
          await StoredTeams.create(stores[0]!.connection),
          await StoredTeams.create(stores[1]!.connection),
        ];
        expect(a.get('default')?.weight, 'the team 0017 made weighs 1').toBe(1);
        await a.create(team('ml', 3));
        await b.reload();
        expect(b.get('ml')?.weight).toBe(3);
        await b.update({ ...b.get('ml')!, weight: 0.25 });
        await a.reload();
        expect(a.get('ml')?.weight).toBe(0.25);
      } finally {
        for (const s of stores) await s.close();
      }
    });
  });
}
