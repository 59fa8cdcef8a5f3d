// The placement node cache. It guards against two failures: a pass placing
// on what a node was (a cached node kept after its report, state, approval,
// labels or liveness changed), and the cost it exists to remove (every node
// converted afresh at every pass, 10,000 of them at each of several passes a
// second). Nodes that leave the inventory must leave the cache too, or 10,000
// joins and removals would keep 10,000 dead nodes.
import { describe, expect, it } from 'vitest';
import type { NodeReport } from '../../protocol/index.js';
import { Inventory, type Node } from '../inventory/index.js';
import type { PlacementNode } from '../placement/index.js';
import { PlacementNodeCache, toPlacementNode } from './snapshot.js';

const report = (memoryAvailableBytes: number): NodeReport => ({
  gpus: [{ index: 0, class: 'h100-80gb', memory_total_mib: 81_559, problems: [] }],
  memory_available_bytes: memoryAvailableBytes,
  engines: [{ name: 'vllm' }],
});

async function fleet() {
  let now = 1_000_000;
  const inventory = await Inventory.create({ store: null, now: () => now, staleAfterMs: 15_000, lostAfterMs: 60_000 });
  const cache = new PlacementNodeCache();
  const join = async (id: string) => {
    await inventory.join({
      id,
      hostname: id,
      mgmtAddr: null,
      labels: { zone: 'a' },
      agentVersion: '1',
      protocolVersion: 1,
    });
    inventory.heartbeat(inventory.get(id)!, { report: report(64 * 2 ** 30) });
  };
  return {
    inventory,
    cache,
    join,
    advance: (ms: number) => (now += ms),
    /** One pass's conversion of the whole fleet, by node id. */
    convert(): Map<string, PlacementNode> {
      const nodes = cache.convert(inventory.list(), (n) => inventory.liveness(n, now));
      return new Map(nodes.map((n) => [n.id, n]));
    },
    node: (id: string): Node => inventory.get(id)!,
  };
}

describe('placement node cache', () => {
  it('returns the same placement node while nothing it is made of changed, keep-alives included', async () => {
    const f = await fleet();
    await f.join('n1');
    await f.join('n2');
    const first = f.convert();
    f.inventory.heartbeat(f.node('n1'), {});
    f.advance(1_000);
    const second = f.convert();
    expect(second.get('n1'), 'a keep-alive leaves the node as it was').toBe(first.get('n1'));
    expect(second.get('n2')).toBe(first.get('n2'));
    expect(second.get('n1')).toEqual(toPlacementNode(f.node('n1'), 'up'));
  });

  it('makes the node again after a new report, with what the report says', async () => {
    const f = await fleet();
    await f.join('n1');
    const first = f.convert().get('n1')!;
    f.inventory.heartbeat(f.node('n1'), { report: report(8 * 2 ** 30) });
    const second = f.convert().get('n1')!;
    expect(second, 'a replaced report is a new node').not.toBe(first);
    expect(second.memoryFreeBytes, 'placement reads the new free memory').toBe(8 * 2 ** 30);
  });

  it('makes the node again after its admin state, approval, labels or hostname changed', async () => {
    const f = await fleet();
    await f.join('n1');
    let before = f.convert().get('n1')!;
    const changes: [string, () => unknown, (n: PlacementNode) => unknown, unknown][] = [
      ['admin state', () => f.inventory.setState('n1', 'cordoned', 'admin'), (n) => n.adminState, 'cordoned'],
      ['approval', () => (f.node('n1').approval = 'pending'), (n) => n.pendingApproval, true],
      ['labels', () => (f.node('n1').labels = { zone: 'b' }), (n) => n.labels.zone, 'b'],
      ['hostname', () => (f.node('n1').hostname = 'renamed'), (n) => n.hostname, 'renamed'],
    ];
    for (const [what, change, read, want] of changes) {
      await change();
      const after = f.convert().get('n1')!;
      expect(after, `a changed ${what} is a new node`).not.toBe(before);
      expect(read(after), `placement reads the new ${what}`).toEqual(want);
      before = after;
    }
  });

  it('makes the node again when its liveness changes, and not while it stays the same', async () => {
    const f = await fleet();
    await f.join('n1');
    const up = f.convert().get('n1')!;
    f.advance(15_000);
    const stale = f.convert().get('n1')!;
    expect(stale, 'gone stale').not.toBe(up);
    expect(stale.liveness).toBe('stale');
    f.advance(1_000);
    expect(f.convert().get('n1'), 'still stale: nothing changed').toBe(stale);
    f.inventory.heartbeat(f.node('n1'), {});
    const back = f.convert().get('n1')!;
    expect(back.liveness, 'back up after a heartbeat').toBe('up');
    expect(back).not.toBe(stale);
  });

  it('forgets nodes that left the inventory', async () => {
    const f = await fleet();
    for (let i = 0; i < 50; i++) await f.join(`n${i}`);
    f.convert();
    expect(f.cache.size).toBe(50);
    for (let i = 0; i < 40; i++) await f.inventory.remove(`n${i}`, 'admin');
    const left = f.convert();
    expect(f.cache.size, 'removed nodes are not kept').toBe(10);
    expect([...left.keys()]).toEqual(f.inventory.list().map((n) => n.id));
    await f.join('n0');
    const rejoined = f.convert().get('n0')!;
    expect(rejoined.liveness, 'a node that rejoins under a freed id is converted afresh').toBe('up');
    expect(f.cache.size).toBe(11);
  });
});
