// GET /api/v1/nodes/{id} and the "why" fields of explain-placement, through
// a whole control plane with app.inject: the answers name their cause.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { ExplainView, NodeDetailView } from '../../api/types.js';
import { compileControlOptions } from '../config/index.js';
import { ControlPlane } from '../control-plane.js';

const TOKEN = 'admin-token-for-tests-0123456789';
const JOIN = 'join-token-for-tests-0123456789';
const auth = { authorization: `Bearer ${TOKEN}` };
const planes: ControlPlane[] = [];
afterEach(async () => {
  await Promise.all(planes.splice(0).map((p) => p.close()));
});

async function plane(): Promise<ControlPlane> {
  const dir = mkdtempSync(join(tmpdir(), 'llmgw-admin-why-'));
  const p = await ControlPlane.create(
    compileControlOptions({ store: `sqlite:${join(dir, 'db')}`, admin_token: TOKEN, join_token: JOIN }),
    {
      logger: pino({ level: 'silent' }),
    },
  );
  planes.push(p);
  return p;
}

async function addNode(p: ControlPlane, id: string, gpus: number): Promise<void> {
  await p.inventory.join({ id, hostname: id, mgmtAddr: null, labels: {}, agentVersion: '1', protocolVersion: 1 });
  p.inventory.heartbeat(p.inventory.get(id)!, {
    report: {
      gpus: Array.from({ length: gpus }, (_, index) => ({ index, class: 'h100-80gb', problems: [] })),
      engines: [{ name: 'vllm' }],
    },
  });
}

const get = (p: ControlPlane, url: string) => p.adminApp.inject({ method: 'GET', url, headers: auth });
const add = (p: ControlPlane, name: string, gpus: number) =>
  p.adminApp.inject({
    method: 'POST',
    url: '/api/v1/models?force=true',
    headers: auth,
    payload: { name, source: `hf://org/${name}`, profiles: [{ name: 'gpu', engine: 'vllm', gpus }] },
  });

describe('admin API: why', () => {
  it('says why a node is idle and why a model is not placed, with the numbers', async () => {
    const p = await plane();
    await addNode(p, 'n1', 2);
    await addNode(p, 'n2', 1);
    expect((await add(p, 'pair', 2)).statusCode).toBe(200);
    expect((await add(p, 'huge', 4)).statusCode).toBe(200);
    await p.reconciler.pass();

    const n2 = await get(p, '/api/v1/nodes/n2');
    expect(n2.statusCode).toBe(200);
    const detail = n2.json<NodeDetailView>();
    expect(detail.node.id).toBe('n2');
    expect(detail.replicas).toEqual([]);
    expect(detail.drain_waits, 'only a draining node has drain waits').toBeUndefined();
    const fits = Object.fromEntries(detail.idle!.models.map((m) => [m.model, m]));
    expect(fits.pair).toMatchObject({ fits: false, replicas: 1, nodes: ['n1'] });
    expect(fits.pair!.reason).toMatch(/cannot run here: .*2 GPUs.*1/);
    expect(detail.summary[0]).toBe('node n2 runs no replica:');

    const n1 = (await get(p, '/api/v1/nodes/n1')).json<NodeDetailView>();
    expect(n1.idle, 'a node with a replica is not idle').toBeUndefined();
    expect(n1.replicas.map((r) => r.model)).toEqual(['pair']);

    const huge = (await get(p, '/api/v1/explain-placement?model=huge')).json<ExplainView>();
    expect(huge).toMatchObject({
      placed: false,
      min_replicas: 1,
      ready_replicas: 0,
      profiles: [{ profile: 'gpu', nodes_fit: 0, node_count: 2 }],
    });
    expect(huge.summary![0]).toMatch(
      /huge is not running and not placed: no node can run any of its profiles \(2 nodes checked\)/,
    );
    expect(huge.summary![1]).toMatch(/^0\/2 nodes fit profile gpu: 2 have fewer than 4/);
  });

  it('answers 404 with the way to list nodes for an unknown id', async () => {
    const p = await plane();
    const res = await get(p, '/api/v1/nodes/nope');
    expect(res.statusCode).toBe(404);
    expect(res.json<{ error: string }>().error).toMatch(/no node "nope"; llmgw ctl nodes lists the fleet/);
  });

  it('says what a drain waits for: no other node can take the replacement', async () => {
    const p = await plane();
    await addNode(p, 'n1', 1);
    await addNode(p, 'n2', 1);
    expect((await add(p, 'one', 1)).statusCode).toBe(200);
    await p.reconciler.pass();
    const on = p.reconciler.replicas()[0]!.shards[0]!.nodeId;
    const other = on === 'n1' ? 'n2' : 'n1';
    for (const [id, state] of [
      [other, 'cordon'],
      [on, 'drain'],
    ] as const) {
      expect(
        (
          await p.adminApp.inject({
            method: 'POST',
            url: `/api/v1/nodes/${id}/state`,
            headers: auth,
            payload: { state },
          })
        ).statusCode,
      ).toBe(200);
    }
    await p.reconciler.pass();
    const detail = (await get(p, `/api/v1/nodes/${on}`)).json<NodeDetailView>();
    expect(detail.drain_waits).toHaveLength(1);
    expect(detail.drain_waits![0]!.waits_for).toMatch(
      new RegExp(`a node to take its replacement, and none can: 0/2 nodes fit profile gpu: .*1 is cordoned`),
    );
    expect(detail.summary[0]).toBe(`node ${on} is draining and waits for 1 replica:`);
  });
});
