// The store's contract, run against every dialect: SQLite always, Postgres
// where LLMGW_TEST_POSTGRES names a server (CI starts one).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { Kysely, Migrator, SqliteDialect, sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { POSTGRES_SKIP_REASON, POSTGRES_URL, storeBackends } from '../../../test/support/postgres.js';
import type { StoreLocation } from './connection.js';
import { StaticMigrationProvider } from './migrations.js';
import { Store } from './store.js';

for (const backend of storeBackends('llmgw-store')) {
  describe.skipIf(backend.skip !== '')(
    `store contract on ${backend.name}${backend.skip ? ` (skipped: ${backend.skip})` : ''}`,
    () => {
      let location: StoreLocation;
      let teardown: () => Promise<void>;
      let clock = 1_000;
      const now = () => clock;

      beforeAll(async () => {
        ({ location, teardown } = await backend.setup());
      });
      afterAll(async () => {
        await teardown();
      });

      it('keeps the proven identity and the claimed label of an audit row apart', async () => {
        const store = await Store.open({ location, now });
        await store.audit.append({
          actor: { identity: 'admin-token', label: 'the-ceo' },
          action: 'key.create',
          target: 'audit-id-test',
        });
        await store.models.insert(
          'audit-id-model',
          {},
          { actor: { identity: 'admin-token', label: 'alice' }, action: 'model.add', target: 'audit-id-model' },
        );
        await store.audit.append({ actor: 'node:n9', action: 'node.join', target: 'audit-id-test' });
        const rows = await store.audit.list({ target: 'audit-id-test' });
        expect(rows.map((r) => [r.actor, r.actorLabel])).toEqual([
          ['node:n9', null],
          ['admin-token', 'the-ceo'],
        ]);
        expect(
          (await store.models.list()).find((m) => m.name === 'audit-id-model')?.createdBy,
          'created_by shows both',
        ).toBe('admin-token (alice)');
        await store.models.delete('audit-id-model', {
          actor: 'admin-token',
          action: 'model.remove',
          target: 'audit-id-model',
        });
        await store.close();
      });

      it('filters the audit log by time, actor (identity or label) and action or action family, with _ and % taken literally', async () => {
        let at = 50_000;
        const store = await Store.open({ location, now: () => at });
        await store.audit.append({
          actor: { identity: 'admin-token', label: 'filter-alice' },
          action: 'join_token.create',
          target: 'filter-n1',
        });
        at = 60_000;
        await store.audit.append({ actor: 'node:filter-n1', action: 'node.join', target: 'filter-n1' });
        await store.audit.append({
          actor: { identity: 'admin-token', label: 'filter-alice' },
          action: 'joinXtoken.create',
          target: 'filter-n1',
        });
        const actions = async (o: Parameters<typeof store.audit.list>[0]) =>
          (await store.audit.list({ target: 'filter-n1', ...o })).map((r) => r.action);
        expect(await actions({ sinceMs: 60_000 })).toEqual(['joinXtoken.create', 'node.join']);
        expect(await actions({ actor: 'filter-alice' })).toEqual(['joinXtoken.create', 'join_token.create']);
        expect(await actions({ actor: 'node:filter-n1' })).toEqual(['node.join']);
        expect(await actions({ action: 'node.' })).toEqual(['node.join']);
        expect(await actions({ action: 'join_token.' }), 'the underscore is not a wildcard').toEqual([
          'join_token.create',
        ]);
        expect(await actions({ action: 'node.join' })).toEqual(['node.join']);
        await store.close();
      });

      it('keeps a model and its audit row across a reopen', async () => {
        const store = await Store.open({ location, now });
        await store.models.insert(
          'm1',
          { name: 'm1', source: 'hf://a/b' },
          { actor: 'alice', action: 'model.add', target: 'm1', detail: { x: 1 } },
        );
        await store.close();

        clock = 2_000;
        const again = await Store.open({ location, now });
        const models = await again.models.list();
        expect(models).toEqual([
          {
            name: 'm1',
            definition: { name: 'm1', source: 'hf://a/b' },
            createdAt: 1_000,
            createdBy: 'alice',
            updatedAt: 1_000,
          },
        ]);
        const audit = await again.audit.list({ target: 'm1' });
        expect(audit).toHaveLength(1);
        expect(audit[0]).toMatchObject({
          at: 1_000,
          actor: 'alice',
          action: 'model.add',
          target: 'm1',
          detail: { x: 1 },
        });
        expect(typeof audit[0]!.id, 'ids come back as numbers on every dialect').toBe('number');
        await again.close();
      });

      it('refuses a second model with the same name and writes nothing for it', async () => {
        const store = await Store.open({ location, now });
        await store.models.insert('dup', { v: 1 }, { actor: 'a', action: 'model.add', target: 'dup' });
        await expect(
          store.models.insert('dup', { v: 2 }, { actor: 'b', action: 'model.add', target: 'dup' }),
        ).rejects.toMatchObject({
          code: 'LLMGW_CATALOG_CONFLICT',
        });
        const audit = await store.audit.list({ target: 'dup' });
        expect(
          audit.map((a) => a.actor),
          'the refused write left no audit row',
        ).toEqual(['a']);
        expect((await store.models.list()).find((m) => m.name === 'dup')?.definition).toEqual({ v: 1 });
        await store.close();
      });

      it('deletes a model with an audit row, and reports a missing one without writing', async () => {
        const store = await Store.open({ location, now });
        await store.models.insert('gone', {}, { actor: 'a', action: 'model.add', target: 'gone' });
        expect(await store.models.delete('gone', { actor: 'b', action: 'model.remove', target: 'gone' })).toBe(true);
        expect(await store.models.delete('gone', { actor: 'c', action: 'model.remove', target: 'gone' })).toBe(false);
        const audit = await store.audit.list({ target: 'gone' });
        expect(audit.map((a) => `${a.action}:${a.actor}`)).toEqual(['model.remove:b', 'model.add:a']);
        await store.close();
      });

      it('keeps replicas and their shards across a reopen, so a restarted control plane can adopt them', async () => {
        const replica = {
          id: 'rep-1',
          model: 'm',
          profile: 'vllm-tp2',
          pool: 'pool=a',
          fabric: 'ib0',
          state: 'starting',
          endpoint: null,
          error: null,
          createdAtMs: 1_000,
          lastUsedAtMs: null,
          failures: 0,
          nextRetryAtMs: null,
          stateSinceMs: 1_000,
          replaces: null,
          updatedAtMs: 1_000,
          // Kept, so a restarted control plane or a follower can still call the engines (their --api-key).
          engineSecret: 'replica-secret',
          shards: [
            { id: 'sh-b', nodeId: 'n2', rank: 1, gpuIndices: [2, 3], state: 'starting', error: null, endpoint: null },
            { id: 'sh-a', nodeId: 'n1', rank: 0, gpuIndices: [0, 1], state: 'starting', error: null, endpoint: null },
          ],
        };
        const store = await Store.open({ location, now });
        await store.replicas.insert(replica);
        expect(await store.replicas.setShardState('sh-a', 'ready', { endpoint: 'http://n1:9000' })).toBe(true);
        expect(await store.replicas.setShardState('nope', 'ready')).toBe(false);
        clock = 5_000;
        expect(await store.replicas.setState('rep-1', 'failed', { error: 'engine exited' })).toBe(true);
        await store.close();

        const again = await Store.open({ location, now });
        const [row] = await again.replicas.list();
        expect(row, 'the replica comes back with its shards in rank order').toEqual({
          ...replica,
          state: 'failed',
          error: 'engine exited',
          stateSinceMs: 5_000,
          updatedAtMs: 5_000,
          shards: [
            {
              id: 'sh-a',
              nodeId: 'n1',
              rank: 0,
              gpuIndices: [0, 1],
              state: 'ready',
              error: null,
              endpoint: 'http://n1:9000',
            },
            { id: 'sh-b', nodeId: 'n2', rank: 1, gpuIndices: [2, 3], state: 'starting', error: null, endpoint: null },
          ],
        });

        // A retry replaces the shards; a removal deletes the replica with its shards.
        const retried = {
          ...row!,
          state: 'pending',
          failures: 1,
          nextRetryAtMs: null,
          shards: [
            { id: 'sh-c', nodeId: 'n3', rank: 0, gpuIndices: [5], state: 'pending', error: null, endpoint: null },
          ],
        };
        const other = { ...replica, id: 'rep-2', shards: [{ ...replica.shards[1]!, id: 'sh-d', rank: 0 }] };
        await again.replicas.save([retried, other], []);
        expect(
          (await again.replicas.list()).map((r) => `${r.id}:${r.state}:${r.shards.map((s) => s.id).join('+')}`),
        ).toEqual(['rep-1:pending:sh-c', 'rep-2:starting:sh-d']);
        await again.replicas.save([], ['rep-1', 'rep-2']);
        expect(await again.replicas.list()).toEqual([]);
        const shardsLeft = await again.connection.db.selectFrom('shards').selectAll().execute();
        expect(shardsLeft, 'no shard outlives its replica').toEqual([]);
        await again.close();
      });

      it('keeps events newest first, filters them by model and by id, and prunes all but the newest', async () => {
        const store = await Store.open({ location, now });
        const ids: number[] = [];
        for (let i = 0; i < 6; i++) {
          ids.push(
            await store.events.append({
              atMs: 5_000 + i,
              kind: 'scale',
              model: i % 2 ? 'a' : 'b',
              from: i,
              to: i + 1,
              message: `step ${i}`,
            }),
          );
        }
        ids.push(
          await store.events.append({ atMs: 6_000, kind: 'node_joined', node: 'n1', message: 'node n1 joined' }),
        );
        expect(
          [...ids].sort((x, y) => x - y),
          'ids grow with each event',
        ).toEqual(ids);
        const all = await store.events.list();
        expect(all.map((e) => e.message)).toEqual([
          'node n1 joined',
          'step 5',
          'step 4',
          'step 3',
          'step 2',
          'step 1',
          'step 0',
        ]);
        expect(all[0]).toEqual({
          id: ids[6],
          atMs: 6_000,
          kind: 'node_joined',
          model: null,
          node: 'n1',
          replica: null,
          from: null,
          to: null,
          message: 'node n1 joined',
        });
        expect((await store.events.list({ model: 'a', limit: 2 })).map((e) => [e.from, e.to])).toEqual([
          [5, 6],
          [3, 4],
        ]);
        expect((await store.events.list({ afterId: ids[4]! })).map((e) => e.message)).toEqual([
          'node n1 joined',
          'step 5',
        ]);
        expect(await store.events.prune(3), 'four of seven pruned').toBe(4);
        expect((await store.events.list()).map((e) => e.id)).toEqual([ids[6], ids[5], ids[4]]);
        expect(await store.events.prune(3), 'nothing more to prune').toBe(0);
        await store.close();
      });

      it('keeps node secrets as hashes, frees a removed node id, and uses a per-node join token once', async () => {
        const store = await Store.open({ location, now });
        const audit = { actor: 'node:x1', action: 'node.join', target: 'x1', detail: {} };
        const join = {
          id: 'x1',
          hostname: null,
          mgmtAddr: '10.0.0.1:1',
          labels: {},
          credentialHash: 'a'.repeat(64),
          mgmtNonce: 'n1',
          mgmtTokenHash: 'b'.repeat(64),
          agentVersion: null,
          protocolVersion: null,
        };
        const row = await store.nodes.upsertOnJoin({ ...join, approvalIfNew: 'pending' }, audit);
        expect([row.approval, row.mgmtNonce, row.mgmtTokenHash, row.removedAtMs]).toEqual([
          'pending',
          'n1',
          'b'.repeat(64),
          null,
        ]);
        expect(
          await store.nodes.setApproval(
            'x1',
            { approval: 'approved', approvedHardware: '1 gpu: a', hardwareChange: null },
            null,
          ),
        ).toBe(true);
        expect(await store.nodes.setMgmtToken('x1', 'n2', 'c'.repeat(64))).toBe(true);
        const rejoined = await store.nodes.upsertOnJoin({ ...join, mgmtNonce: 'n3', approvalIfNew: 'pending' }, audit);
        expect(
          [rejoined.approval, rejoined.approvedHardware, rejoined.mgmtNonce],
          'a rejoin keeps the approval',
        ).toEqual(['approved', '1 gpu: a', 'n3']);

        clock += 1;
        expect(await store.nodes.remove('x1', { actor: 'ops', action: 'node.remove', target: 'x1', detail: {} })).toBe(
          true,
        );
        expect(
          await store.nodes.remove('x1', { actor: 'ops', action: 'node.remove', target: 'x1', detail: {} }),
          'once',
        ).toBe(false);
        const tomb = (await store.nodes.get('x1'))!;
        expect([tomb.removedAtMs, tomb.credentialHash, tomb.mgmtNonce, tomb.mgmtTokenHash]).toEqual([
          clock,
          '',
          null,
          null,
        ]);
        expect(
          (await store.nodes.list({ changedSinceMs: clock })).map((n) => n.id),
          'other instances see the removal',
        ).toContain('x1');
        const back = await store.nodes.upsertOnJoin({ ...join, approvalIfNew: 'pending' }, audit);
        expect([back.removedAtMs, back.approval, back.approvedHardware], 'joins afresh').toEqual([
          null,
          'pending',
          null,
        ]);

        await store.joinTokens.create(
          { id: 'jt-1', node: 'x2', hash: 'd'.repeat(64), expiresAtMs: clock + 100, createdBy: 'ops' },
          { actor: 'ops', action: 'join_token.create', target: 'x2', detail: {} },
        );
        expect(await store.joinTokens.consume('d'.repeat(64), 'x3', clock), 'another node').toBeNull();
        expect(await store.joinTokens.consume('d'.repeat(64), 'x2', clock + 100), 'expired').toBeNull();
        expect((await store.joinTokens.consume('d'.repeat(64), 'x2', clock))?.usedAtMs).toBe(clock);
        expect(await store.joinTokens.consume('d'.repeat(64), 'x2', clock), 'used').toBeNull();
        expect((await store.joinTokens.list()).map((t) => [t.id, t.node, t.usedAtMs])).toEqual([['jt-1', 'x2', clock]]);
        await store.close();
      });

      it('lets exactly one of two joins racing for one id win, for a live id and for a new one', async () => {
        // Regression: on Postgres (READ COMMITTED) both joins read the live
        // node's credential before either wrote, and the UPDATE did not test it,
        // so both won: two machines each held a credential for one node id. A
        // race for a new id failed the loser with a raw unique-key error (a 500).
        // Several rounds, because one round can happen to run in order.
        const store = await Store.open({ location, now });
        const audit = { actor: 'node:race', action: 'node.join', target: 'race', detail: {} };
        const join = (id: string, credentialHash: string, expectCredentialHash: string | null) =>
          store.nodes.upsertOnJoin(
            {
              id,
              hostname: null,
              mgmtAddr: null,
              labels: {},
              credentialHash,
              mgmtNonce: 'n',
              mgmtTokenHash: 'f'.repeat(64),
              approvalIfNew: 'approved',
              expectCredentialHash,
              agentVersion: null,
              protocolVersion: null,
            },
            audit,
          );
        const race = async (id: string, expect_: string | null) => {
          const settled = await Promise.allSettled(['b', 'c'].map((c) => join(id, c.repeat(64), expect_)));
          const won = settled.flatMap((r) => (r.status === 'fulfilled' ? [r.value.credentialHash] : []));
          const lost = settled.flatMap((r) => (r.status === 'rejected' ? [(r.reason as { code?: string }).code] : []));
          expect(won, `${id}: exactly one join wins`).toHaveLength(1);
          expect(lost, `${id}: the other is refused as a race, not a store failure`).toEqual(['LLMGW_NODE_ID_TAKEN']);
          expect((await store.nodes.get(id))?.credentialHash, `${id}: the store holds the winner's credential`).toBe(
            won[0],
          );
        };
        for (let round = 0; round < 8; round++) {
          await join(`race-live-${round}`, 'a'.repeat(64), null);
          await race(`race-live-${round}`, 'a'.repeat(64));
          await race(`race-new-${round}`, null);
        }
        await store.close();
      });

      it('keeps heartbeats apart from node rows: last_seen only forwards, a report only with a newer heartbeat', async () => {
        // Regression (issue #21): last_seen lived in the nodes row, so each heartbeat write rewrote
        // the row and its report and marked it changed: other instances re-read every node each second.
        const store = await Store.open({ location, now });
        const audit = { actor: 'node:hb', action: 'node.join', target: 'hb', detail: {} };
        const join = (id: string) =>
          store.nodes.upsertOnJoin(
            {
              id,
              hostname: null,
              mgmtAddr: null,
              labels: {},
              credentialHash: 'a'.repeat(64),
              mgmtNonce: 'n',
              mgmtTokenHash: 'b'.repeat(64),
              approvalIfNew: 'approved',
              agentVersion: '1',
              protocolVersion: 1,
            },
            audit,
          );
        // Over a thousand, so the upsert spans more than one statement.
        const ids = Array.from({ length: 1205 }, (_, i) => `hb-${String(i).padStart(4, '0')}`);
        for (const id of ids) await join(id);
        clock += 1_000;
        const joinedBy = clock;
        expect((await store.nodes.get('hb-0000'))!.lastSeenMs, 'none yet').toBeNull();

        clock += 1_000;
        await store.nodes.saveHeartbeats(ids.map((id) => ({ id, lastSeenMs: 5_000 })));
        expect((await store.nodes.lastSeenSince(5_000)).length, 'every one saved').toBe(ids.length);
        expect(await store.nodes.list({ changedSinceMs: joinedBy }), 'liveness alone changes no row').toEqual([]);
        await store.nodes.saveHeartbeats([
          { id: 'hb-0001', lastSeenMs: 4_000, report: { hostname: 'older' } },
          {
            id: 'hb-0002',
            lastSeenMs: 6_000,
            report: { hostname: 'newer' },
            versions: { agentVersion: '2', protocolVersion: 1 },
          },
        ]);
        const [one, two] = [(await store.nodes.get('hb-0001'))!, (await store.nodes.get('hb-0002'))!];
        expect([one.lastSeenMs, one.report], 'an older heartbeat moves nothing back').toEqual([5_000, null]);
        expect([two.lastSeenMs, two.report, two.agentVersion]).toEqual([6_000, { hostname: 'newer' }, '2']);
        expect(
          (await store.nodes.list({ changedSinceMs: joinedBy })).map((n) => n.id),
          'a report changes the row',
        ).toEqual(['hb-0002']);
        expect((await store.nodes.lastSeenSince(5_500)).map((r) => [r.id, r.lastSeenMs])).toEqual([['hb-0002', 6_000]]);

        // Every node's first report after a restart: more row writes than one of the flush's transactions takes.
        const firstReports = ids.slice(10, 260);
        // The event loop's turns while they are written: SQLite never yields inside a transaction.
        let turns = 0;
        let counting = true;
        const count = () => {
          turns++;
          if (counting) setImmediate(count);
        };
        setImmediate(count);
        await store.nodes.saveHeartbeats(
          firstReports.map((id) => ({ id, lastSeenMs: 7_000, report: { hostname: id } })),
        );
        counting = false;
        expect(turns, 'the listeners are served between transactions of a hundred writes').toBeGreaterThanOrEqual(2);
        const rewritten = (await store.nodes.list({ changedSinceMs: joinedBy })).filter((n) =>
          firstReports.includes(n.id),
        );
        expect(
          rewritten.map((n) => [n.id, n.report]),
          'every report written, each to its own node',
        ).toEqual(firstReports.map((id) => [id, { hostname: id }]));
        await store.nodes.setApproval(
          'hb-0300',
          { approval: 'approved', approvedHardware: 'by an admin', hardwareChange: null },
          null,
        );
        await store.nodes.saveHeartbeats([
          { id: 'hb-0300', lastSeenMs: 8_000, approvedHardware: 'first gpus' },
          {
            id: 'hb-0301',
            lastSeenMs: 8_000,
            approvedHardware: 'first gpus',
            versions: { agentVersion: null, protocolVersion: 2 },
          },
        ]);
        expect((await store.nodes.get('hb-0300'))!.approvedHardware, "an admin's approval stands").toBe('by an admin');
        const firstGpus = (await store.nodes.get('hb-0301'))!;
        expect(
          [firstGpus.approvedHardware, firstGpus.agentVersion, firstGpus.protocolVersion, firstGpus.report],
          'a row write sets only what it carries',
        ).toEqual(['first gpus', null, 2, null]);

        clock += 1;
        await store.nodes.remove('hb-0003', { actor: 'ops', action: 'node.remove', target: 'hb-0003', detail: {} });
        expect((await join('hb-0003')).lastSeenMs, 'a node joining afresh has not been heard from').toBeNull();
        expect((await join('hb-0004')).lastSeenMs, 'a rejoin keeps its last heartbeat').toBe(5_000);
        await store.close();
      });

      it('keeps the newest shard report per node, several hundred written in one call', async () => {
        const store = await Store.open({ location, now });
        const reports = (atMs: number, instanceId: string, count: number) =>
          Array.from({ length: count }, (_, i) => ({
            nodeId: `sr-${String(i).padStart(4, '0')}`,
            instanceId,
            shards: [{ at: atMs }],
            atMs,
          }));
        await store.shardReports.save(reports(100, 'a', 1200));
        await store.shardReports.save([...reports(50, 'b', 2), ...reports(200, 'b', 3).slice(2)]);
        const fromB = await store.shardReports.since(0, 'a');
        expect(
          fromB.map((r) => [r.nodeId, r.atMs]),
          'an older report does not replace a newer one',
        ).toEqual([['sr-0002', 200]]);
        expect((await store.shardReports.since(0, 'b')).length, 'the rest stay as a wrote them').toBe(1199);
        await store.close();
      });

      it('migrations are idempotent: opening an up-to-date store changes nothing', async () => {
        const a = await Store.open({ location, now });
        const before = await a.models.list();
        await a.close();
        const b = await Store.open({ location, now });
        expect(await b.models.list()).toEqual(before);
        await b.close();
      });
    },
  );
}

