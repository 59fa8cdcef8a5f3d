// The agent listener applies report-checks.ts where nodes report: a join's
// mgmt_addr and a heartbeat's shard endpoints. Regression: both were taken
// as sent, so a node could point the router (prompts) and collect/logs (its
// bearer) at any address. Injected requests come from 127.0.0.1.
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import type { ShardStatus } from '../../protocol/index.js';
import { createJsonApp } from '../../http/index.js';
import { Inventory } from '../inventory/index.js';
import { AssignmentBoard } from './assignments.js';
import { registerAgentApi } from './routes.js';

const JOIN = 'join-token-for-tests-0123456789';

async function listener() {
  const inventory = await Inventory.create({ store: null, now: Date.now, staleAfterMs: 15_000, lostAfterMs: 60_000 });
  const app = createJsonApp({ logger: pino({ level: 'silent' }), bodyLimitBytes: 1 << 20 });
  const reports: ShardStatus[][] = [];
  const told: [string, string | null][] = [];
  registerAgentApi(app, {
    inventory,
    assignments: new AssignmentBoard(1),
    joinToken: JOIN,
    heartbeatIntervalMs: 1000,
    onShardReport: (_node, shards) => reports.push(shards),
    onMgmtAddrChecked: (node, refusal) => told.push([node, refusal]),
  });
  const join = async (body: Record<string, unknown>) => {
    const res = await app.inject({
      method: 'POST',
      url: '/agent/v1/join',
      payload: { join_token: JOIN, node_id: 'n1', ...body },
    });
    expect(res.statusCode).toBe(200);
    return res.json<{ credential: string }>().credential;
  };
  return { app, inventory, reports, told, join };
}

describe('addresses a node reports, at the agent listener', () => {
  it("stores a mgmt_addr on the node's own address, and refuses one with a path, saying why", async () => {
    const l = await listener();
    const credential = await l.join({ mgmt_addr: '127.0.0.1:7000' });
    expect(l.inventory.get('n1')?.mgmtAddr).toBe('127.0.0.1:7000');
    // Joining again under a live id takes proof of the credential it holds.
    await l.join({ mgmt_addr: '127.0.0.1:7000/internal', credential });
    expect(l.inventory.get('n1')?.mgmtAddr, 'a refused address is stored as none').toBeNull();
    expect(l.told).toEqual([
      ['n1', null],
      ['n1', expect.stringMatching(/^mgmt_addr "127\.0\.0\.1:7000\/internal" is not host:port/) as unknown as string],
    ]);
    await l.app.close();
  });

  it('keeps what the live node declared at join when a join under its id is refused', async () => {
    // Regression: the join's addresses were recorded before the join was
    // decided, so a join-token holder refused with 409 still replaced the live
    // node's declared port range (its shards' endpoints were then taken on any
    // port) and its mgmt_addr refusal.
    const l = await listener();
    const credential = await l.join({
      mgmt_addr: '127.0.0.1:7000',
      engine_host: '127.0.0.1',
      port_range: { first: 20000, last: 20009 },
    });
    const refused = await l.app.inject({
      method: 'POST',
      url: '/agent/v1/join',
      payload: {
        join_token: JOIN,
        node_id: 'n1',
        mgmt_addr: '127.0.0.1:7000/internal',
        engine_host: '127.0.0.1',
        port_range: { first: 1, last: 65535 },
      },
    });
    expect(refused.statusCode, 'n1 is live and the join proves no credential').toBe(409);
    expect(l.told, "a refused join tells nothing about the live node's address").toEqual([['n1', null]]);
    const shards = [{ shard_id: 's1', replica_id: 'r1', state: 'ready', endpoint: 'http://127.0.0.1:9' }];
    const res = await l.app.inject({
      method: 'POST',
      url: '/agent/v1/heartbeat',
      headers: { authorization: `Bearer ${credential}` },
      payload: { node_id: 'n1', shards },
    });
    expect(res.statusCode).toBe(200);
    expect(l.reports[0]![0]!.endpoint, 'the range the live node declared still holds').toBeUndefined();
    expect(l.reports[0]![0]!.error).toMatch(/port 9 is outside the node's engine port range 20000-20009/);
    await l.app.close();
  });

  it('strips a shard endpoint outside the range declared at join before the reconciler hears it, even from a report that leaves the range out', async () => {
    const l = await listener();
    const credential = await l.join({ engine_host: '127.0.0.1', port_range: { first: 20000, last: 20009 } });
    const shards = [
      { shard_id: 's1', replica_id: 'r1', state: 'ready', endpoint: 'http://127.0.0.1:20001' },
      { shard_id: 's2', replica_id: 'r2', state: 'ready', endpoint: 'http://127.0.0.1:9' },
    ];
    const res = await l.app.inject({
      method: 'POST',
      url: '/agent/v1/heartbeat',
      headers: { authorization: `Bearer ${credential}` },
      payload: { node_id: 'n1', shards },
    });
    expect(res.statusCode).toBe(200);
    const [seen] = l.reports;
    expect(seen![0]!.endpoint).toBe('http://127.0.0.1:20001');
    expect(seen![1]!.endpoint, 'nothing to route to').toBeUndefined();
    expect(seen![1]!.error).toMatch(/port 9 is outside the node's engine port range 20000-20009/);
    await l.app.close();
  });
});
