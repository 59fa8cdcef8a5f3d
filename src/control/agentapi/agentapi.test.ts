// The heartbeat long-poll, over a real socket: a heartbeat that knows the
// current generation is held until the generation moves. Regression: the
// wait listened for the request's 'close', which Node emits as soon as the
// body is read, so every heartbeat was answered at once and each agent
// polled in a tight loop (about 40 heartbeats a second instead of one per 5 s).
import pino from 'pino';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { compileControlOptions } from '../config/index.js';
import { ControlPlane } from '../control-plane.js';

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
