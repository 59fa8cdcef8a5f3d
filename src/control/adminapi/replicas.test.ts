// The replica endpoints and the replica numbers in the model, node and
// summary views, through a whole control plane with app.inject.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { compileControlOptions } from '../config/index.js';
import { ControlPlane } from '../control-plane.js';

const TOKEN = 'admin-token-for-tests-0123456789';
const auth = { authorization: `Bearer ${TOKEN}` };
const planes: ControlPlane[] = [];
afterEach(async () => {
  await Promise.all(planes.splice(0).map((p) => p.close()));
});

const JOIN = 'join-token-for-tests-0123456789';

async function plane(): Promise<{ p: ControlPlane; advance: (ms: number) => void }> {
  let clock = 1_000_000;
  const dir = mkdtempSync(join(tmpdir(), 'llmgw-admin-replicas-'));
  const config = compileControlOptions({ store: `sqlite:${join(dir, 'db')}`, admin_token: TOKEN, join_token: JOIN });
  const p = await ControlPlane.create(config, { logger: pino({ level: 'silent' }), now: () => clock });
  planes.push(p);
  return { p, advance: (ms) => (clock += ms) };
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

const get = async (p: ControlPlane, url: string) => p.adminApp.inject({ method: 'GET', url, headers: auth });
const model = (name: string, gpus: number) => ({
  name,
  source: `hf://org/${name}`,
  profiles: [{ name: 'gpu', engine: 'vllm', gpus }],
});

describe('admin API: replicas and explain-placement', () => {
  it('lists replicas with their shards, filtered by model, with idle_seconds -1 until the router reports use', async () => {
    const { p, advance } = await plane();
    await addNode(p, 'n1', 2);
    for (const name of ['a', 'b']) {
      const res = await p.adminApp.inject({
        method: 'POST',
        url: '/api/v1/models?force=true',
        headers: auth,
        payload: model(name, 1),
      });
      expect(res.statusCode).toBe(200);
    }
    await p.reconciler.pass();
    advance(42_000);

    const all = await get(p, '/api/v1/replicas');
    expect(all.statusCode).toBe(200);
    expect(
      all
        .json<{ model: string }[]>()
        .map((r) => r.model)
        .sort(),
    ).toEqual(['a', 'b']);

    const only = await get(p, '/api/v1/replicas?model=a');
    const [a] = only.json<Record<string, unknown>[]>();
    const replica = p.reconciler.replicas().find((r) => r.model === 'a')!;
    expect(only.json()).toHaveLength(1);
    expect(a).toEqual({
      id: replica.id,
      model: 'a',
      profile: 'gpu',
      state: 'pending',
      age_seconds: 42,
      idle_seconds: -1,
      shards: [
        { id: replica.shards[0]!.id, node: 'n1', rank: 0, gpus: replica.shards[0]!.gpuIndices, state: 'pending' },
      ],
    });

    const models = await get(p, '/api/v1/models');
    expect(
      models
        .json<{ name: string; ready_replicas: number; total_replicas: number }[]>()
        .map((m) => [m.name, m.ready_replicas, m.total_replicas]),
    ).toEqual([
      ['a', 0, 1],
      ['b', 0, 1],
    ]);
    const nodes = await get(p, '/api/v1/nodes');
    expect(nodes.json()).toMatchObject([{ id: 'n1', gpu_total: 2, gpu_free: 0, replicas: 2 }]);
    const summary = await get(p, '/api/v1/summary');
    expect(summary.json()).toMatchObject({
      replicas: { total: 2, by_state: { pending: 2 } },
      models: { not_placed: [] },
    });
  });

  it('explains why a model is not placed, and answers 400 and 404 as the seed does', async () => {
    const { p } = await plane();
    await addNode(p, 'n1', 1);
    await p.adminApp.inject({
      method: 'POST',
      url: '/api/v1/models?force=true',
      headers: auth,
      payload: { ...model('big', 4), aliases: ['large'] },
    });
    await p.reconciler.pass();

    const res = await get(p, '/api/v1/explain-placement?model=big');
    expect(res.statusCode).toBe(200);
    const body = res.json<{
      model: string;
      placed: boolean;
      rejections: { profile: string; node?: string; reason: string }[];
    }>();
    expect(body).toMatchObject({ model: 'big', placed: false });
    expect(body.rejections).toHaveLength(1);
    expect(body.rejections[0]).toMatchObject({ profile: 'gpu', node: 'n1' });
    expect(body.rejections[0]!.reason, 'a sentence an operator can act on').toMatch(/4/);
    expect((await get(p, '/api/v1/explain-placement?model=large')).json(), 'an alias finds the model').toMatchObject({
      model: 'large',
      placed: false,
    });

    const missing = await get(p, '/api/v1/explain-placement');
    expect(missing.statusCode).toBe(400);
    expect(missing.json()).toMatchObject({ error: 'model is required' });
    const unknown = await get(p, '/api/v1/explain-placement?model=x');
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json()).toMatchObject({ error: 'model "x" is not in the catalog' });
  });

  it('says placed with no rejections once the model has its replicas', async () => {
    const { p } = await plane();
    await addNode(p, 'n1', 1);
    await p.adminApp.inject({
      method: 'POST',
      url: '/api/v1/models?force=true',
      headers: auth,
      payload: model('fits', 1),
    });
    await p.reconciler.pass();
    const why = (await get(p, '/api/v1/explain-placement?model=fits')).json<Record<string, unknown>>();
    expect(why).toMatchObject({ model: 'fits', placed: true, min_replicas: 1, ready_replicas: 0 });
    expect(why.rejections, 'nothing was rejected').toBeUndefined();
    expect(why.summary, 'placed but not ready: the pending replica is the cause').toEqual([
      'model fits is not running yet: 1 replica is placed and not ready',
      expect.stringMatching(/^replica \S+ is placed on n1 and waits for its agent to start it$/),
    ]);
  });

  it('puts a drained node into a pass at once and keeps the replica until a replacement exists', async () => {
    const { p } = await plane();
    await addNode(p, 'n1', 1);
    await p.adminApp.inject({
      method: 'POST',
      url: '/api/v1/models?force=true',
      headers: auth,
      payload: model('m', 1),
    });
    await p.reconciler.pass();
    const res = await p.adminApp.inject({
      method: 'POST',
      url: '/api/v1/nodes/n1/state',
      headers: auth,
      payload: { state: 'drain' },
    });
    expect(res.statusCode).toBe(200);
    await p.reconciler.pass();
    expect(
      p.reconciler.replicas().map((r) => r.state),
      'no room elsewhere: the old replica stays',
    ).toEqual(['pending']);
    const summary = await get(p, '/api/v1/summary');
    expect(summary.json<{ attention: string[] }>().attention.join('\n')).toContain('stays on draining node n1');
    const [node] = (await get(p, '/api/v1/nodes')).json<{ id: string; drain_blocked?: string[] }[]>();
    expect(node!.drain_blocked?.join('\n'), 'the node view says why its drain is not finishing').toContain(
      'stays on draining node n1',
    );
  });

  it("delivers shards in heartbeat answers and takes the agent's shard report back through the agent API", async () => {
    const { p } = await plane();
    const joined = await p.agentApp.inject({
      method: 'POST',
      url: '/agent/v1/join',
      payload: { join_token: JOIN, node_id: 'n1' },
    });
    const { credential } = joined.json<{ credential: string }>();
    const beat = (body: Record<string, unknown>) =>
      p.agentApp.inject({
        method: 'POST',
        url: '/agent/v1/heartbeat',
        headers: { authorization: `Bearer ${credential}` },
        payload: { node_id: 'n1', ...body },
      });
    // Engines reached at 10.1.0.1 on ports 30000-30099: the control plane routes only to endpoints the node declares so.
    const report = {
      gpus: [{ index: 0, class: 'h100-80gb', problems: [] }],
      engines: [{ name: 'vllm' }],
      engine_host: '10.1.0.1',
      port_range: { first: 30000, last: 30099 },
    };
    expect((await beat({ report })).statusCode).toBe(200);
    await p.adminApp.inject({
      method: 'POST',
      url: '/api/v1/models?force=true',
      headers: auth,
      payload: model('m', 1),
    });
    await p.reconciler.pass();

    const answer = (await beat({ report })).json<{
      shards: { shard_id: string; replica_id: string; model: string; gpu_indices: number[] }[];
    }>();
    expect(answer.shards).toHaveLength(1);
    const [shard] = answer.shards;
    expect(shard).toMatchObject({ model: 'm', gpu_indices: [0] });

    await beat({
      report,
      shards: [
        { shard_id: shard!.shard_id, replica_id: shard!.replica_id, state: 'ready', endpoint: 'http://10.1.0.1:30000' },
      ],
    });
    await p.reconciler.pass();
    const [view] = (await get(p, '/api/v1/replicas')).json<{ state: string; endpoint: string }[]>();
    expect(view).toMatchObject({ state: 'ready', endpoint: 'http://10.1.0.1:30000' });
    expect((await get(p, '/api/v1/models')).json()).toMatchObject([
      { name: 'm', ready_replicas: 1, total_replicas: 1 },
    ]);
    expect(view, 'no load reported yet: the field is absent, not zeros').not.toHaveProperty('load');

    // The agent read the engine's metrics 300 ms before this heartbeat.
    const load = { running: 4, waiting: 3, kv_usage: 0.5, age_ms: 300 };
    await beat({
      report,
      shards: [
        {
          shard_id: shard!.shard_id,
          replica_id: shard!.replica_id,
          state: 'ready',
          endpoint: 'http://10.1.0.1:30000',
          load,
        },
      ],
    });
    const [loaded] = (await get(p, '/api/v1/replicas')).json<Record<string, unknown>[]>();
    expect(loaded?.load, 'the engine queue and KV use, with the sample age').toEqual({
      running: 4,
      waiting: 3,
      kv_usage: 0.5,
      age_ms: 300,
    });
    expect(p.reconciler.view.ready('m')[0]?.load, 'and the router reads the same sample').toMatchObject({
      running: 4,
      waiting: 3,
      kvUsage: 0.5,
    });

    // The prefix cache's hit rate rides the same sample to the view; one out of range drops itself, not the load.
    const shardWith = (extra: Record<string, unknown>) => ({
      shard_id: shard!.shard_id,
      replica_id: shard!.replica_id,
      state: 'ready',
      endpoint: 'http://10.1.0.1:30000',
      load: { ...load, age_ms: 0, ...extra },
    });
    await beat({ report, shards: [shardWith({ cache_hit_rate: 0.75 })] });
    const [hit] = (await get(p, '/api/v1/replicas')).json<{ load?: Record<string, unknown> }[]>();
    expect(hit?.load, 'the hit rate as the agent sent it').toMatchObject({ running: 4, cache_hit_rate: 0.75 });
    await beat({ report, shards: [shardWith({ cache_hit_rate: 1.5 })] });
    const [bad] = (await get(p, '/api/v1/replicas')).json<{ load?: Record<string, unknown> }[]>();
    expect(bad?.load, 'the load is kept').toMatchObject({ running: 4, kv_usage: 0.5 });
    expect(bad?.load, 'a rate above 1 is not shown').not.toHaveProperty('cache_hit_rate');
  });
});
