// The node agent failing while its engines serve: killed with SIGKILL over
// and over, its state directory deleted, and cut off from the control plane
// by a network partition. Engines outlive their agent by design, so each of
// these must cost no replica, and none may start a second engine beside one
// that runs: on a GPU node that is an out-of-memory crash or a GPU shared by
// two copies of a model.
import { rmSync } from 'node:fs';
import { createServer, type Server, type Socket, connect } from 'node:net';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { killEnginesOf, stopAll } from '../support/processes.js';
import { waitFor } from '../support/wait.js';
import { alive, enginesInProcessTable, Fleet } from './fleet-support.js';

const fleets: Fleet[] = [];
const servers: Server[] = [];

afterAll(async () => {
  await stopAll();
  for (const f of fleets) killEnginesOf(f.stateDirs);
  for (const s of servers) s.close();
});

function newFleet(name: string, firstPort: number): Fleet {
  const fleet = new Fleet(mkdtempSync(join(tmpdir(), `llmgw-faults-${name}-`)), firstPort);
  fleets.push(fleet);
  return fleet;
}

/**
 * A TCP proxy in front of the control plane's agent listener: the network
 * between one agent and the control plane. cut() drops every connection and
 * refuses new ones (as a dead switch port does); heal() lets them through.
 */
async function partitionable(target: string): Promise<{ url: string; cut(): void; heal(): void }> {
  const { hostname, port } = new URL(target);
  const open = new Set<Socket>();
  let isCut = false;
  const server = createServer((client) => {
    if (isCut) {
      client.destroy();
      return;
    }
    const upstream = connect(Number(port), hostname);
    open.add(client).add(upstream);
    const end = () => {
      client.destroy();
      upstream.destroy();
      open.delete(client);
      open.delete(upstream);
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
    client.pipe(upstream);
    upstream.pipe(client);
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${address.port}`,
    cut() {
      isCut = true;
      for (const s of open) s.destroy();
      open.clear();
    },
    heal() {
      isCut = false;
    },
  };
}

describe('agent faults', () => {
  it('an agent killed with SIGKILL ten times in a row re-attaches each time: same engine, no restart, no second engine', async () => {
    const fleet = newFleet('agent-kill', 30200);
    await fleet.startControl(['--reconcile-interval', '300ms']);
    let agent = fleet.startAgent('k1', ['--log-level', 'info']);
    await fleet.nodesUp(1);
    await fleet.addModel({ name: 'steady', scaling: { min: 1 }, profiles: [{ engine: 'sim' }] });
    const [replica] = await fleet.ready('steady', 1);
    const [engine] = await waitFor('the engine record', async () =>
      fleet.engines('k1').length === 1 ? fleet.engines('k1') : undefined,
    );

    for (let round = 1; round <= 10; round++) {
      await agent.stop('SIGKILL');
      expect(alive(engine!.pid), `round ${round}: the engine outlives its agent`).toBe(true);
      agent = fleet.startAgent('k1', ['--log-level', 'info']);
      // The new agent says it adopted the engine an earlier agent left running.
      const found = await agent.waitForLog((e) => e.msg === 'found engines from an earlier agent', 60_000);
      expect(found.adopted, `round ${round}: the shard was adopted`).toHaveLength(1);
      await waitFor(
        `round ${round}: the control plane sees the node up and the replica ready`,
        async () => {
          const [node] = await fleet.nodes();
          const [r] = await fleet.replicas('steady');
          return node?.liveness === 'up' && r?.id === replica!.id && r.state === 'ready' ? true : undefined;
        },
        60_000,
      );
      const [now] = fleet.engines('k1');
      expect(now, `round ${round}: the same engine, never restarted`).toMatchObject({
        replicaId: replica!.id,
        pid: engine!.pid,
        restarts: 0,
      });
      expect(
        enginesInProcessTable(engine!.shardId),
        `round ${round}: exactly one engine process runs the replica`,
      ).toEqual([engine!.pid]);
    }
    expect(
      (await fleet.replicas('steady')).map((r) => r.id),
      'no replica was created in its place',
    ).toEqual([replica!.id]);
  }, 300_000);

  it('an agent whose state directory was deleted finds its running engine and adopts it: no second engine on the GPU', async () => {
    const fleet = newFleet('agent-statedir', 30260);
    await fleet.startControl(['--reconcile-interval', '300ms']);
    const gpuNode = ['--simulate', 'gpus=1xh100-80gb,ram=64g', '--log-level', 'info'];
    let agent = fleet.startAgent('g1', gpuNode);
    await fleet.nodesUp(1);
    await fleet.addModel({ name: 'on-gpu', scaling: { min: 1 }, profiles: [{ engine: 'sim', gpus: 1 }] });
    const [replica] = await fleet.ready('on-gpu', 1);
    const [engine] = await waitFor('the engine record', async () =>
      fleet.engines('g1').length === 1 ? fleet.engines('g1') : undefined,
    );

    await agent.stop('SIGKILL');
    // Everything the agent knew: its credential, its engine records, its logs.
    rmSync(fleet.stateDir('g1'), { recursive: true, force: true });
    // Without its saved credential the agent cannot prove it is g1, and g1 is still live (stale) to the
    // control plane, so a join with the shared token alone is refused: anyone holding it could otherwise
    // take over a live node. The recovery path is an admin's per-node join token, which may replace the
    // credential of a live node with that one id.
    const token = await fleet.api<{ token: string }>('POST', '/api/v1/join-tokens', { node: 'g1', expires: '10m' });
    expect(token.status, JSON.stringify(token.body)).toBe(201);
    agent = fleet.startAgent('g1', [...gpuNode, '--join-token', token.body.token]);
    const found = await agent.waitForLog((e) => e.msg === 'found engines from an earlier agent', 60_000);
    expect(found.unrecorded, 'the engine is found by the marks in its environment').toEqual([
      { shardId: engine!.shardId, pid: engine!.pid },
    ]);

    const record = await waitFor(
      'the engine adopted and its record written again',
      async () => {
        const [r] = await fleet.replicas('on-gpu');
        const [e] = fleet.engines('g1');
        return r?.state === 'ready' && r.id === replica!.id && e ? e : undefined;
      },
      60_000,
    );
    expect(record.pid, 'the running engine was adopted, not started again').toBe(engine!.pid);
    expect(enginesInProcessTable(engine!.shardId), 'one engine holds the GPU').toEqual([engine!.pid]);
    expect(
      (await fleet.replicas('on-gpu')).map((r) => r.id),
      'the same replica',
    ).toEqual([replica!.id]);
  }, 180_000);

  it("a partition shorter than the lost TTL moves nothing; a longer one replaces the replica, and the returning node's copy is stopped", async () => {
    const fleet = newFleet('agent-partition', 30300);
    await fleet.startControl(['--reconcile-interval', '300ms', '--node-stale-after', '1s', '--node-lost-after', '6s']);
    const link = await partitionable(fleet.agentUrl);
    fleet.startAgent('p1', [], link.url);
    await fleet.nodesUp(1);
    await fleet.addModel({ name: 'part', scaling: { min: 1 }, profiles: [{ engine: 'sim' }] });
    const [replica] = await fleet.ready('part', 1);
    expect(replica!.shards[0]!.node).toBe('p1');
    // A second node, so there is somewhere to move to.
    fleet.startAgent('p2');
    await fleet.nodesUp(2);
    const [engine] = fleet.engines('p1');

    // Short: cut until the control plane calls the node stale (well inside the lost TTL), then heal.
    link.cut();
    await waitFor('p1 stale', async () =>
      (await fleet.nodes()).find((n) => n.id === 'p1')?.liveness === 'stale' ? true : undefined,
    );
    link.heal();
    await waitFor('p1 up again', async () =>
      (await fleet.nodes()).find((n) => n.id === 'p1')?.liveness === 'up' ? true : undefined,
    );
    const after = await fleet.replicas('part');
    expect(
      after.map((r) => [r.id, r.state]),
      'the same replica, still ready: nothing moved',
    ).toEqual([[replica!.id, 'ready']]);
    expect(fleet.engines('p1'), 'the same engine, not restarted').toEqual([engine]);
    expect(fleet.engines('p2'), 'nothing was started on the other node').toEqual([]);

    // Long: cut until the node is lost and the replica is replaced on p2.
    link.cut();
    const replacement = await waitFor(
      'a replacement ready on p2',
      async () => {
        const ready = (await fleet.replicas('part')).filter((r) => r.state === 'ready' && r.shards[0]!.node === 'p2');
        return ready[0];
      },
      90_000,
    );
    expect(replacement.id).not.toBe(replica!.id);
    expect((await fleet.nodes()).find((n) => n.id === 'p1')?.liveness).toBe('lost');
    expect(alive(engine!.pid), "the cut-off node's engine still runs: it cannot hear the control plane").toBe(true);

    // The node returns: exactly one copy wins (the replacement), and the returning node's engine is stopped.
    link.heal();
    await waitFor(
      "the returning node's engine stopped and one ready replica left",
      async () => {
        const list = await fleet.replicas('part');
        const live = list.filter((r) => r.state !== 'stopping' && r.state !== 'failed');
        return !alive(engine!.pid) &&
          fleet.engines('p1').length === 0 &&
          live.length === 1 &&
          live[0]!.id === replacement.id &&
          live[0]!.state === 'ready'
          ? true
          : undefined;
      },
      90_000,
    );
    expect((await fleet.nodes()).find((n) => n.id === 'p1')?.liveness, 'the node itself is back').toBe('up');
    expect(enginesInProcessTable(engine!.shardId), 'no process runs the old replica').toEqual([]);
  }, 300_000);
});