describe('store errors', () => {
  it('names the store it cannot reach', async () => {
    await expect(
      Store.open({ location: { kind: 'postgres', url: 'postgres://nobody@127.0.0.1:1/x' } }),
    ).rejects.toMatchObject({
      code: 'LLMGW_STORE_UNAVAILABLE',
      message: expect.stringContaining('cannot reach the store'),
    });
  });

  it('names the SQLite path it cannot open', async () => {
    await expect(Store.open({ location: { kind: 'sqlite', path: '/dev/null/llmgw/nope.db' } })).rejects.toMatchObject({
      message: expect.stringContaining('/dev/null/llmgw/nope.db'),
    });
  });

  it.runIf(POSTGRES_URL === '')('says why the Postgres half was skipped', () => {
    expect(POSTGRES_SKIP_REASON).toContain('LLMGW_TEST_POSTGRES');
  });
});

describe('store migrations', () => {
  it("carries each node's last heartbeat over when it moves out of the nodes row (0015)", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-store-0015-'));
    const path = join(dir, 'llmgw.db');
    const old = new Kysely<unknown>({ dialect: new SqliteDialect({ database: new BetterSqlite3(path) }) });
    const migrated = await new Migrator({ db: old, provider: new StaticMigrationProvider('sqlite') }).migrateTo(
      '0014_responses',
    );
    expect(migrated.error).toBeUndefined();
    await sql`insert into nodes (id, labels, admin_state, credential_hash, joined_at, updated_at, last_seen) values ('heard', '{}', 'ready', 'h', 1, 1, 7000)`.execute(
      old,
    );
    await sql`insert into nodes (id, labels, admin_state, credential_hash, joined_at, updated_at, last_seen) values ('quiet', '{}', 'ready', 'h', 1, 1, null)`.execute(
      old,
    );
    await old.destroy();
    const store = await Store.open({ location: { kind: 'sqlite', path } });
    expect((await store.nodes.list()).map((n) => [n.id, n.lastSeenMs])).toEqual([
      ['heard', 7000],
      ['quiet', null],
    ]);
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('keeps the responses and their items when they move to a (key, id) primary key (0016)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-store-0016-'));
    const path = join(dir, 'llmgw.db');
    const old = new Kysely<unknown>({ dialect: new SqliteDialect({ database: new BetterSqlite3(path) }) });
    const migrated = await new Migrator({ db: old, provider: new StaticMigrationProvider('sqlite') }).migrateTo(
      '0015_node_last_seen',
    );
    expect(migrated.error).toBeUndefined();
    await sql`insert into responses (id, key_id, model, created_at_ms, expires_at_ms, bytes, body) values ('resp_old', 'k1', 'm', 1, 9000000000000, 2, '{}')`.execute(
      old,
    );
    await sql`insert into response_items (key_id, item_id, response_id) values ('k1', 'msg_old', 'resp_old')`.execute(
      old,
    );
    await old.destroy();
    const store = await Store.open({ location: { kind: 'sqlite', path } });
    expect(await store.responses.get('k1', 'resp_old', 1000)).toMatchObject({
      id: 'resp_old',
      keyId: 'k1',
      engineId: null,
      body: '{}',
    });
    expect(await store.responses.findByItems('k1', ['msg_old'], 1000)).toEqual([{ itemId: 'msg_old', body: '{}' }]);
    // The same id under another key is a row of its own now.
    await store.responses.put(
      {
        id: 'resp_old',
        keyId: 'k2',
        engineId: null,
        model: 'm',
        createdAtMs: 2,
        expiresAtMs: 9_000_000_000_000,
        bytes: 2,
        body: '[]',
      },
      [],
    );
    expect((await store.responses.get('k1', 'resp_old', 1000))?.body, "k1's row is unchanged").toBe('{}');
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('leaves the responses table as it was when 0016 fails part way on SQLite', async () => {
    // Kysely's migrator runs SQLite migrations outside a transaction: a failure (or a crash) after 0016 dropped
    // the old table and before its copy was in place left a store that no start could migrate again.
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-store-0016-fail-'));
    const path = join(dir, 'llmgw.db');
    const old = new Kysely<unknown>({ dialect: new SqliteDialect({ database: new BetterSqlite3(path) }) });
    expect(
      (
        await new Migrator({ db: old, provider: new StaticMigrationProvider('sqlite') }).migrateTo(
          '0015_node_last_seen',
        )
      ).error,
    ).toBeUndefined();
    await sql`insert into responses (id, key_id, model, created_at_ms, expires_at_ms, bytes, body) values ('resp_old', 'k1', 'm', 1, 9000000000000, 2, '{}')`.execute(
      old,
    );
    // An index of that name elsewhere makes 0016 fail after the drop and the rename.
    await sql`create index responses_engine_id on response_items (item_id)`.execute(old);
    const failed = await new Migrator({ db: old, provider: new StaticMigrationProvider('sqlite') }).migrateToLatest();
    expect(failed.error, 'the migration failed').toBeDefined();
    const tables = await sql<{
      name: string;
    }>`select name from sqlite_master where type = 'table' and name like 'responses%'`.execute(old);
    expect(
      tables.rows.map((r) => r.name),
      'the old table is back, and no copy is left',
    ).toEqual(['responses']);
    const rows = await sql<{ id: string }>`select id from responses`.execute(old);
    expect(rows.rows, 'with its row').toEqual([{ id: 'resp_old' }]);
    const columns = await sql<{ name: string }>`select name from pragma_table_info('responses')`.execute(old);
    expect(
      columns.rows.map((c) => c.name),
      'and its old columns: no step of 0016 stayed',
    ).not.toContain('engine_id');
    await sql`drop index responses_engine_id`.execute(old);
    expect(
      (await new Migrator({ db: old, provider: new StaticMigrationProvider('sqlite') }).migrateToLatest()).error,
      'and it migrates once the obstacle is gone',
    ).toBeUndefined();
    await old.destroy();
    rmSync(dir, { recursive: true, force: true });
  });
});
