// Postgres goes away under two control planes and comes back. Meanwhile
// clients keep being served from the replicas each instance knows (stale but
// serving), admin writes are refused with a 503 that names the store, and
// nothing running is restarted; once it returns, one instance leads again
// and writes work everywhere. Runs on a private cluster: stopping the shared
// test server would break every other test.
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
import { describePostgres } from '../support/postgres.js';
import { type PrivatePostgres, startPrivatePostgres } from '../support/private-postgres.js';
import { killEnginesOf, startControl, stopAll } from '../support/processes.js';
import { waitFor } from '../support/wait.js';

const stateDirs: string[] = [];
let pg: PrivatePostgres | undefined;

afterAll(async () => {
  await stopAll();
  killEnginesOf(stateDirs);
  pg?.destroy();
});

describePostgres('control planes while Postgres is away', () => {
  it(
    'keep serving, refuse admin writes with a clear 503, and recover when it returns',
    { timeout: 240_000 },
    async () => {
      pg = await startPrivatePostgres();
      const dir = mkdtempSync(join(tmpdir(), 'llmgw-e2e-outage-'));
      const args = [
        '--store',
        pg.url,
        '--join-token',
        JOIN,
        '--admin-token',
        ADMIN,
        '--reconcile-interval',
        '500ms',
        '--log-level',
        'warn',
      ];
      const cps = [await startControl(args), await startControl(args)];
      const admins = cps.map((c) => c.urls.admin);
      const stateDir = join(dir, 'o1');
      stateDirs.push(stateDir);
      startSimAgent(cps.map((c) => c.urls.agent).join(','), stateDir, 'o1', { first: 29500, count: 50 });

      await waitFor('the node up', async () => {
        const nodes = await getJson<{ liveness: string }[]>(`${admins[0]}/api/v1/nodes`);
        return nodes.length === 1 && nodes[0]!.liveness === 'up' ? true : undefined;
      });
      const add = await postJson(`${admins[0]}/api/v1/models`, {
        name: 'steady',
        source: weightsDir(dir),
        scaling: { min: 1 },
        profiles: [{ engine: 'sim', args: ['--ttft-ms', '1'] }],
      });
      expect(add.status, await add.clone().text()).toBe(200);
      for (const admin of admins) {
        await waitFor(
          `a ready replica as ${admin} sees it`,
          async () => {
            const list = await replicasOf(admin, 'steady');
            return list.length === 1 && list[0]!.state === 'ready' ? list : undefined;
          },
          60_000,
        );
      }
      const made = await postJson(`${admins[1]}/api/v1/keys`, { name: 'outage' });
      const { secret } = (await made.json()) as { secret: string };
      for (const cp of cps)
        await waitFor(
          `served through ${cp.urls.client}`,
          async () => ((await chat(cp.urls.client, secret, 'steady')) === 200 ? true : undefined),
          10_000,
        );
      const replicaId = (await replicasOf(admins[0]!, 'steady'))[0]!.id;
      const pids = enginePids(stateDir);

      const load = clientLoad(
        cps.map((c) => c.urls.client),
        secret,
        'steady',
        2,
      );
      pg.stop();

      // Stale but serving: reads answer from memory, writes are refused and say why.
      const servedBefore = load.count();
      for (const admin of admins) {
        const refused = await waitFor(`${admin} to refuse admin writes`, async () => {
          const res = await postJson(`${admin}/api/v1/models`, {
            name: 'during',
            source: weightsDir(dir),
            scaling: { min: 0 },
            profiles: [{ engine: 'sim' }],
          });
          return res.status === 503 ? res : undefined;
        });
        const body = (await refused.json()) as { error: string };
        expect(body.error).toContain(`the store (Postgres at 127.0.0.1:${pg.port}) is unreachable:`);
        expect(body.error).toContain('admin writes are refused until it returns');
        const list = await replicasOf(admin, 'steady');
        expect(
          list.map((r) => [r.id, r.state]),
          'reads still answer, from what the instance knows',
        ).toEqual([[replicaId, 'ready']]);
      }
      // Clients keep being served through the outage, not only before it.
      await waitFor('requests served while the store is away', async () =>
        load.count() >= servedBefore + 30 ? true : undefined,
      );

      pg.start();
      const back = await waitFor(
        'admin writes accepted again',
        async () => {
          const res = await postJson(`${admins[1]}/api/v1/models`, {
            name: 'after',
            source: weightsDir(dir),
            scaling: { min: 0 },
            profiles: [{ engine: 'sim' }],
          });
          return res.status === 200 ? true : undefined;
        },
        30_000,
      );
      expect(back).toBe(true);
      const leader = await waitFor(
        'one leader again',
        async () => {
          const leaders = (await getJson<ControlPlaneView[]>(`${admins[0]}/api/v1/control-planes`)).filter(
            (c) => c.is_leader,
          );
          return leaders.length === 1 ? leaders[0] : undefined;
        },
        20_000,
      );
      await waitFor(
        'the model added after the outage listed on the other instance',
        async () => {
          const models = await getJson<{ name: string }[]>(`${admins[0]}/api/v1/models`);
          return models.some((m) => m.name === 'after') ? true : undefined;
        },
        10_000,
      );
      // A few passes of the new leader: it must adopt, not replace.
      await afterPasses(leader.address!, 5);
      const statuses = await load.stop();
      expect(statuses.length, 'the load ran through the outage').toBeGreaterThan(20);
      expect(
        statuses.filter((s) => s !== 200),
        `every request was served (statuses: ${[...new Set(statuses)].join(', ')})`,
      ).toEqual([]);
      for (const admin of admins) {
        const list = await replicasOf(admin, 'steady');
        expect(
          list.map((r) => [r.id, r.state]),
          'the same replica, still ready',
        ).toEqual([[replicaId, 'ready']]);
      }
      expect(enginePids(stateDir), 'no engine was started again').toEqual(pids);
    },
  );
});
