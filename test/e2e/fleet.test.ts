// The spine end to end, with real processes on loopback: a control plane,
// simulated agents, and sim engines started by the agents' supervisors.
// Placement puts replicas on nodes, agents run them, the control plane sees
// them ready; restarts of either side cost no replica; a drained node keeps
// serving until its replacement is ready; a lost node's replica is replaced.
import { mkdirSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort, killEnginesOf, startControl, stopAll } from '../support/processes.js';
import { waitFor } from '../support/wait.js';
import { engineSecretOf, JOIN, startSimAgent } from '../support/fleet.js';

const ADMIN = 'e2e-admin-token-0123456789abcdef';
const headers = { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json', 'x-llmgw-actor': 'e2e' };
const stateDirs: string[] = [];

afterAll(async () => {
  await stopAll();
  killEnginesOf(stateDirs);
});

interface ReplicaView {
  id: string;
  model: string;
  state: string;
  endpoint?: string;
  shards: { node: string; state: string }[];
}

let portBase = 23000;
function startAgent(control: string, dir: string, id: string, extra: string[] = []) {
  const stateDir = join(dir, id);
  if (!stateDirs.includes(stateDir)) stateDirs.push(stateDir);
  const first = portBase;
  portBase += 50;
  return startSimAgent(control, stateDir, id, { first, count: 50 }, { extra });
}

async function replicas(admin: string, model?: string): Promise<ReplicaView[]> {
  return (await (
    await fetch(`${admin}/api/v1/replicas${model ? `?model=${model}` : ''}`, { headers })
  ).json()) as ReplicaView[];
}

async function addModel(admin: string, def: Record<string, unknown>): Promise<void> {
  const res = await fetch(`${admin}/api/v1/models`, { method: 'POST', headers, body: JSON.stringify(def) });
  expect(res.status, await res.clone().text()).toBe(200);
}

function enginePids(stateDir: string): number[] {
  const dir = join(stateDir, 'shards');
  return readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .map((f) => (JSON.parse(readFileSync(join(dir, f), 'utf8')) as { pid: number }).pid)
    .sort();
}

function weightsDir(dir: string): string {
  const w = join(dir, 'weights');
  mkdirSync(w, { recursive: true });
  return `file://${w}`;
}

describe('the fleet end to end', () => {
  it('places a sim model with min 2 on two agents, serves a chat completion, and survives restarts of both sides', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-e2e-fleet-'));
    const agentPort = await freePort();
    const controlArgs = [
      '--store',
      `sqlite:${join(dir, 'db')}`,
      '--join-token',
      JOIN,
      '--admin-token',
      ADMIN,
      '--agent-addr',
      `127.0.0.1:${agentPort}`,
      '--reconcile-interval',
      '500ms',
      '--log-level',
      'warn',
    ];
    let control = await startControl(controlArgs);
    const agentUrl = control.urls.agent;
    const a1 = startAgent(agentUrl, dir, 'n1');
    startAgent(agentUrl, dir, 'n2');
    await waitFor('two nodes up', async () => {
      const nodes = (await (await fetch(`${control.urls.admin}/api/v1/nodes`, { headers })).json()) as {
        liveness: string;
      }[];
      return nodes.length === 2 && nodes.every((n) => n.liveness === 'up') ? true : undefined;
    });
    await addModel(control.urls.admin, {
      name: 'chat',
      aliases: ['c'],
      source: weightsDir(dir),
      scaling: { min: 2 },
      profiles: [{ engine: 'sim', args: ['--ttft-ms', '1'] }],
    });

    const ready = await waitFor('two ready replicas', async () => {
      const list = await replicas(control.urls.admin, 'chat');
      return list.length === 2 && list.every((r) => r.state === 'ready') ? list : undefined;
    });
    expect(new Set(ready.map((r) => r.shards[0]!.node)), 'replicas of one model spread over nodes').toEqual(
      new Set(['n1', 'n2']),
    );

    // Engines take only their shard secret, as the router sends it.
    const client = new OpenAI({ baseURL: `${ready[0]!.endpoint}/v1`, apiKey: engineSecretOf(stateDirs, ready[0]!.id) });
    const completion = await client.chat.completions.create({
      model: 'chat',
      messages: [{ role: 'user', content: 'hello' }],
      max_tokens: 4,
    });
    expect(completion.choices[0]!.message.content, 'the replica answers a real chat completion').toMatch(/\S/);
    expect(completion.usage?.completion_tokens).toBe(4);

    // An agent restart costs no replica: the new agent adopts the running engine.
    const before = enginePids(join(dir, 'n1'));
    expect((await a1.stop('SIGTERM')).code).toBe(0);
    startAgent(agentUrl, dir, 'n1');
    await waitFor('n1 adopted its engine', async () => {
      const list = await replicas(control.urls.admin, 'chat');
      return list.length === 2 &&
        list.every((r) => r.state === 'ready') &&
        enginePids(join(dir, 'n1')).join() === before.join()
        ? true
        : undefined;
    });

    // A control-plane restart adopts what the agents still run instead of starting it again.
    const ids = ready.map((r) => r.id).sort();
    await control.stop();
    control = await startControl(controlArgs);
    const adopted = await waitFor('replicas adopted after a control-plane restart', async () => {
      const list = await replicas(control.urls.admin, 'chat');
      return list.length === 2 && list.every((r) => r.state === 'ready') ? list : undefined;
    });
    expect(adopted.map((r) => r.id).sort(), 'the same replicas, not new ones').toEqual(ids);
    expect(enginePids(join(dir, 'n1')), 'no engine was started again').toEqual(before);
  });

  it("drains a node make-before-break, and replaces a lost node's replica after the TTL", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-e2e-drain-'));
    const control = await startControl([
      '--store',
      `sqlite:${join(dir, 'db')}`,
      '--join-token',
      JOIN,
      '--admin-token',
      ADMIN,
      '--reconcile-interval',
      '300ms',
      '--node-stale-after',
      '1s',
      '--node-lost-after',
      '3s',
      '--log-level',
      'warn',
    ]);
    const agents = new Map([
      ['d1', startAgent(control.urls.agent, dir, 'd1')],
      ['d2', startAgent(control.urls.agent, dir, 'd2')],
      ['d3', startAgent(control.urls.agent, dir, 'd3')],
    ]);
    await waitFor('three nodes up', async () => {
      const nodes = (await (await fetch(`${control.urls.admin}/api/v1/nodes`, { headers })).json()) as {
        liveness: string;
      }[];
      return nodes.length === 3 && nodes.every((n) => n.liveness === 'up') ? true : undefined;
    });
    await addModel(control.urls.admin, {
      name: 'solo',
      source: weightsDir(dir),
      scaling: { min: 1 },
      profiles: [{ engine: 'sim' }],
    });
    const [first] = await waitFor('one ready replica', async () => {
      const list = await replicas(control.urls.admin, 'solo');
      return list.length === 1 && list[0]!.state === 'ready' ? list : undefined;
    });
    const drained = first!.shards[0]!.node;

    const res = await fetch(`${control.urls.admin}/api/v1/nodes/${drained}/state`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ state: 'drain' }),
    });
    expect(await res.json()).toEqual({ id: drained, state: 'draining' });

    // Until the replacement is ready, the old replica keeps serving: at every look, some replica is ready.
    let sawBoth = false;
    const moved = await waitFor('the replica moved off the drained node', async () => {
      const list = await replicas(control.urls.admin, 'solo');
      expect(
        list.some((r) => r.state === 'ready'),
        `a ready replica at every moment of the drain: ${JSON.stringify(list.map((r) => [r.state, r.shards[0]?.node]))}`,
      ).toBe(true);
      if (list.length === 2) sawBoth = true;
      const live = list.filter((r) => r.state !== 'stopping' && r.state !== 'failed');
      return live.length === 1 &&
        live[0]!.state === 'ready' &&
        live[0]!.shards[0]!.node !== drained &&
        !list.some((r) => r.id === first!.id)
        ? live[0]
        : undefined;
    });
    expect(sawBoth, 'the replacement existed beside the old replica (make before break)').toBe(true);

    // Kill the agent under the remaining replica: after the lost TTL it is replaced on the third node.
    const victim = moved.shards[0]!.node;
    await agents.get(victim)!.stop('SIGKILL');
    killEnginesOf([join(dir, victim)]);
    const replaced = await waitFor(
      "the lost node's replica replaced",
      async () => {
        const list = await replicas(control.urls.admin, 'solo');
        const ready = list.filter((r) => r.state === 'ready');
        return ready.length === 1 && ready[0]!.shards[0]!.node !== victim && ready[0]!.shards[0]!.node !== drained
          ? ready[0]
          : undefined;
      },
      45_000,
    );
    expect(replaced.id).not.toBe(moved.id);
  });

  // Regression: with --engine-host 0.0.0.0 (the README's second-machine
  // example) an agent named 127.0.0.1 in its endpoints and 0.0.0.0 in its
  // management address; a control plane that checks what nodes report
  // refused both, so nothing on such a node could be routed to or reached.
  it('reaches an agent whose engines and management API bind a wildcard at its address toward the control plane', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-e2e-wildcard-'));
    const control = await startControl([
      '--store',
      `sqlite:${join(dir, 'db')}`,
      '--join-token',
      JOIN,
      '--admin-token',
      ADMIN,
      '--reconcile-interval',
      '500ms',
      '--log-level',
      'warn',
    ]);
    startAgent(control.urls.agent, dir, 'w1', ['--engine-host', '0.0.0.0', '--mgmt-addr', '0.0.0.0:0']);
    await waitFor('the wildcard node up', async () => {
      const nodes = (await (await fetch(`${control.urls.admin}/api/v1/nodes`, { headers })).json()) as {
        liveness: string;
      }[];
      return nodes.length === 1 && nodes[0]!.liveness === 'up' ? true : undefined;
    });
    await addModel(control.urls.admin, {
      name: 'wild',
      source: weightsDir(dir),
      profiles: [{ engine: 'sim', args: ['--ttft-ms', '1'] }],
    });
    const ready = await waitFor('a ready replica on the wildcard node', async () =>
      (await replicas(control.urls.admin, 'wild')).find((r) => r.state === 'ready'),
    );
    expect(
      ready.endpoint,
      'the endpoint names the address the control plane sees the node at, not the wildcard',
    ).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);

    const key = (await (
      await fetch(`${control.urls.admin}/api/v1/keys`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ name: 'wild' }),
      })
    ).json()) as { secret: string };
    const client = new OpenAI({ baseURL: `${control.urls.client}/v1`, apiKey: key.secret, maxRetries: 0 });
    const reply = await client.chat.completions.create({
      model: 'wild',
      messages: [{ role: 'user', content: 'hello' }],
      max_tokens: 2,
    });
    expect(reply.usage?.completion_tokens, 'routed to the engine on the wildcard node').toBe(2);

    const log = await fetch(`${control.urls.admin}/api/v1/replicas/${ready.id}/log?lines=5`, { headers });
    expect(log.status, `the management API is reached at the advertised address: ${await log.clone().text()}`).toBe(
      200,
    );
  });
});
