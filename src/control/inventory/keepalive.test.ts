// Keep-alive heartbeats: a heartbeat that names the report's hash instead of
// sending it. The cost they guard against: at 10,000 nodes, parsing and
// validating a 3 KB report on every heartbeat took half a core, and writing
// every heartbeat's last_seen was 2,000 row updates a second.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { Store } from '../store/index.js';
import { Inventory } from './inventory.js';

const joinInput = (id: string) => ({
  id,
  hostname: id,
  mgmtAddr: null,
  labels: {},
  agentVersion: '1.0.0',
  protocolVersion: 1,
});
const gpus = (n: number, problems: string[] = []) => ({
  gpus: Array.from({ length: n }, (_, index) => ({ index, class: 'h100-80gb', problems })),
  engines: [{ name: 'vllm' }],
});

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

async function sqlite(): Promise<Store> {
  const dir = mkdtempSync(join(tmpdir(), 'llmgw-keepalive-'));
  dirs.push(dir);
  return Store.open({ location: { kind: 'sqlite', path: join(dir, 'db') } });
}

describe('keep-alive heartbeats', () => {
  it('apply liveness alone while the hash is the one held, and ask for the report when it is not', async () => {
    let now = 1_000_000;
    const inv = await Inventory.create({ store: null, now: () => now, staleAfterMs: 15_000, lostAfterMs: 60_000 });
    await inv.join(joinInput('n1'));
    const node = inv.get('n1')!;
    expect(
      inv.heartbeat(node, { report: gpus(8), reportHash: 'h1' }).sendReport,
      'a full report is taken as it is',
    ).toBe(false);
    const held = node.report;
    now += 14_000;
    expect(inv.heartbeat(node, { reportHash: 'h1' }).sendReport, 'the hash held: nothing to send').toBe(false);
    expect(node.report, 'a keep-alive leaves the report held as it was').toBe(held);
    now += 14_000;
    expect(inv.liveness(node), 'a keep-alive keeps the node up').toBe('up');

    const asked = inv.heartbeat(node, { reportHash: 'h2' });
    expect(asked.sendReport, 'a hash not held means the report changed: ask for it').toBe(true);
    expect(node.report?.gpus, 'until it comes, the report held stands').toHaveLength(8);
    inv.heartbeat(node, { report: gpus(7), reportHash: 'h2' });
    expect(node.report?.gpus, 'the changed report is applied').toHaveLength(7);
    expect(inv.heartbeat(node, { reportHash: 'h2' }).sendReport).toBe(false);
    expect(inv.counts.reports).toEqual({ full: 2, keepalive: 3 });
    expect(inv.counts.reportsAsked).toBe(1);
  });

  it('asks again when the report sent under a hash did not validate', async () => {
    const inv = await Inventory.create({ store: null, now: () => 0, staleAfterMs: 10, lostAfterMs: 20 });
    await inv.join(joinInput('n'));
    const node = inv.get('n')!;
    const sent = inv.heartbeat(node, { report: { cpu_count: 'eight' }, reportHash: 'bad' });
    expect(sent.reportProblem).toContain('did not validate');
    expect(
      inv.heartbeat(node, { reportHash: 'bad' }).sendReport,
      'a report that was refused is not held under its hash',
    ).toBe(true);
  });

  it("still takes an older agent's full report on every heartbeat, without a hash", async () => {
    const inv = await Inventory.create({ store: null, now: () => 0, staleAfterMs: 10, lostAfterMs: 20 });
    await inv.join(joinInput('old'));
    const node = inv.get('old')!;
    expect(inv.heartbeat(node, { report: gpus(2) }).sendReport).toBe(false);
    expect(inv.heartbeat(node, { report: gpus(1) }).sendReport).toBe(false);
    expect(node.report?.gpus, 'each full report replaces the last').toHaveLength(1);
    expect(inv.heartbeat(node, {}).sendReport, 'a heartbeat with neither report nor hash asks for nothing').toBe(false);
  });

  it('asks for the report after a restart: the hash is not kept in the store', async () => {
    const store = await sqlite();
    try {
      const before = await Inventory.create({
        store,
        now: () => 1_000,
        staleAfterMs: 15_000,
        lostAfterMs: 60_000,
        flushIntervalMs: 0,
      });
      await before.join(joinInput('n1'));
      before.heartbeat(before.get('n1')!, { report: gpus(4), reportHash: 'h1' });
      await before.close();
      const after = await Inventory.create({
        store,
        now: () => 2_000,
        staleAfterMs: 15_000,
        lostAfterMs: 60_000,
        flushIntervalMs: 0,
      });
      const node = after.get('n1')!;
      expect(node.report?.gpus, 'the stored report is loaded').toHaveLength(4);
      expect(
        after.heartbeat(node, { reportHash: 'h1' }).sendReport,
        'a restarted control plane cannot vouch for the hash',
      ).toBe(true);
      await after.close();
    } finally {
      await store.close();
    }
  });

  it('writes last_seen at most once per lastSeenWriteMs, and a changed report at once', async () => {
    const store = await sqlite();
    let now = 1_000_000;
    try {
      const inv = await Inventory.create({
        store,
        now: () => now,
        staleAfterMs: 15_000,
        lostAfterMs: 60_000,
        flushIntervalMs: 0,
        lastSeenWriteMs: 7_000,
      });
      await inv.join(joinInput('n1'));
      const node = inv.get('n1')!;
      const stored = async () => {
        await inv.flush();
        return (await store.nodes.get('n1'))!;
      };
      inv.heartbeat(node, { report: gpus(8), reportHash: 'h1' });
      expect((await stored()).lastSeenMs, 'the first heartbeat is written').toBe(1_000_000);
      now += 5_000;
      inv.heartbeat(node, { reportHash: 'h1' });
      expect((await stored()).lastSeenMs, 'within lastSeenWriteMs: kept in memory only').toBe(1_000_000);
      expect(node.lastSeenMs, 'liveness here is not held back by the store').toBe(1_005_000);
      now += 5_000;
      inv.heartbeat(node, { reportHash: 'h1' });
      expect((await stored()).lastSeenMs, 'past lastSeenWriteMs: written').toBe(1_010_000);
      now += 1_000;
      inv.heartbeat(node, { report: gpus(8, ['uncorrected ECC errors']), reportHash: 'h2' });
      const row = await stored();
      expect(row.lastSeenMs, 'a changed report is written at once, with its heartbeat').toBe(1_011_000);
      expect(JSON.stringify(row.report)).toContain('uncorrected ECC errors');
      expect(inv.counts.storeNodeWrites, 'three writes for four heartbeats').toBe(3);
      await inv.close();
    } finally {
      await store.close();
    }
  });

  it('lets another instance follow liveness from last_seen alone, and re-read a node only when its row changed', async () => {
    // Regression (issue #21): with last_seen in the nodes row, every instance re-read every node,
    // report and all, each second; liveness now comes from a narrow table, rows only when they changed.
    let now = 1_000_000;
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-keepalive-'));
    dirs.push(dir);
    const store = await Store.open({ location: { kind: 'sqlite', path: join(dir, 'db') }, now: () => now });
    const options = {
      store,
      now: () => now,
      staleAfterMs: 15_000,
      lostAfterMs: 60_000,
      flushIntervalMs: 0,
      lastSeenWriteMs: 0,
    };
    const a = await Inventory.create(options);
    const b = await Inventory.create(options);
    await a.join(joinInput('n1'));
    a.heartbeat(a.get('n1')!, { report: gpus(8), reportHash: 'h1' });
    await a.flush();
    await b.refresh();
    expect(b.get('n1')?.report?.gpus, 'the first read takes the whole row').toHaveLength(8);

    const changes: string[] = [];
    b.onChange((id, why) => changes.push(`${id}: ${why}`));
    const rowsRead = vi.spyOn(store.nodes, 'rowsById');
    const readIds = () => rowsRead.mock.calls.flatMap(([ids]) => ids);
    now += 30_000;
    await b.refresh();
    expect(b.liveness(b.get('n1')!), 'silent for 30 s').toBe('stale');
    a.heartbeat(a.get('n1')!, { reportHash: 'h1' });
    await a.flush();
    await b.refresh();
    expect(b.liveness(b.get('n1')!), 'a keep-alive through a is seen on b').toBe('up');
    expect(changes, 'and its return told').toEqual(['n1: back (stale)']);
    expect(readIds(), 'without reading the row again').toEqual([]);

    now += 1_000;
    a.heartbeat(a.get('n1')!, { report: gpus(8, ['xid 79']), reportHash: 'h2' });
    await a.flush();
    await b.refresh({ liveness: false });
    expect(b.get('n1')?.report?.gpus?.[0]?.problems, 'a changed report is read with its row').toEqual(['xid 79']);
    expect(changes.at(-1)).toBe('n1: capacity changed (reported to another control plane)');
    now += 1_000;
    await b.refresh();
    await b.refresh();
    expect(readIds(), 'once per change, though it stays in the look-back window').toEqual(['n1']);

    await a.setState('n1', 'cordoned', 'ops');
    await b.refresh({ liveness: false });
    expect(b.get('n1')?.adminState, 'a write in the same millisecond as the last one read is still news').toBe(
      'cordoned',
    );
    await a.close();
    await b.close();
    await store.close();
  });
});
