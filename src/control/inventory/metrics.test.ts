import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { Inventory } from './inventory.js';
import { registerNodeMetrics } from './metrics.js';

const joinInput = (id: string) => ({ id, hostname: id, mgmtAddr: null, labels: {}, agentVersion: '1.0.0', protocolVersion: 1 });

describe('llmgw_nodes', () => {
  it('counts nodes by liveness, admin state and approval at scrape time', async () => {
    let now = 1_000_000;
    const inv = await Inventory.create({ store: null, now: () => now, staleAfterMs: 15_000, lostAfterMs: 60_000 });
    const registry = new Registry();
    registerNodeMetrics(registry, inv);
    for (const id of ['a', 'b', 'c']) await inv.join(joinInput(id));
    for (const id of ['a', 'b']) inv.heartbeat(inv.get(id)!, {});
    await inv.setState('b', 'cordoned', 'test');
    const read = async () => (await registry.getSingleMetricAsString('llmgw_nodes')).split('\n').filter((l) => !l.startsWith('#')).sort();
    expect(await read()).toEqual([
      'llmgw_nodes{liveness="stale",state="ready",approval="approved"} 1',
      'llmgw_nodes{liveness="up",state="cordoned",approval="approved"} 1',
      'llmgw_nodes{liveness="up",state="ready",approval="approved"} 1',
    ]);
    now += 61_000;
    expect(await read(), 'read afresh at each scrape: every node is lost a minute later').toEqual([
      'llmgw_nodes{liveness="lost",state="cordoned",approval="approved"} 1',
      'llmgw_nodes{liveness="lost",state="ready",approval="approved"} 2',
    ]);
  });
});
