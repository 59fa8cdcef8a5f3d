import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { Inventory } from './inventory.js';
import { registerHeartbeatMetrics, registerNodeMetrics } from './metrics.js';

const joinInput = (id: string) => ({
  id,
  hostname: id,
  mgmtAddr: null,
  labels: {},
  agentVersion: '1.0.0',
  protocolVersion: 1,
});

describe('llmgw_nodes', () => {
  it('counts nodes by liveness, admin state and approval at scrape time', async () => {
    let now = 1_000_000;
    const inv = await Inventory.create({ store: null, now: () => now, staleAfterMs: 15_000, lostAfterMs: 60_000 });
    const registry = new Registry();
    registerNodeMetrics(registry, inv);
    for (const id of ['a', 'b', 'c']) await inv.join(joinInput(id));
    for (const id of ['a', 'b']) inv.heartbeat(inv.get(id)!, {});
    await inv.setState('b', 'cordoned', 'test');
    const read = async () =>
      (await registry.getSingleMetricAsString('llmgw_nodes'))
        .split('\n')
        .filter((l) => !l.startsWith('#'))
        .sort();
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

describe('heartbeat metrics', () => {
  it('count full reports apart from keep-alives, and the reports asked for', async () => {
    const inv = await Inventory.create({ store: null, now: () => 0, staleAfterMs: 15_000, lostAfterMs: 60_000 });
    const registry = new Registry();
    registerHeartbeatMetrics(registry, inv);
    await inv.join(joinInput('a'));
    const node = inv.get('a')!;
    inv.heartbeat(node, { report: { cpu_count: 8 }, reportHash: 'h' });
    inv.heartbeat(node, { reportHash: 'h' });
    inv.heartbeat(node, { reportHash: 'h' });
    inv.heartbeat(node, { reportHash: 'other' });
    const text = await registry.metrics();
    expect(text).toContain('llmgw_heartbeat_reports_total{kind="full"} 1');
    expect(text).toContain('llmgw_heartbeat_reports_total{kind="keepalive"} 3');
    expect(text).toContain('llmgw_heartbeat_report_requests_total 1');
    expect(text, 'no store: nothing written').toContain('llmgw_store_node_writes_total 0');
  });
});
