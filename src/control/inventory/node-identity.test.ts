// A node id is bound to its credential: who may take it again, and what the
// store keeps of the node's secrets (hashes and nonces, never a token).
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { Kysely, Migrator, SqliteDialect, sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { Store } from '../store/index.js';
import { StaticMigrationProvider } from '../store/migrations.js';
import { Inventory, type NodeEventListener } from './inventory.js';
import { deriveMgmtToken, hardwareFingerprint, matchesHash, mgmtKey, sha256Hex } from './node-secrets.js';

const joinInput = (id: string, mgmtAddr: string | null = null) => ({
  id,
  hostname: id,
  mgmtAddr,
  labels: {},
  agentVersion: '1.0.0',
  protocolVersion: 1,
});
const JOIN = 'fleet-join-token-0123456789';
const gpus = (n: number, cls = 'h100-80gb') => ({
  gpus: Array.from({ length: n }, (_, index) => ({ index, class: cls, problems: [] })),
});

async function sqlite() {
  const dir = mkdtempSync(join(tmpdir(), 'llmgw-identity-'));
  const path = join(dir, 'db');
  return { path, store: await Store.open({ location: { kind: 'sqlite', path } }) };
}

describe('node identity', () => {
  it('refuses a join under a live id without proof, and leaves the live node as it was', async () => {
    let now = 1_000_000;
    const inv = await Inventory.create({
      store: null,
      now: () => now,
      staleAfterMs: 15_000,
      lostAfterMs: 60_000,
      joinToken: JOIN,
    });
    const first = await inv.join(joinInput('n1', '10.0.0.1:9000'));
    inv.heartbeat(inv.get('n1')!, {});
    await expect(inv.join(joinInput('n1', '10.6.6.6:9000'))).rejects.toMatchObject({ code: 'LLMGW_NODE_ID_TAKEN' });
    await expect(inv.join(joinInput('n1', '10.6.6.6:9000')), 'the message names the three ways out').rejects.toThrow(
      /join-token create --node n1.*nodes rm n1.*node_lost_after/,
    );
    expect(inv.authenticate('n1', first.credential), 'the real node keeps its credential').not.toBeNull();
    expect(inv.get('n1')!.mgmtAddr).toBe('10.0.0.1:9000');
    now += 20_000;
    expect(inv.liveness(inv.get('n1')!)).toBe('stale');
    await expect(inv.join(joinInput('n1')), 'stale is still live').rejects.toMatchObject({
      code: 'LLMGW_NODE_ID_TAKEN',
    });
    now += 60_000;
    expect(inv.liveness(inv.get('n1')!)).toBe('lost');
    const taken = await inv.join(joinInput('n1', '10.0.0.2:9000'));
    expect(inv.authenticate('n1', taken.credential), 'a lost node frees its id').not.toBeNull();
    expect(inv.authenticate('n1', first.credential)).toBeNull();
  });

  it('gives the id back to a join that proves the credential, or to a per-node token, and to anyone after removal', async () => {
    const inv = await Inventory.create({
      store: null,
      now: () => 0,
      staleAfterMs: 15_000,
      lostAfterMs: 60_000,
      joinToken: JOIN,
    });
    const first = await inv.join(joinInput('n1'));
    await expect(inv.join(joinInput('n1'), { previousCredential: 'not-it', nodeToken: false })).rejects.toMatchObject({
      code: 'LLMGW_NODE_ID_TAKEN',
    });
    const second = await inv.join(joinInput('n1'), { previousCredential: first.credential, nodeToken: false });
    expect(inv.authenticate('n1', second.credential)).not.toBeNull();
    const third = await inv.join(joinInput('n1'), { previousCredential: null, nodeToken: true });
    expect(inv.authenticate('n1', third.credential)).not.toBeNull();
    expect(inv.authenticate('n1', second.credential)).toBeNull();
    await inv.remove('n1', 'ops');
    expect(inv.get('n1')).toBeUndefined();
    await inv.join(joinInput('n1'));
    expect(inv.get('n1')).toBeDefined();
  });

  it('lets only one of two joins racing for a new id win, with or without a store', async () => {
    for (const store of [null, (await sqlite()).store]) {
      const inv = await Inventory.create({
        store,
        now: () => 0,
        staleAfterMs: 15_000,
        lostAfterMs: 60_000,
        joinToken: JOIN,
      });
      const results = await Promise.allSettled([inv.join(joinInput('race')), inv.join(joinInput('race'))]);
      const won = results.filter(
        (r): r is PromiseFulfilledResult<{ credential: string; mgmtToken: string }> => r.status === 'fulfilled',
      );
      expect(won, store ? 'sqlite' : 'memory').toHaveLength(1);
      expect(results.find((r) => r.status === 'rejected')).toMatchObject({ reason: { code: 'LLMGW_NODE_ID_TAKEN' } });
      expect(inv.authenticate('race', won[0]!.value.credential), 'the winner holds the id').not.toBeNull();
      await inv.close();
      await store?.close();
    }
  });

  it('counts a node that joined through another control plane as live from its join, not from when this one started', async () => {
    // Regression: an instance that loaded the row of a node joined elsewhere
    // knew no join time, only when it had itself started; once it had been up
    // longer than node_lost_after, a node that had just joined and not yet
    // sent a heartbeat counted as lost, and any join-token holder took its id.
    let now = 1_000_000;
    const clock = () => now;
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-identity-'));
    const store = await Store.open({ location: { kind: 'sqlite', path: join(dir, 'db') }, now: clock });
    const options = {
      store,
      now: clock,
      staleAfterMs: 15_000,
      lostAfterMs: 60_000,
      joinToken: JOIN,
      flushIntervalMs: 0,
    };
    const b = await Inventory.create(options);
    now += 10 * 60_000;
    const a = await Inventory.create(options);
    const real = await a.join(joinInput('n1', '10.0.0.1:9000'));
    now += 1_000;
    await expect(b.join(joinInput('n1', '10.6.6.6:9000')), 'joined 1 s ago through a').rejects.toMatchObject({
      code: 'LLMGW_NODE_ID_TAKEN',
    });
    expect(b.liveness(b.get('n1')!), 'no heartbeat yet, but joined within node_lost_after').toBe('stale');
    expect(a.authenticate('n1', real.credential), 'the real node keeps its credential').not.toBeNull();
    expect(b.authenticate('n1', real.credential), 'b holds the same credential').not.toBeNull();

    // Silent past node_lost_after, the id is free; whoever takes it (through a) is live from that join on b too.
    now += 60_000;
    const taker = await a.join(joinInput('n1', '10.0.0.2:9000'));
    now += 1_000;
    await expect(b.join(joinInput('n1', '10.6.6.6:9000')), 'taken again 1 s ago through a').rejects.toMatchObject({
      code: 'LLMGW_NODE_ID_TAKEN',
    });
    expect((await store.nodes.get('n1'))?.credentialHash, "the store still holds the taker's credential").toBe(
      a.get('n1')?.credentialHash,
    );
    expect(a.authenticate('n1', taker.credential)).not.toBeNull();
    expect(
      a.authenticate('n1', real.credential),
      'a credential proven before is worthless once the id is taken',
    ).toBeNull();
    expect(b.authenticate('n1', real.credential), 'on the other instance too').toBeNull();
    await a.close();
    await b.close();
    await store.close();
  });

  it('uses a per-node join token once, for its node only, until it expires', async () => {
    let now = 0;
    for (const store of [null, (await sqlite()).store]) {
      const inv = await Inventory.create({
        store,
        now: () => now,
        staleAfterMs: 15_000,
        lostAfterMs: 60_000,
        joinToken: JOIN,
      });
      const { token, row } = await inv.createJoinToken('gpu-7', now + 60_000, 'ops');
      expect(token.startsWith('llmgw-njt-')).toBe(true);
      expect(await inv.consumeJoinToken(token, 'gpu-8'), 'another node id').toBe(false);
      expect(await inv.consumeJoinToken(token, 'gpu-7')).toBe(true);
      expect(await inv.consumeJoinToken(token, 'gpu-7'), 'single use').toBe(false);
      expect((await inv.listJoinTokens()).map((t) => [t.id, t.usedAtMs !== null])).toEqual([[row.id, true]]);
      const late = await inv.createJoinToken('gpu-7', now + 1_000, 'ops');
      now += 1_000;
      expect(await inv.consumeJoinToken(late.token, 'gpu-7'), 'expired').toBe(false);
      await inv.close();
      await store?.close();
    }
  });

  it('stores the management token only as a nonce and a hash, and derives it again after a restart', async () => {
    const { path, store } = await sqlite();
    const inv = await Inventory.create({
      store,
      now: () => 0,
      staleAfterMs: 15_000,
      lostAfterMs: 60_000,
      joinToken: JOIN,
      flushIntervalMs: 0,
    });
    const { mgmtToken, credential } = await inv.join(joinInput('n1'));
    await inv.close();
    const row = (await store.nodes.get('n1'))!;
    expect(row.mgmtNonce).not.toBeNull();
    expect(matchesHash(mgmtToken, row.mgmtTokenHash)).toBe(true);
    expect(deriveMgmtToken(mgmtKey(JOIN), 'n1', row.mgmtNonce!)).toBe(mgmtToken);
    const again = await Inventory.create({
      store,
      now: () => 1,
      staleAfterMs: 15_000,
      lostAfterMs: 60_000,
      joinToken: JOIN,
    });
    expect(again.get('n1')!.mgmtToken, 'the same fleet derives the same token').toBe(mgmtToken);
    await again.close();
    await store.close();
    const bytes =
      readFileSync(path).toString('latin1') + readFileSync(`${path}-wal`, { flag: 'a+' }).toString('latin1');
    expect(bytes.includes(mgmtToken), 'no plaintext management token in the file').toBe(false);
    expect(bytes.includes(credential), 'no plaintext credential in the file').toBe(false);
  });

  it('issues a new management token in the heartbeat answer when the join token was rotated', async () => {
    const { store } = await sqlite();
    const inv = await Inventory.create({
      store,
      now: () => 0,
      staleAfterMs: 15_000,
      lostAfterMs: 60_000,
      joinToken: JOIN,
      flushIntervalMs: 0,
    });
    const { mgmtToken } = await inv.join(joinInput('n1'));
    expect(inv.heartbeat(inv.get('n1')!, {}).mgmtToken, 'unchanged while the key is').toBe(mgmtToken);
    await inv.close();
    const rotated = await Inventory.create({
      store,
      now: () => 1,
      staleAfterMs: 15_000,
      lostAfterMs: 60_000,
      joinToken: 'another-join-token-0123456789',
      flushIntervalMs: 0,
    });
    expect(rotated.get('n1')!.mgmtToken, 'no longer derivable: unknown until re-issued').toBe('');
    const issued = rotated.heartbeat(rotated.get('n1')!, {}).mgmtToken;
    expect(issued).not.toBe(mgmtToken);
    expect(issued.length).toBeGreaterThan(20);
    await rotated.close();
    await new Promise((r) => setImmediate(r));
    const row = (await store.nodes.get('n1'))!;
    expect(row.mgmtTokenHash).toBe(sha256Hex(issued));
    await store.close();
  });

  it('migrates a stored plaintext management token to its hash, and issues a derived one at the next heartbeat', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-identity-migrate-'));
    const path = join(dir, 'db');
    const old = new Kysely<unknown>({ dialect: new SqliteDialect({ database: new BetterSqlite3(path) }) });
    const migrated = await new Migrator({
      db: old,
      provider: new StaticMigrationProvider('sqlite'),
      allowUnorderedMigrations: true,
    }).migrateTo('0009_dashboard_sessions');
    expect(migrated.error).toBeUndefined();
    const plaintext = 'plaintext-mgmt-token-from-an-older-llmgw';
    await sql`insert into nodes (id, labels, admin_state, credential_hash, mgmt_token, joined_at, updated_at) values ('old', '{}', 'cordoned', ${sha256Hex('cred')}, ${plaintext}, 1, 1)`.execute(
      old,
    );
    await old.destroy();

    const store = await Store.open({ location: { kind: 'sqlite', path } });
    const row = (await store.nodes.get('old'))!;
    expect([row.mgmtNonce, row.mgmtTokenHash, row.approval, row.adminState]).toEqual([
      null,
      sha256Hex(plaintext),
      'approved',
      'cordoned',
    ]);
    const inv = await Inventory.create({
      store,
      now: () => 0,
      staleAfterMs: 15_000,
      lostAfterMs: 60_000,
      joinToken: JOIN,
      flushIntervalMs: 0,
    });
    expect(inv.authenticate('old', 'cred'), 'the credential still works').not.toBeNull();
    const issued = inv.heartbeat(inv.get('old')!, {}).mgmtToken;
    expect(issued).not.toBe(plaintext);
    await inv.close();
    await new Promise((r) => setImmediate(r));
    expect((await store.nodes.get('old'))!.mgmtTokenHash).toBe(sha256Hex(issued));
    await store.close();
    const bytes =
      readFileSync(path).toString('latin1') + readFileSync(`${path}-wal`, { flag: 'a+' }).toString('latin1');
    expect(bytes.includes(issued)).toBe(false);
    expect(bytes.includes(plaintext), 'the old plaintext is not left in freed pages either').toBe(false);
  });

  it('holds new nodes as pending with manual approval, until approved', async () => {
    const inv = await Inventory.create({
      store: null,
      now: () => 0,
      staleAfterMs: 15_000,
      lostAfterMs: 60_000,
      joinToken: JOIN,
      joinApproval: 'manual',
    });
    await inv.join(joinInput('n1'));
    expect(inv.get('n1')!.approval).toBe('pending');
    inv.heartbeat(inv.get('n1')!, { report: gpus(2) });
    await inv.approve('n1', 'ops');
    expect(inv.get('n1')!.approval).toBe('approved');
    expect(inv.get('n1')!.approvedHardware).toBe('2 gpus: h100-80gb, h100-80gb');
  });

  it("saves the GPUs of a node's first report with its heartbeat, never over an approval already stored", async () => {
    const { store } = await sqlite();
    const inv = await Inventory.create({
      store,
      now: () => 0,
      staleAfterMs: 15_000,
      lostAfterMs: 60_000,
      joinToken: JOIN,
    });
    await inv.join(joinInput('n1'));
    await inv.join(joinInput('n2'));
    // Another instance's admin approved n2 with other hardware meanwhile: that stands.
    await store.nodes.setApproval(
      'n2',
      { approval: 'approved', approvedHardware: '1 gpu: a100-40gb', hardwareChange: null },
      null,
    );
    inv.heartbeat(inv.get('n1')!, { report: gpus(2) });
    inv.heartbeat(inv.get('n2')!, { report: gpus(2) });
    await inv.flush();
    expect((await store.nodes.get('n1'))!.approvedHardware).toBe('2 gpus: h100-80gb, h100-80gb');
    expect((await store.nodes.get('n2'))!.approvedHardware).toBe('1 gpu: a100-40gb');
    await inv.close();
    await store.close();
  });

  it('flags a GPU change, and with manual approval holds the node out until approved again', async () => {
    for (const joinApproval of ['auto', 'manual'] as const) {
      const inv = await Inventory.create({
        store: null,
        now: () => 0,
        staleAfterMs: 15_000,
        lostAfterMs: 60_000,
        joinToken: JOIN,
        joinApproval,
      });
      const events: Parameters<NodeEventListener>[0][] = [];
      inv.onNodeEvent((e) => events.push(e));
      await inv.join(joinInput('n1'));
      if (joinApproval === 'manual') await inv.approve('n1', 'ops');
      const node = inv.get('n1')!;
      inv.heartbeat(node, { report: gpus(8) });
      expect(node.hardwareChange).toBeNull();
      inv.heartbeat(node, { report: { gpus: [], gpu_probe_error: 'nvidia-smi could not be started' } });
      expect(node.hardwareChange, 'a failed GPU probe is not a hardware change').toBeNull();
      inv.heartbeat(node, { report: gpus(8, 'a100-40gb') });
      expect(node.hardwareChange).toBe(
        'GPUs changed from 8 gpus: h100-80gb, h100-80gb, h100-80gb, h100-80gb, h100-80gb, h100-80gb, h100-80gb, h100-80gb to 8 gpus: a100-40gb, a100-40gb, a100-40gb, a100-40gb, a100-40gb, a100-40gb, a100-40gb, a100-40gb',
      );
      expect(node.approval, joinApproval).toBe(joinApproval === 'manual' ? 'pending' : 'approved');
      expect(events.filter((e) => e.kind === 'node_hardware_changed')).toHaveLength(1);
      inv.heartbeat(node, { report: gpus(8, 'a100-40gb') });
      expect(
        events.filter((e) => e.kind === 'node_hardware_changed'),
        'flagged once, not at every heartbeat',
      ).toHaveLength(1);
      await inv.approve('n1', 'ops');
      expect([node.approval, node.hardwareChange]).toEqual(['approved', null]);
    }
  });

  it('fingerprints GPUs by count and class; unknown stays unknown', () => {
    expect(hardwareFingerprint(undefined)).toBeNull();
    expect(hardwareFingerprint([])).toBe('0 gpus');
    expect(hardwareFingerprint([{ class: 'b' }, { class: 'a' }])).toBe('2 gpus: a, b');
  });
});
