// Three `llmgw control` processes on one Postgres, with simulated agents that
// know all three and sim engines. Every instance serves: a model added on
// one is listed and routed on the others. One leads the reconciler; when it
// is killed with SIGKILL under client load, another leads within a few
// seconds and adopts the running replicas: no engine is started again (pids
// and replica ids unchanged) and no client request to a surviving instance
// fails. A key's rate limit holds across instances.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import {
  ADMIN,
  afterPasses,
  chat,
  clientLoad,
  type ControlPlaneView,
  enginePids,
  getJson,
  JOIN,
  postJson,
  replicasOf,
  startSimAgent,
  weightsDir,
} from '../support/fleet.js';
import { createTestDatabase, describePostgres, type TestDatabase } from '../support/postgres.js';
import { killEnginesOf, startControl, stopAll } from '../support/processes.js';
import { waitFor } from '../support/wait.js';

const stateDirs: string[] = [];
let db: TestDatabase | undefined;

afterAll(async () => {
  await stopAll();
  killEnginesOf(stateDirs);
  await db?.drop();
});

describePostgres('several control planes on one Postgres', () => {
  it(
    'share the catalog and routing, survive kill -9 of the leader without restarting a replica, and share rate limits',
    { timeout: 240_000 },
    async () => {
      db = await createTestDatabase();
      const dir = mkdtempSync(join(tmpdir(), 'llmgw-e2e-ha-'));
      const args = [
        '--store',
        db.url,
        '--join-token',
        JOIN,
        '--admin-token',
        ADMIN,
        '--reconcile-interval',
        '500ms',
        '--log-level',
        'warn',
      ];
      const cps = [await startControl(args), await startControl(args), await startControl(args)];
      const admins = cps.map((c) => c.urls.admin);

      const planes = await waitFor('exactly one leader among three instances', async () => {
        const list = await getJson<ControlPlaneView[]>(`${admins[1]}/api/v1/control-planes`);
        return list.length === 3 && list.filter((c) => c.is_leader).length === 1 ? list : undefined;
      });
      const leaderView = planes.find((c) => c.is_leader)!;
      const leaderIndex = admins.indexOf(leaderView.address!);
      expect(
        leaderIndex,
        `the leader's address ${leaderView.address} is one of ${admins.join(', ')}`,
      ).toBeGreaterThanOrEqual(0);
      expect(leaderView.epoch, 'the leader shows its epoch').toBeGreaterThanOrEqual(1);

      // Agents list every instance, leader first; each starts at the one its node id picks (a fleet
      // spreads over them), so an agent reporting to the leader must fail over when it is killed.
      const order = [leaderIndex, ...[0, 1, 2].filter((i) => i !== leaderIndex)];
      const controlList = order.map((i) => cps[i]!.urls.agent).join(',');
      for (const [n, id] of ['h1', 'h2'].entries()) {
        const stateDir = join(dir, id);
        stateDirs.push(stateDir);
        startSimAgent(controlList, stateDir, id, { first: 29000 + n * 50, count: 50 });
      }
      for (const admin of admins) {
        await waitFor(`two nodes up as ${admin} sees them`, async () => {
          const nodes = await getJson<{ liveness: string }[]>(`${admin}/api/v1/nodes`);
          return nodes.length === 2 && nodes.every((n) => n.liveness === 'up') ? true : undefined;
        });
      }

      // A model added on a follower is placed by the leader and listed everywhere.
      const follower = order[1]!;
      const add = await postJson(`${admins[follower]}/api/v1/models`, {
        name: 'chat',
        source: weightsDir(dir),
        scaling: { min: 2 },
        profiles: [{ engine: 'sim', args: ['--ttft-ms', '1'] }],
      });
      expect(add.status, await add.clone().text()).toBe(200);
      for (const admin of admins) {
        await waitFor(
          `two ready replicas as ${admin} sees them`,
          async () => {
            const list = await replicasOf(admin, 'chat');
            return list.length === 2 && list.every((r) => r.state === 'ready') ? true : undefined;
          },
          60_000,
        );
      }

      // A key made on one instance works on every instance, and the model routes through each.
      const made = await postJson(`${admins[order[2]!]}/api/v1/keys`, { name: 'load' });
      expect(made.status).toBe(201);
      const { secret } = (await made.json()) as { secret: string };
      for (const cp of cps) {
        await waitFor(
          `a completion routed through ${cp.urls.client}`,
          async () => ((await chat(cp.urls.client, secret, 'chat')) === 200 ? true : undefined),
          10_000,
        );
      }

      // A dashboard login on one instance holds on another (one address in front of them), and logging out there ends it here.
      const form = (body: Record<string, string>) => ({
        method: 'POST',
        redirect: 'manual' as const,
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams(body).toString(),
      });
      const login = await fetch(`${admins[0]}/login`, form({ token: ADMIN }));
      expect(login.status).toBe(303);
      const cookie = login.headers.get('set-cookie')!.split(';')[0]!;
      const elsewhere = await fetch(`${admins[1]}/`, { headers: { cookie }, redirect: 'manual' });
      expect(elsewhere.status, 'the other instance serves the page, not the login').toBe(200);
      const csrf = /name="csrf" value="([^"]+)"/.exec(await elsewhere.text())![1]!;
      const logout = await fetch(`${admins[1]}/logout`, {
        ...form({ csrf }),
        headers: { ...form({}).headers, cookie },
      });
      expect(logout.status).toBe(303);
      const after = await fetch(`${admins[0]}/`, { headers: { cookie }, redirect: 'manual' });
      expect(after.status, 'logged out there: the first instance asks for a login again').toBe(303);
      expect(after.headers.get('location')).toBe('/login');

      // Kill the leader under load on the survivors.
      const ids = (await replicasOf(admins[follower]!, 'chat')).map((r) => r.id).sort();
      const pids = stateDirs.map(enginePids);
      const survivors = order.slice(1);
      const load = clientLoad(
        survivors.map((i) => cps[i]!.urls.client),
        secret,
        'chat',
      );
      await waitFor('the load to be running', async () => (load.count() >= 10 ? true : undefined));
      const killedAt = Date.now();
      await cps[leaderIndex]!.stop('SIGKILL');
      const next = await waitFor(
        'another instance leads',
        async () => {
          const list = await getJson<ControlPlaneView[]>(`${admins[follower]}/api/v1/control-planes`);
          const leader = list.find((c) => c.is_leader && c.address !== admins[leaderIndex]);
          return leader && (leader.epoch ?? 0) > leaderView.epoch! ? leader : undefined;
        },
        20_000,
      );
      const takeoverMs = Date.now() - killedAt;
      expect(takeoverMs, 'a new leader within the bound (lock retry 1 s + takeover grace 1.5 s + slack)').toBeLessThan(
        10_000,
      );
      expect(survivors.map((i) => admins[i])).toContain(next.address);

      // Let the new leader run several passes with agents failing over to it, then look again.
      await afterPasses(next.address!, 6);
      const statuses = await load.stop();
      expect(statuses.length, 'the load ran').toBeGreaterThan(20);
      expect(
        statuses.filter((s) => s !== 200),
        `no request to a surviving instance failed (statuses: ${[...new Set(statuses)].join(', ')})`,
      ).toEqual([]);
      for (const i of survivors) {
        const list = await replicasOf(admins[i]!, 'chat');
        expect(list.map((r) => r.id).sort(), `the same replicas on ${admins[i]}, not new ones`).toEqual(ids);
        expect(
          list.every((r) => r.state === 'ready'),
          `all still ready: ${JSON.stringify(list.map((r) => r.state))}`,
        ).toBe(true);
      }
      expect(stateDirs.map(enginePids), 'no engine was started again').toEqual(pids);
      const nodes = await getJson<{ id: string; liveness: string }[]>(`${next.address}/api/v1/nodes`);
      expect(
        nodes.map((n) => [n.id, n.liveness]),
        'the agents failed over and the new leader judges them up',
      ).toEqual([
        ['h1', 'up'],
        ['h2', 'up'],
      ]);

      // A key limited to 6 requests a minute gets 6 over two instances, not 6 on each.
      const limited = await postJson(`${admins[survivors[0]!]}/api/v1/keys`, {
        name: 'limited',
        requests_per_minute: 6,
      });
      const limitedSecret = ((await limited.json()) as { secret: string }).secret;
      const [a, b] = survivors.map((i) => cps[i]!.urls.client) as [string, string];
      await waitFor('the limited key known on the other instance', async () => {
        const res = await fetch(`${b}/v1/models`, { headers: { authorization: `Bearer ${limitedSecret}` } });
        return res.status === 200 ? true : undefined;
      });
      const batchesFromMs = Date.now();
      const firstBatch: number[] = [];
      for (let i = 0; i < 4; i++) firstBatch.push(await chat(a, limitedSecret, 'chat'));
      // Two sync intervals (200 ms each) is the stated tolerance; wait well past it.
      await new Promise((r) => setTimeout(r, 1000));
      const second: number[] = [];
      for (let i = 0; i < 4; i++) second.push(await chat(b, limitedSecret, 'chat'));
      expect(firstBatch, 'the first instance admits four').toEqual([200, 200, 200, 200]);
      // The estimate slides over two fixed minutes: this minute's count plus the last one's weighted by
      // (1 - f), f the share of this minute gone. Both batches in one minute: the counts are exact. A
      // minute begun in between lets the first batch weigh a little less, so the second instance could
      // admit a third request once f passed 1/4, never a fourth before 1/2; either way not the four it
      // would admit on its own. Asserting that, rather than waiting for a fresh minute, keeps the test
      // off the wall clock.
      if (Math.floor(batchesFromMs / 60_000) === Math.floor(Date.now() / 60_000)) {
        expect(second, 'the second admits only the two left of six').toEqual([200, 200, 429, 429]);
      } else {
        expect(
          second.slice(0, 2),
          `the second admits the two left of six (a minute began meanwhile: ${second.join(', ')})`,
        ).toEqual([200, 200]);
        expect(second[3], `the second refuses the fourth (a minute began meanwhile: ${second.join(', ')})`).toBe(429);
      }

      // A model at zero, asked for through a follower: the request is held there, its demand reaches the
      // leader through the store, the leader starts one replica, and the request is answered.
      const newLeader = admins.indexOf(next.address!);
      const aFollower = survivors.find((i) => i !== newLeader)!;
      const cold = await postJson(`${admins[newLeader]}/api/v1/models`, {
        name: 'cold',
        source: weightsDir(dir),
        scaling: { min: 0, max: 1 },
        profiles: [{ engine: 'sim', args: ['--ttft-ms', '1'] }],
      });
      expect(cold.status, await cold.clone().text()).toBe(200);
      await waitFor('the cold model known on the follower', async () =>
        (await getJson<{ name: string }[]>(`${admins[aFollower]}/api/v1/models`)).some((m) => m.name === 'cold')
          ? true
          : undefined,
      );
      expect(await replicasOf(admins[aFollower]!, 'cold'), 'nothing runs for it yet').toEqual([]);
      const first = await fetch(`${cps[aFollower]!.urls.client}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'cold', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 }),
        signal: AbortSignal.timeout(90_000),
      });
      expect(
        first.status,
        `the first request, held through a cold start on a follower: ${await first.clone().text()}`,
      ).toBe(200);
      expect((await replicasOf(admins[newLeader]!, 'cold')).length, 'one replica was started for it').toBe(1);
    },
  );
});
