// The control plane killed with SIGKILL while clients use it. The engines
// do not depend on it to serve (only to be found), so a dead control plane
// must not take a replica down, and the one started in its place, on the
// same store and ports, must adopt every shard the agents still run rather
// than start any again, with the operator's cordons and drains intact. What
// this guards against costs a whole fleet's cold start (minutes per GPU
// model) on every control-plane crash.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort, killEnginesOf, stopAll } from '../support/processes.js';
import { waitFor } from '../support/wait.js';
import { Fleet } from './fleet-support.js';
import { engineSecretOf } from '../support/fleet.js';

let fleet: Fleet | undefined;

afterAll(async () => {
  await stopAll();
  if (fleet) killEnginesOf(fleet.stateDirs);
});

describe('control plane faults', () => {
  it('SIGKILL under client load: engines keep serving, and a restarted control plane adopts every shard and restarts none; cordon and drain survive', async () => {
    fleet = new Fleet(mkdtempSync(join(tmpdir(), 'llmgw-faults-control-')), 30600);
    const f = fleet;
    // Fixed ports: agents and clients find the new control plane where the old one was.
    const ports = { client: await freePort(), admin: await freePort(), agent: await freePort() };
    const args = [
      '--reconcile-interval',
      '300ms',
      '--client-addr',
      `127.0.0.1:${ports.client}`,
      '--admin-addr',
      `127.0.0.1:${ports.admin}`,
      '--agent-addr',
      `127.0.0.1:${ports.agent}`,
    ];
    let control = await f.startControl(args);
    for (const id of ['c1', 'c2', 'c3', 'c4']) f.startAgent(id);
    await f.nodesUp(4);
    expect((await f.api('POST', '/api/v1/nodes/c3/state', { state: 'cordon' })).body).toEqual({
      id: 'c3',
      state: 'cordoned',
    });
    expect((await f.api('POST', '/api/v1/nodes/c4/state', { state: 'drain' })).body).toEqual({
      id: 'c4',
      state: 'draining',
    });
    await f.addModel({ name: 'load', scaling: { min: 2 }, profiles: [{ engine: 'sim', args: ['--ttft-ms', '1'] }] });
    const replicas = await f.ready('load', 2);
    expect(new Set(replicas.map((r) => r.shards[0]!.node)), 'placed only on the nodes open to work').toEqual(
      new Set(['c1', 'c2']),
    );
    const key = (await f.api<{ secret: string }>('POST', '/api/v1/keys', { name: 'load' })).body.secret;
    const engines = new Map(replicas.map((r) => [r.id, f.engineOf(r.id)!]));

    // Client load through the client listener, which dies with the control plane.
    const ai = new OpenAI({
      baseURL: `http://127.0.0.1:${ports.client}/v1`,
      apiKey: key,
      maxRetries: 0,
      timeout: 10_000,
    });
    let served = 0;
    let stop = false;
    const load = (async () => {
      while (!stop) {
        await ai.chat.completions
          .create({ model: 'load', messages: [{ role: 'user', content: 'x' }], max_tokens: 2 })
          .then(
            () => served++,
            () => new Promise((r) => setTimeout(r, 50)),
          );
      }
    })();
    await waitFor('requests served under load', async () => (served >= 10 ? true : undefined));

    await control.stop('SIGKILL');

    // Every engine still answers when a client reaches it directly.
    for (const r of replicas) {
      const direct = new OpenAI({
        baseURL: `${r.endpoint}/v1`,
        apiKey: engineSecretOf(f.stateDirs, r.id),
        maxRetries: 0,
      });
      const reply = await direct.chat.completions.create({
        model: 'load',
        messages: [{ role: 'user', content: 'x' }],
        max_tokens: 3,
      });
      expect(reply.usage?.completion_tokens, `replica ${r.id} serves with the control plane dead`).toBe(3);
    }

    const servedBefore = served;
    control = await f.startControl(args);
    const adopted = await waitFor(
      'both replicas ready again under the new control plane',
      async () => {
        const list = await f.replicas('load');
        return list.length === 2 && list.every((r) => r.state === 'ready') ? list : undefined;
      },
      60_000,
    );
    expect(adopted.map((r) => r.id).sort(), 'the same replicas, adopted, not new ones').toEqual(
      [...engines.keys()].sort(),
    );
    for (const [id, before] of engines)
      expect(f.engineOf(id), `replica ${id}: the same engine, never restarted`).toEqual(before);
    const nodes = await f.nodes();
    expect(Object.fromEntries(nodes.map((n) => [n.id, n.state])), 'cordon and drain survive the crash').toEqual({
      c1: 'ready',
      c2: 'ready',
      c3: 'cordoned',
      c4: 'draining',
    });

    // Clients are served again through the new control plane.
    await waitFor(
      'requests served again through the new control plane',
      async () => (served > servedBefore + 5 ? true : undefined),
      60_000,
    );
    stop = true;
    await load;
    for (const [id, before] of engines)
      expect(f.engineOf(id), `replica ${id}: still the same engine after the load`).toEqual(before);
  }, 240_000);
});
