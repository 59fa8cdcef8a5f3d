import { describe, expect, it } from 'vitest';
import { inProcessPlanes } from '../../../test/support/control-plane.js';

const TOKEN = 'admin-token-for-tests-0123456789';
const plane = inProcessPlanes({ admin_token: TOKEN });

const auth = { authorization: `Bearer ${TOKEN}` };
const model = { name: 'demo', source: 'hf://org/demo', profiles: [{ engine: 'sim' }] };

describe('admin API: models', () => {
  it('adds, lists and removes a model, recording who did it', async () => {
    const p = await plane();
    const added = await p.adminApp.inject({
      method: 'POST',
      url: '/api/v1/models?force=true',
      headers: { ...auth, 'x-llmgw-actor': 'alice@laptop' },
      payload: model,
    });
    expect(added.statusCode).toBe(200);
    expect(added.json()).toEqual({ added: 'demo' });

    const list = await p.adminApp.inject({ method: 'GET', url: '/api/v1/models', headers: auth });
    expect(list.json()).toEqual([
      {
        name: 'demo',
        source: 'hf://org/demo',
        min_replicas: 1,
        max_replicas: 1,
        ready_replicas: 0,
        total_replicas: 0,
        profiles: ['sim'],
        endpoints: ['chat', 'completions', 'embeddings', 'rerank', 'score', 'transcriptions', 'tokenize'],
        origin: 'store',
      },
    ]);

    const removed = await p.adminApp.inject({ method: 'DELETE', url: '/api/v1/models/demo', headers: auth });
    expect(removed.json()).toEqual({ removed: 'demo' });
    const audit = await p.store!.audit.list({ target: 'demo' });
    // The actor is who the request proved to be; X-Llmgw-Actor is only a label beside it.
    expect(audit.map((a) => `${a.action} by ${a.actor} as ${a.actorLabel}`)).toEqual([
      'model.remove by admin-token as null',
      'model.add by admin-token as alice@laptop',
    ]);
  });

  it('answers a bad definition with 400 and every problem', async () => {
    const p = await plane();
    const res = await p.adminApp.inject({
      method: 'POST',
      url: '/api/v1/models?force=true',
      headers: auth,
      payload: { name: 'x', source: 'ftp://a', profiles: [] },
    });
    expect(res.statusCode).toBe(400);
    const { error } = res.json<{ error: string }>();
    expect(error).toContain('source scheme "ftp:" is not supported');
    expect(error).toContain('a model needs at least one profile');
  });

  it('answers bad JSON with the seed wording', async () => {
    const p = await plane();
    const res = await p.adminApp.inject({
      method: 'POST',
      url: '/api/v1/models?force=true',
      headers: { ...auth, 'content-type': 'application/json' },
      payload: '{"name": "x",',
    });
    expect(res.statusCode).toBe(400);
    expect(res.json<{ error: string }>().error).toMatch(/^the model definition is not valid JSON: /);
  });

  it('refuses a body over 1 MiB with 413 and stores nothing', async () => {
    const p = await plane();
    const big = { ...model, name: 'big', args: ['x'.repeat(1 << 20)] };
    const res = await p.adminApp.inject({
      method: 'POST',
      url: '/api/v1/models?force=true',
      headers: auth,
      payload: big,
    });
    expect(res.statusCode).toBe(413);
    expect(res.json<{ error: string }>().error).toContain('larger than 1048576 bytes');
    expect(await p.store!.models.list()).toEqual([]);
  });

  it('answers 400 for removing a model that is not there, and for a model others fall back to', async () => {
    const p = await plane();
    const missing = await p.adminApp.inject({ method: 'DELETE', url: '/api/v1/models/ghost', headers: auth });
    expect(missing.statusCode).toBe(404);
    expect(missing.json()).toEqual({ error: 'no model named "ghost"' });
    await p.adminApp.inject({ method: 'POST', url: '/api/v1/models?force=true', headers: auth, payload: model });
    await p.adminApp.inject({
      method: 'POST',
      url: '/api/v1/models?force=true',
      headers: auth,
      payload: { ...model, name: 'big', fallbacks: ['demo'] },
    });
    const inUse = await p.adminApp.inject({ method: 'DELETE', url: '/api/v1/models/demo', headers: auth });
    expect(inUse.statusCode).toBe(400);
    expect(inUse.json<{ error: string }>().error).toContain('is a fallback of "big"');
  });

  it('answers 501 when the control plane has no store', async () => {
    const p = await plane({ store: 'none' });
    const res = await p.adminApp.inject({
      method: 'POST',
      url: '/api/v1/models?force=true',
      headers: auth,
      payload: model,
    });
    expect(res.statusCode).toBe(501);
    expect(res.json()).toEqual({
      error: 'this control plane has no store, so a model added here would not survive a restart',
    });
    const summary = await p.adminApp.inject({ method: 'GET', url: '/api/v1/summary', headers: auth });
    expect(summary.json<{ store: boolean }>().store).toBe(false);
  });
});

