// The agent listener's bodies, checked by each route's zod schema before its
// handler. Guards the move from a safeParse in each handler to the route
// schemas (the answers must read as before), and the reading of a shard
// state this control plane does not know: a newer agent's heartbeat is
// taken, not refused, or its node would look silent and lose its replicas.
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { createJsonApp } from '../../http/index.js';
import { Inventory } from '../inventory/index.js';
import type { ShardStatus } from '../../protocol/index.js';
import { AssignmentBoard } from './assignments.js';
import { registerAgentApi } from './routes.js';

const JOIN = 'join-token-for-tests-0123456789';

async function agentApp() {
  const inventory = await Inventory.create({
    store: null,
    now: () => Date.now(),
    staleAfterMs: 15_000,
    lostAfterMs: 60_000,
  });
  const reported: ShardStatus[][] = [];
  const app = createJsonApp({ logger: pino({ level: 'silent' }), bodyLimitBytes: 1 << 20 });
  registerAgentApi(app, {
    inventory,
    assignments: new AssignmentBoard(1),
    joinToken: JOIN,
    heartbeatIntervalMs: 1000,
    onShardReport: (_node, shards) => void reported.push(shards),
  });
  const joined = await app.inject({
    method: 'POST',
    url: '/agent/v1/join',
    payload: { join_token: JOIN, node_id: 'n1' },
  });
  const { credential } = joined.json<{ credential: string }>();
  const beat = (body: Record<string, unknown>) =>
    app.inject({
      method: 'POST',
      url: '/agent/v1/heartbeat',
      headers: { authorization: `Bearer ${credential}` },
      payload: { node_id: 'n1', ...body },
    });
  return { app, inventory, reported, beat };
}

describe('agent route schemas', () => {
  it('words a bad join and a bad heartbeat with what they are and the field', async () => {
    const { app, inventory, beat } = await agentApp();
    try {
      const join = await app.inject({
        method: 'POST',
        url: '/agent/v1/join',
        payload: { join_token: JOIN, node_id: 'bad id' },
      });
      expect(join.statusCode).toBe(400);
      expect(join.json()).toEqual({ error: 'join request: node_id: want 1-128 letters, digits, ".", "_" or "-"' });
      const bad = await beat({ wait_ms: -1 });
      expect(bad.statusCode).toBe(400);
      expect(bad.json<{ error: string }>().error).toMatch(/^heartbeat: wait_ms: /);
    } finally {
      await app.close();
      await inventory.close();
    }
  });

  it("takes a newer agent's shard state as 'unknown', and refuses a state that is not a string", async () => {
    const { app, inventory, reported, beat } = await agentApp();
    try {
      const newer = await beat({ shards: [{ shard_id: 's1', replica_id: 'r1', state: 'hibernating' }] });
      expect(newer.statusCode, 'the heartbeat is taken').toBe(200);
      expect(
        reported.at(-1)?.map((s) => s.state),
        'the reconciler is told the state is unknown',
      ).toEqual(['unknown']);
      const known = await beat({ shards: [{ shard_id: 's1', replica_id: 'r1', state: 'ready' }] });
      expect(known.statusCode).toBe(200);
      expect(reported.at(-1)?.map((s) => s.state)).toEqual(['ready']);
      const broken = await beat({ shards: [{ shard_id: 's1', replica_id: 'r1', state: 7 }] });
      expect(broken.statusCode).toBe(400);
      expect(broken.json<{ error: string }>().error).toMatch(/^heartbeat: shards\[0\]\.state: .*expected string/);
    } finally {
      await app.close();
      await inventory.close();
    }
  });
});
