import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { AssignmentBoard } from '../agentapi/assignments.js';
import { Store } from '../store/index.js';
import { Inventory, localDisk } from './inventory.js';

const joinInput = (id: string) => ({
  id,
  hostname: id,
  mgmtAddr: null,
  labels: {},
  agentVersion: '1.0.0',
  protocolVersion: 1,
});

describe('inventory', () => {
  it('derives liveness from the last heartbeat: up, stale past the stale TTL, lost past the lost TTL', async () => {
    let now = 1_000_000;
    const inv = await Inventory.create({ store: null, now: () => now, staleAfterMs: 15_000, lostAfterMs: 60_000 });
    await inv.join(joinInput('n1'));
    const node = inv.get('n1')!;
    expect(inv.liveness(node), 'a node that has not reported yet is not up, nor lost').toBe('stale');
    now += 60_000;
    expect(inv.liveness(node), 'a node silent for the lost window after joining').toBe('lost');
    inv.heartbeat(node, {});
    expect(inv.liveness(node)).toBe('up');
    now += 14_999;
    expect(inv.liveness(node)).toBe('up');
    now += 1;
    expect(inv.liveness(node)).toBe('stale');
    now += 45_000;
    expect(inv.liveness(node)).toBe('lost');
  });

  it('counts silence afresh from a takeover: what reached only another instance may not be in the store yet', async () => {
    let now = 1_000_000;
    const inv = await Inventory.create({ store: null, now: () => now, staleAfterMs: 15_000, lostAfterMs: 60_000 });
    await inv.join(joinInput('n1'));
    const node = inv.get('n1')!;
    inv.heartbeat(node, {});
    now += 61_000;
    expect(inv.liveness(node)).toBe('lost');
    inv.restartSilenceClock();
    expect(inv.liveness(node), 'given the whole window from the takeover').toBe('stale');
    now += 60_000;
    expect(inv.liveness(node)).toBe('lost');
  });

  it('lists nodes by id, kept between calls and made again after a join, a rejoin or a removal', async () => {
    const inv = await Inventory.create({ store: null, now: () => 0, staleAfterMs: 10, lostAfterMs: 20 });
    for (const id of ['c', 'a', 'b']) await inv.join(joinInput(id));
    const first = inv.list();
    expect(first.map((n) => n.id)).toEqual(['a', 'b', 'c']);
    expect(inv.list(), 'the same list while nothing joined or left').toBe(first);
    await inv.remove('b', 'ops');
    expect(inv.list().map((n) => n.id)).toEqual(['a', 'c']);
    const before = inv.get('a');
    await inv.join(joinInput('a'), { previousCredential: null, nodeToken: true });
    expect(inv.get('a'), 'a rejoin replaces the node').not.toBe(before);
    expect(inv.list()[0], 'and the list holds the new one').toBe(inv.get('a'));
  });

  it('authenticates a credential only for its own node', async () => {
    const inv = await Inventory.create({ store: null, now: () => 0, staleAfterMs: 1, lostAfterMs: 2 });
    const a = await inv.join(joinInput('a'));
    const b = await inv.join(joinInput('b'));
    expect(inv.authenticate('a', a.credential)?.id).toBe('a');
    expect(inv.authenticate('a', b.credential)).toBeNull();
    expect(inv.authenticate('ghost', a.credential)).toBeNull();
    const forged = `${a.credential.slice(0, -1)}${a.credential.endsWith('A') ? 'B' : 'A'}`;
    expect(
      inv.authenticate('a', forged),
      'once a credential is proven, one that differs in its last character is still refused',
    ).toBeNull();
    expect(inv.authenticate('a', a.credential)?.id).toBe('a');
    expect(inv.get('a')!.credentialHash, 'only the hash is kept').not.toContain(a.credential);
  });

  it('keeps the previous report when a new one does not validate, and says so', async () => {
    const inv = await Inventory.create({ store: null, now: () => 0, staleAfterMs: 10, lostAfterMs: 20 });
    await inv.join(joinInput('n'));
    const node = inv.get('n')!;
    inv.heartbeat(node, { report: { hostname: 'n', cpu_count: 8 } });
    const { reportProblem } = inv.heartbeat(node, { report: { cpu_count: 'eight' } });
    expect(reportProblem).toContain('the previous one is kept');
    expect(node.report?.cpu_count).toBe(8);
  });

  it('counts only local filesystems as disk, and unknown as unknown', async () => {
    const inv = await Inventory.create({ store: null, now: () => 0, staleAfterMs: 10, lostAfterMs: 20 });
    await inv.join(joinInput('n'));
    const node = inv.get('n')!;
    expect(localDisk(node), 'no report: unknown, not zero').toBeNull();
    inv.heartbeat(node, {
      report: {
        disks: [
          { mount_point: '/data', shared: false, free_bytes: 100, total_bytes: 1000 },
          { mount_point: '/nvme', shared: false, free_bytes: 50, total_bytes: 500 },
          { mount_point: '/models', shared: true, free_bytes: 1e15, total_bytes: 2e15 },
        ],
      },
    });
    expect(localDisk(node)).toEqual({ freeBytes: 150, totalBytes: 1500 });
  });

  it('persists admin state and reports through the store, and a rejoin keeps the cordon', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-inv-'));
    const store = await Store.open({ location: { kind: 'sqlite', path: join(dir, 'db') } });
    const inv = await Inventory.create({
      store,
      now: () => 5_000,
      staleAfterMs: 10_000,
      lostAfterMs: 20_000,
      flushIntervalMs: 0,
    });
    const first = await inv.join(joinInput('n'));
    inv.heartbeat(inv.get('n')!, { report: { hostname: 'n', memory_total_bytes: 2 ** 36 } });
    await inv.setState('n', 'cordoned', 'ops');
    // The node is up: only a join proving its credential may take the id again.
    await inv.join(joinInput('n'), { previousCredential: first.credential, nodeToken: false });
    await inv.close();

    const again = await Inventory.create({ store, now: () => 6_000, staleAfterMs: 10_000, lostAfterMs: 20_000 });
    const node = again.get('n')!;
    expect(node.adminState, 'an agent restarting must not uncordon its node').toBe('cordoned');
    expect(node.lastSeenMs).toBe(5_000);
    expect(node.report?.memory_total_bytes).toBe(2 ** 36);
    expect(again.liveness(node)).toBe('up');
    const audit = await store.audit.list({ target: 'n' });
    expect(audit.map((a) => a.action)).toEqual(['node.rejoin', 'node.state', 'node.join']);
    await again.close();
    await store.close();
  });

  it('tells listeners when capacity changes, not on every heartbeat', async () => {
    const inv = await Inventory.create({ store: null, now: () => 0, staleAfterMs: 10, lostAfterMs: 20 });
    const seen: string[] = [];
    inv.onChange((id, why) => seen.push(`${id}: ${why}`));
    await inv.join(joinInput('n'));
    const node = inv.get('n')!;
    const report = { gpus: [{ index: 0, class: 'h100-80gb', problems: [] }] };
    inv.heartbeat(node, { report });
    inv.heartbeat(node, { report });
    inv.heartbeat(node, {
      report: { gpus: [{ index: 0, class: 'h100-80gb', problems: ['12 uncorrectable ECC errors'] }] },
    });
    expect(seen).toEqual(['n: joined', 'n: first heartbeat', 'n: capacity changed']);
  });
});

describe('assignment board long-poll', () => {
  it('holds a heartbeat until the generation moves, then answers at once', async () => {
    const board = new AssignmentBoard(100);
    const { generation } = board.get('n');
    let answered = false;
    const waiting = board.waitForChange('n', generation, 60_000).then(() => {
      answered = true;
    });
    await Promise.resolve();
    expect(answered).toBe(false);
    board.bump('n');
    await waiting;
    expect(answered).toBe(true);
    expect(board.get('n').generation).toBe(101);
  });

  it('does not wake anyone when the same assignments are set again', () => {
    const board = new AssignmentBoard(1);
    board.set('n', []);
    expect(board.get('n').generation).toBe(1);
  });
});