describe('admin API: a model no node could ever run', () => {
  it('is refused with the explanation unless forced', async () => {
    const p = await plane({ join_token: 'join-token-for-tests-0123456789' });
    const empty = await p.adminApp.inject({ method: 'POST', url: '/api/v1/models', headers: auth, payload: model });
    expect(empty.statusCode).toBe(400);
    expect(empty.json<{ error: string }>().error).toContain('no node has joined yet');

    await p.inventory.join({
      id: 'cpu-1',
      hostname: 'cpu-1',
      mgmtAddr: null,
      labels: {},
      agentVersion: '1',
      protocolVersion: 1,
    });
    p.inventory.heartbeat(p.inventory.get('cpu-1')!, {
      report: { gpus: [], memory_total_bytes: 2 ** 34, engines: [{ name: 'sim' }, { name: 'builtin' }], disks: [] },
    });
    const gpuModel = {
      name: 'big',
      source: 'hf://org/big',
      profiles: [{ engine: 'vllm', gpus: 2, gpu_classes: ['h100-80gb'] }],
    };
    const refused = await p.adminApp.inject({
      method: 'POST',
      url: '/api/v1/models',
      headers: auth,
      payload: gpuModel,
    });
    expect(refused.statusCode).toBe(400);
    const { error } = refused.json<{ error: string }>();
    expect(error).toContain('?force=true');
    expect(error).toMatch(/0\/1 nodes fit profile vllm/);

    const cpu = await p.adminApp.inject({ method: 'POST', url: '/api/v1/models', headers: auth, payload: model });
    expect(cpu.statusCode, 'a model the CPU node can run is added without force').toBe(200);
    const forced = await p.adminApp.inject({
      method: 'POST',
      url: '/api/v1/models?force=true',
      headers: auth,
      payload: gpuModel,
    });
    expect(forced.statusCode).toBe(200);
  });
});

describe('admin API: the listener', () => {
  it('enforces the admin token without echoing it', async () => {
    const p = await plane();
    const none = await p.adminApp.inject({ method: 'GET', url: '/api/v1/models' });
    expect(none.statusCode).toBe(401);
    expect(none.json<{ error: string }>().error).toContain('Authorization: Bearer');
    const wrong = await p.adminApp.inject({
      method: 'GET',
      url: '/api/v1/models',
      headers: { authorization: 'Bearer not-the-token' },
    });
    expect(wrong.statusCode).toBe(401);
    expect(wrong.body).not.toContain('not-the-token');
    expect(wrong.body).not.toContain(TOKEN);
    const ok = await p.adminApp.inject({ method: 'GET', url: '/api/v1/models', headers: auth });
    expect(ok.statusCode).toBe(200);
  });

  it('needs no token on loopback when none is configured', async () => {
    const p = await plane({ admin_token: undefined });
    const res = await p.adminApp.inject({ method: 'GET', url: '/api/v1/summary' });
    expect(res.statusCode).toBe(200);
  });

  it('answers unknown routes with 404 JSON and wrong verbs with 405 naming the right ones', async () => {
    const p = await plane();
    const missing = await p.adminApp.inject({ method: 'GET', url: '/api/v1/nope', headers: auth });
    expect(missing.statusCode).toBe(404);
    expect(missing.json()).toEqual({ error: 'no route GET /api/v1/nope' });
    const verb = await p.adminApp.inject({ method: 'PUT', url: '/api/v1/models', headers: auth });
    expect(verb.statusCode).toBe(405);
    expect(verb.headers.allow).toBe('GET, POST');
    expect(verb.json<{ error: string }>().error).toContain('use GET or POST');
  });

  it('summarises what it knows', async () => {
    const p = await plane();
    await p.adminApp.inject({ method: 'POST', url: '/api/v1/models?force=true', headers: auth, payload: model });
    const res = await p.adminApp.inject({ method: 'GET', url: '/api/v1/summary', headers: auth });
    expect(res.json()).toMatchObject({
      models: { total: 1, from_file: 0, stored: 1, not_placed: ['demo'] },
      store: true,
    });
  });
});
