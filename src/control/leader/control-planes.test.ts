// Two control planes in one process on one Postgres (real listeners on port
// 0): exactly one leads, both list each other, and an admin write on either
// (a model, a key, a node state) is visible on the other (within a second
// when the machine is not loaded: a NOTIFY, else the 1 s poll; how soon is
// bench's to measure, not a test's), which is what an operator behind a load
// balancer expects; explain-placement answers the same on both. A single SQLite
// instance answers the same endpoint as the one leader.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { ControlPlaneView } from '../../api/types.js';
import { createTestDatabase, describePostgres, type TestDatabase } from '../../../test/support/postgres.js';
import { waitFor } from '../../../test/support/wait.js';
import { compileControlOptions } from '../config/index.js';
import { ControlPlane } from '../control-plane.js';

const TOKEN = 'admin-token-for-tests-0123456789';
const auth = { authorization: `Bearer ${TOKEN}` };
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function plane(store: string): Promise<ControlPlane> {
  const config = compileControlOptions({
    store,
    admin_token: TOKEN,
    client_addr: '127.0.0.1:0',
    admin_addr: '127.0.0.1:0',
    agent_addr: '127.0.0.1:0',
  });
  const p = await ControlPlane.create(config, { logger: pino({ level: 'silent' }) });
  cleanups.push(() => p.close());
  return p;
}

async function list(p: ControlPlane): Promise<ControlPlaneView[]> {
  const res = await p.adminApp.inject({ method: 'GET', url: '/api/v1/control-planes', headers: auth });
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

describe('GET /api/v1/control-planes on one SQLite instance', () => {
  it('lists this instance alone, leading, with no epoch, behind the admin token', async () => {
    const p = await plane(`sqlite:${join(mkdtempSync(join(tmpdir(), 'llmgw-cp-')), 'db')}`);
    const urls = await p.listen();
    expect(await list(p)).toEqual([
      {
        id: 'local',
        address: urls.admin,
        is_leader: true,
        last_seen: expect.any(String),
        last_seen_seconds: 0,
        self: true,
      },
    ]);
    expect((await p.adminApp.inject({ method: 'GET', url: '/api/v1/control-planes' })).statusCode).toBe(401);
  });
});

describePostgres('two control planes on one Postgres, in one process', () => {
  it("elect one leader, list each other, and see each other's admin writes", async () => {
    const db: TestDatabase = await createTestDatabase();
    cleanups.push(() => db.drop());
    const a = await plane(db.url);
    const b = await plane(db.url);
    const urlsA = await a.listen();
    await b.listen();

    const seen = await waitFor(
      'one leader in both lists',
      async () => {
        const [la, lb] = [await list(a), await list(b)];
        const ok =
          la.length === 2 &&
          lb.length === 2 &&
          la.filter((c) => c.is_leader).length === 1 &&
          lb.filter((c) => c.is_leader).length === 1;
        return ok ? la : undefined;
      },
      10_000,
    );
    expect(seen.find((c) => c.self)!.address).toBe(urlsA.admin);
    const leader = seen.find((c) => c.is_leader)!;
    expect(leader.epoch, 'the leader shows its epoch').toBeGreaterThanOrEqual(1);
    expect(
      seen.filter((c) => !c.is_leader).every((c) => c.epoch === undefined),
      'followers have none',
    ).toBe(true);
    expect([a.cluster!.leads(), b.cluster!.leads()].filter(Boolean), 'exactly one leads').toHaveLength(1);

    // A model added on A is in B's catalog (NOTIFY; polling is the fallback at 1 s).
    const added = await a.adminApp.inject({
      method: 'POST',
      url: '/api/v1/models?force=true',
      headers: auth,
      payload: { name: 'shared', source: 'hf://org/shared', profiles: [{ engine: 'sim' }] },
    });
    expect(added.statusCode, added.body).toBe(200);
    await waitFor('the model on B', async () => (b.catalog.get('shared') ? true : undefined), 5000);

    // A key made on B works on A.
    const made = await b.adminApp.inject({
      method: 'POST',
      url: '/api/v1/keys',
      headers: auth,
      payload: { name: 'k' },
    });
    const { secret } = made.json<{ secret: string }>();
    await waitFor(
      'the key on A',
      async () => {
        // Over HTTP: the client listener's body timeout needs a real socket, which inject() does not give.
        const res = await fetch(`${urlsA.client}/v1/models`, { headers: { authorization: `Bearer ${secret}` } });
        return res.status === 200 ? true : undefined;
      },
      5000,
    );

    // A node joined through A and cordoned through B is cordoned on A.
    await a.inventory.join({
      id: 'n1',
      hostname: 'n1',
      mgmtAddr: null,
      labels: {},
      agentVersion: '1',
      protocolVersion: 1,
    });
    await waitFor('the node on B', async () => (b.inventory.get('n1') ? true : undefined), 5000);
    const cordon = await b.adminApp.inject({
      method: 'POST',
      url: '/api/v1/nodes/n1/state',
      headers: auth,
      payload: { state: 'cordon' },
    });
    expect(cordon.statusCode, cordon.body).toBe(200);
    await waitFor(
      'cordoned on A',
      async () => (a.inventory.get('n1')?.adminState === 'cordoned' ? true : undefined),
      5000,
    );

    // Explain-placement answers the same on both: a follower shows what the leader's last pass wrote.
    const big = await a.adminApp.inject({
      method: 'POST',
      url: '/api/v1/models?force=true',
      headers: auth,
      payload: { name: 'big', source: 'hf://org/big', profiles: [{ engine: 'vllm', gpus: 8 }] },
    });
    expect(big.statusCode, big.body).toBe(200);
    const explained = await waitFor(
      'the same explanation on both instances',
      async () => {
        const [ea, eb] = await Promise.all(
          [a, b].map(async (p) =>
            (
              await p.adminApp.inject({ method: 'GET', url: '/api/v1/explain-placement?model=big', headers: auth })
            ).json<{ rejections?: unknown[] }>(),
          ),
        );
        return ea!.rejections?.length && JSON.stringify(ea) === JSON.stringify(eb) ? ea : undefined;
      },
      10_000,
    );
    expect(JSON.stringify(explained), 'it names the cordoned node').toContain('n1');
  });
});
