// The heartbeat long-poll, over a real socket: a heartbeat that knows the
// current generation is held until the generation moves. Regression: the
// wait listened for the request's 'close', which Node emits as soon as the
// body is read, so every heartbeat was answered at once and each agent
// polled in a tight loop (about 40 heartbeats a second instead of one per 5 s).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { compileControlOptions } from '../config/index.js';
import { ControlPlane } from '../control-plane.js';
import { createJsonApp } from '../../http/index.js';
import { Inventory } from '../inventory/index.js';
import { Store } from '../store/index.js';
import { AssignmentBoard } from './assignments.js';
import { registerAgentApi } from './routes.js';

const JOIN = 'join-token-for-tests-0123456789';
let plane: ControlPlane | null = null;
afterEach(async () => {
  await plane?.close();
  plane = null;
});

describe('heartbeat long-poll', () => {
  it('holds a heartbeat with the current generation until the generation moves', async () => {
    plane = await ControlPlane.create(compileControlOptions({ store: 'none', join_token: JOIN, client_addr: '127.0.0.1:0', admin_addr: '127.0.0.1:0', agent_addr: '127.0.0.1:0' }), {
      logger: pino({ level: 'silent' }),
    });
    const urls = await plane.listen();
    const joined = await request(`${urls.agent}/agent/v1/join`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ join_token: JOIN, node_id: 'n1' }) });
    const { credential } = (await joined.body.json()) as { credential: string };
    const beat = (extra: Record<string, unknown>) =>
      request(`${urls.agent}/agent/v1/heartbeat`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${credential}` },
        body: JSON.stringify({ node_id: 'n1', ...extra }),
      });
    const first = (await (await beat({})).body.json()) as { generation: number };

    let answered = false;
    const held = beat({ known_generation: first.generation, wait_ms: 30_000 }).then(async (res) => {
      answered = true;
      return (await res.body.json()) as { generation: number };
    });
    // A heartbeat answered at once would have landed long before this second one returns.
    await (await beat({})).body.json();
    await (await beat({})).body.json();
    expect(answered, 'a heartbeat with the current generation is held, not answered at once').toBe(false);

    plane.assignments.bump('n1');
    const answer = await held;
    expect(answer.generation).toBe(first.generation + 1);
  });
});

describe('heartbeats an instance cannot save', () => {
  it('are refused with 503 once the store has been away long enough, so agents move to another control plane', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-agentapi-'));
    const store = await Store.open({ location: { kind: 'sqlite', path: join(dir, 'db') } });
    let now = 1_000_000;
    const inventory = await Inventory.create({ store, now: () => now, staleAfterMs: 15_000, lostAfterMs: 60_000, flushIntervalMs: 0 });
    const app = createJsonApp({ logger: pino({ level: 'silent' }), bodyLimitBytes: 1 << 20 });
    registerAgentApi(app, { inventory, assignments: new AssignmentBoard(1), joinToken: JOIN, heartbeatIntervalMs: 1000, refuseHeartbeatsUnsavedForMs: 7_500 });
    try {
      const joined = await app.inject({ method: 'POST', url: '/agent/v1/join', payload: { join_token: JOIN, node_id: 'n1' } });
      const { credential } = joined.json<{ credential: string }>();
      const beat = () => app.inject({ method: 'POST', url: '/agent/v1/heartbeat', headers: { authorization: `Bearer ${credential}` }, payload: { node_id: 'n1' } });
      expect((await beat()).statusCode).toBe(200);

      await store.close();
      expect((await beat()).statusCode, 'the first heartbeat the store misses is still answered').toBe(200);
      await inventory.flush();
      now += 7_000;
      expect((await beat()).statusCode, 'within the allowance').toBe(200);
      now += 1_000;
      const refused = await beat();
      expect(refused.statusCode).toBe(503);
      expect(refused.json<{ error: string }>().error).toMatch(/not been able to save heartbeats to the store for 8 s.*heartbeat to another control plane/);
    } finally {
      await app.close();
      await inventory.close().catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
