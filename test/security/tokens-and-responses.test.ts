// Attack replays for what one API key can take from a shared gateway through
// the router: more tokens in one request than its limit allows, another key's
// kept Responses through an engine's id, and a stream that outlives the
// key's revocation. A real control plane on SQLite, a real simulated agent,
// and one node forged with raw HTTP and the join token whose "engine" is a
// loopback server answering every Responses request with one id, as an engine
// that numbers its answers (or two engines with the same numbering) would.
import { mkdirSync, mkdtempSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ReplicaView } from '../../src/api/index.js';
import { NodeProber } from '../../src/agent/probe/index.js';
import { startSimAgent, JOIN as FLEET_JOIN, ADMIN as FLEET_ADMIN, adminHeaders, weightsDir } from '../support/fleet.js';
import { createTestDatabase, describePostgres, type TestDatabase } from '../support/postgres.js';
import { killEnginesOf, startControl, startLlmgw, stopAll } from '../support/processes.js';
import { waitFor } from '../support/wait.js';

const JOIN = 'e2e-join-token-tokens-responses-0123';
const ADMIN = 'e2e-admin-token-tokens-responses-012';
const admin = {
  authorization: `Bearer ${ADMIN}`,
  'content-type': 'application/json',
  'x-llmgw-actor': 'e2e-tokens-responses',
};
/** The id the forged engine gives every answer, to every key. */
const ENGINE_ID = 'resp_engine_numbers_its_answers_1';

let dir = '';
let adminUrl = '';
let clientUrl = '';
let agentUrl = '';
const stateDirs: string[] = [];
const servers: Server[] = [];
let beating: NodeJS.Timeout | null = null;

async function api<T>(method: string, path: string, body?: unknown): Promise<{ status: number; body: T }> {
  const res = await fetch(`${adminUrl}${path}`, {
    method,
    headers: admin,
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: res.status, body: (await res.json()) as T };
}

async function createKey(def: Record<string, unknown>): Promise<{ id: string; secret: string }> {
  const res = await api<{ id: string; secret: string }>('POST', '/api/v1/keys', def);
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body;
}

function post(key: string, path: string, body: Record<string, unknown>, signal?: AbortSignal): Promise<Response> {
  return fetch(`${clientUrl}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
    ...(signal ? { signal } : {}),
  });
}

async function readyReplica(model: string): Promise<ReplicaView> {
  return waitFor(
    `a ready replica of ${model}`,
    async () =>
      (await api<ReplicaView[]>('GET', `/api/v1/replicas?model=${model}`)).body.find(
        (r) => r.state === 'ready' && r.endpoint,
      ),
    60_000,
  );
}

/** A sim engine's count of tokens it generated, from its own /metrics. */
async function engineCounts(endpoint: string): Promise<{ generated: number }> {
  const text = await (await fetch(`${endpoint}/metrics`)).text();
  const sum = (prefix: string) =>
    text
      .split('\n')
      .filter((l) => l.startsWith(prefix))
      .reduce((n, l) => n + Number(l.split(' ').pop()), 0);
  return { generated: sum('vllm:generation_tokens_total') };
}

/** The forged engine: every Responses answer has ENGINE_ID, and says which conversation it answered. */
async function collidingEngine(): Promise<{ port: number; inputs: string[] }> {
  const inputs: string[] = [];
  const server = createServer((req, res) => {
    let raw = '';
    req.on('data', (c: Buffer) => (raw += c.toString('utf8')));
    req.on('end', () => {
      const body = JSON.parse(raw || '{}') as { input?: unknown; model?: string };
      const input = JSON.stringify(body.input ?? '');
      inputs.push(input);
      const text = input.includes('from A') ? 'the answer kept for key A' : 'the answer for key B';
      const response = {
        id: ENGINE_ID,
        object: 'response',
        created_at: 1,
        status: 'completed',
        model: body.model,
        output: [
          {
            id: 'msg_1',
            type: 'message',
            role: 'assistant',
            status: 'completed',
            content: [{ type: 'output_text', text, annotations: [] }],
          },
        ],
        usage: { input_tokens: 1, output_tokens: 1, total_tokens: 2 },
      };
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(response));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  servers.push(server);
  return { port: (server.address() as AddressInfo).port, inputs };
}

/** Joins a node by raw HTTP with the join token, and reports the replica assigned to it ready at `port`. */
async function forgedNode(port: number): Promise<void> {
  const range = { first: port, last: port };
  const joined = await fetch(`${agentUrl}/agent/v1/join`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      join_token: JOIN,
      node_id: 'forged',
      labels: { pool: 'forged' },
      agent_version: 'forged',
      protocol_version: 1,
      engine_host: '127.0.0.1',
      port_range: range,
    }),
  });
  expect(joined.status, await joined.clone().text()).toBe(200);
  const { credential } = (await joined.json()) as { credential: string };
  const report = {
    ...(await new NodeProber({
      cacheDir: join(dir, 'forged-cache'),
      modelDirs: [],
      fabrics: [],
      simulate: 'gpus=0,ram=16g',
      simulateSeed: 'forged',
    }).probe()),
    engine_host: '127.0.0.1',
    port_range: range,
  };
  let shards: Record<string, unknown>[] = [];
  let assigned: { shard_id: string; replica_id: string }[] = [];
  const beat = async () => {
    const res = await fetch(`${agentUrl}/agent/v1/heartbeat`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${credential}` },
      body: JSON.stringify({ node_id: 'forged', protocol_version: 1, report, shards }),
    });
    if (res.status === 200) assigned = ((await res.json()) as { shards: typeof assigned }).shards;
  };
  beating = setInterval(() => void beat().catch(() => undefined), 250);
  const shard = await waitFor('a shard assigned to the forged node', async () => {
    await beat();
    return assigned[0];
  });
  shards = [
    { shard_id: shard.shard_id, replica_id: shard.replica_id, state: 'ready', endpoint: `http://127.0.0.1:${port}` },
  ];
  await beat();
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'llmgw-e2e-tokens-responses-'));
  const control = await startControl([
    '--store',
    `sqlite:${join(dir, 'db')}`,
    '--join-token',
    JOIN,
    '--admin-token',
    ADMIN,
    '--reconcile-interval',
    '300ms',
    '--log-level',
    'warn',
  ]);
  adminUrl = control.urls.admin;
  clientUrl = control.urls.client;
  agentUrl = control.urls.agent;
  const stateDir = join(dir, 'real');
  stateDirs.push(stateDir);
  startLlmgw([
    'agent',
    '--control',
    agentUrl,
    '--join-token',
    JOIN,
    '--node-id',
    'real',
    '--state-dir',
    stateDir,
    '--simulate',
    'gpus=0,ram=16g',
    '--labels',
    'pool=real',
    '--heartbeat-interval',
    '300ms',
    '--port-range',
    '26300-26399',
    '--log-level',
    'warn',
  ]);
  await waitFor('the real node up', async () =>
    (await api<{ liveness: string }[]>('GET', '/api/v1/nodes')).body.some((n) => n.liveness === 'up')
      ? true
      : undefined,
  );
  const weights = join(dir, 'weights');
  mkdirSync(weights);
  const add = async (def: Record<string, unknown>, force = false) => {
    const res = await api('POST', `/api/v1/models${force ? '?force=true' : ''}`, {
      source: `file://${weights}`,
      scaling: { min: 1 },
      ...def,
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
  };
  const real = { engine: 'sim', pool: 'pool=real' };
  await add({ name: 'tpm-model', profiles: [real] });
  // Twenty tokens a second: a stream of 2000 would run 100 s.
  await add({ name: 'slow-model', profiles: [{ ...real, args: ['--tokens-per-second', '20'] }] });
  // Only the forged node (pool=forged) runs it; the sim engine serves the Responses API natively, as the forged one does.
  await add({ name: 'collide-model', profiles: [{ engine: 'sim', pool: 'pool=forged' }] }, true);
  const engine = await collidingEngine();
  collide = engine;
  await forgedNode(engine.port);
  await readyReplica('tpm-model');
  await readyReplica('slow-model');
  await readyReplica('collide-model');
}, 120_000);

let collide: { port: number; inputs: string[] } = { port: 0, inputs: [] };

let sharedDb: TestDatabase | undefined;

afterAll(async () => {
  if (beating) clearInterval(beating);
  await stopAll();
  killEnginesOf(stateDirs);
  for (const s of servers) s.close();
  await sharedDb?.drop();
});

describe('one request cannot take more tokens than its key may use in a minute', () => {
  it('3000 tokens asked on a 50-token key: 429 naming both, on every API, and the engine sees nothing', async () => {
    // Attack: the reservation was capped at the key's per-minute figure, so a key with tokens_per_minute 50 got
    // 3,001 tokens in one request (max_tokens 3000): 60 times its limit in one burst.
    const key = await createKey({ name: 'fifty', tokens_per_minute: 50 });
    const replica = await readyReplica('tpm-model');
    const before = await engineCounts(replica.endpoint!);
    const prompt = [{ role: 'user', content: 'hi' }];
    const calls: [string, Record<string, unknown>][] = [
      ['/v1/chat/completions', { model: 'tpm-model', messages: prompt, max_tokens: 3000 }],
      ['/v1/completions', { model: 'tpm-model', prompt: 'hi', max_tokens: 3000 }],
      ['/v1/responses', { model: 'tpm-model', input: 'hi', max_output_tokens: 3000 }],
      ['/v1/messages', { model: 'tpm-model', messages: prompt, max_tokens: 3000 }],
    ];
    for (const [path, body] of calls) {
      const res = await post(key.secret, path, body);
      const text = await res.text();
      expect(res.status, `${path}: ${text}`).toBe(429);
      expect(res.headers.get('retry-after'), `${path}: no Retry-After promises a success`).toBeNull();
      const parsed = JSON.parse(text) as { type?: string; error: { type: string; message: string } };
      expect(parsed.error.type, path).toBe('rate_limit_error');
      if (path === '/v1/messages') expect(parsed.type, "Anthropic's shape").toBe('error');
      expect(parsed.error.message, `${path} names the key's limit`).toMatch(/\b50 tokens per minute\b/);
      expect(parsed.error.message, `${path} names what was asked`).toMatch(/\b3000\b/);
    }
    // The same key is served when it asks for what fits: the refusals were the limit, not a broken model.
    const fits = await post(key.secret, '/v1/chat/completions', {
      model: 'tpm-model',
      messages: prompt,
      max_tokens: 8,
    });
    expect(fits.status).toBe(200);
    await fits.text();
    const after = await engineCounts(replica.endpoint!);
    expect(
      after.generated - before.generated,
      'only the request that fits generated tokens: no refused one reached the engine',
    ).toBe(8);
  });
});

describe('kept Responses stay with the key that made them', () => {
  it("two keys answered under one engine id: A's kept answer is unchanged and B cannot read it", async () => {
    // Attack: responses.id was the only key and a write upserted key_id and body. An engine answering two keys with
    // one id made key B's answer overwrite key A's: A lost its conversation and B could read and continue it.
    const a = await createKey({ name: 'responses-a' });
    const b = await createKey({ name: 'responses-b' });
    const first = await post(a.secret, '/v1/responses', { model: 'collide-model', input: 'from A' });
    expect(first.status, await first.clone().text()).toBe(200);
    const answerA = (await first.json()) as { id: string };
    const second = await post(b.secret, '/v1/responses', { model: 'collide-model', input: 'from B' });
    expect(second.status).toBe(200);
    const answerB = (await second.json()) as { id: string };
    expect(collide.inputs.length, 'both went to the engine that gives one id').toBeGreaterThanOrEqual(2);

    const get = (key: string, id: string) =>
      fetch(`${clientUrl}/v1/responses/${id}`, { headers: { authorization: `Bearer ${key}` } });
    const keptA = await get(a.secret, answerA.id);
    expect(keptA.status, "A's kept answer is still A's").toBe(200);
    expect(JSON.stringify(await keptA.json())).toContain('the answer kept for key A');
    expect(answerA.id, "the router's own id, never the engine's").not.toBe(ENGINE_ID);
    expect(answerA.id).toMatch(/^resp_[0-9a-f]{32}$/);
    expect(answerB.id).not.toBe(answerA.id);
    for (const id of [answerA.id, ENGINE_ID]) {
      const stolen = await get(b.secret, id);
      if (id === answerA.id) expect(stolen.status, "B cannot read A's by A's id").toBe(404);
      else
        expect(JSON.stringify(await stolen.json()), "by the engine's id B reads its own, never A's").not.toContain(
          'key A',
        );
    }
    const continued = await post(b.secret, '/v1/responses', {
      model: 'collide-model',
      input: 'and then?',
      previous_response_id: answerA.id,
    });
    expect(continued.status, "B cannot continue A's conversation").toBe(400);
    expect(
      collide.inputs.some((i) => i.includes('from A') && i.includes('and then?')),
      "A's conversation never reached the engine for B",
    ).toBe(false);
  });
});

describe('revoking a key ends what it has running', () => {
  it('a stream of a key revoked mid-stream ends with an error event naming the revocation, on every API', async () => {
    // Attack: `ctl keys rm` stopped only new requests; a stream already running went on to its end (26 s after the
    // revocation in the report), though the README says clients "get 401 at once".
    const key = await createKey({ name: 'soon-revoked' });
    const streams: [string, Record<string, unknown>][] = [
      [
        '/v1/chat/completions',
        { model: 'slow-model', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2000, stream: true },
      ],
      [
        '/v1/messages',
        { model: 'slow-model', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2000, stream: true },
      ],
      ['/v1/responses', { model: 'slow-model', input: 'hi', max_output_tokens: 2000, stream: true }],
    ];
    // Bounded, so that the code before the fix fails here rather than after 100 s.
    const bound = AbortSignal.timeout(30_000);
    const running = await Promise.all(
      streams.map(async ([path, body]) => {
        const res = await post(key.secret, path, body, bound);
        expect(res.status, path).toBe(200);
        const reader = res.body!.getReader();
        const first = await reader.read();
        expect(first.done, `${path}: the stream began`).toBe(false);
        const rest = (async () => {
          let text = Buffer.from(first.value!).toString('utf8');
          for (;;) {
            const { done, value } = await reader.read().catch(() => ({ done: true, value: undefined }));
            if (done) return text;
            text += Buffer.from(value!).toString('utf8');
          }
        })();
        return { path, rest };
      }),
    );
    const revoked = await api('DELETE', `/api/v1/keys/${key.id}`);
    expect(revoked.status).toBe(200);
    for (const { path, rest } of running) {
      const text = await rest;
      const last = text.trimEnd().split(/\n\n/).at(-1) ?? '';
      expect(last, `${path}: the stream ends with an error event naming the revocation`).toMatch(/was revoked/);
      if (path === '/v1/messages') expect(last, `${path}: Anthropic's error event`).toMatch(/^event: error\n/);
      if (path === '/v1/chat/completions') expect(last).toMatch(/^data: \{"error":/);
    }
    const after = await post(key.secret, '/v1/chat/completions', {
      model: 'slow-model',
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 1,
    });
    expect(after.status, 'and new requests are refused').toBe(401);
  });
});

describePostgres('revoking a key on one control plane ends its streams on another', () => {
  it(
    'a stream through the second instance ends with an error event naming the revocation made on the first',
    { timeout: 180_000 },
    async () => {
      // Attack: a key revoked through one control plane kept streaming through another sharing the store: each
      // instance checked revocation only when a request arrived.
      sharedDb = await createTestDatabase();
      const args = [
        '--store',
        sharedDb.url,
        '--join-token',
        FLEET_JOIN,
        '--admin-token',
        FLEET_ADMIN,
        '--reconcile-interval',
        '500ms',
        '--log-level',
        'warn',
      ];
      const cps = [await startControl(args), await startControl(args)];
      const stateDir = join(dir, 'shared-h1');
      stateDirs.push(stateDir);
      startSimAgent(cps.map((c) => c.urls.agent).join(','), stateDir, 'shared-h1', { first: 26450, count: 40 });
      const adminCall = async <T>(
        cp: number,
        method: string,
        path: string,
        body?: unknown,
      ): Promise<{ status: number; body: T }> => {
        const res = await fetch(`${cps[cp]!.urls.admin}${path}`, {
          method,
          headers: adminHeaders,
          ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        });
        return { status: res.status, body: (await res.json()) as T };
      };
      await waitFor('the node up', async () =>
        (await adminCall<{ liveness: string }[]>(0, 'GET', '/api/v1/nodes')).body.some((n) => n.liveness === 'up')
          ? true
          : undefined,
      );
      const added = await adminCall(0, 'POST', '/api/v1/models', {
        name: 'shared-slow',
        source: weightsDir(join(dir, 'shared')),
        scaling: { min: 1 },
        profiles: [{ engine: 'sim', args: ['--tokens-per-second', '20'] }],
      });
      expect(added.status, JSON.stringify(added.body)).toBe(200);
      for (const cp of [0, 1]) {
        await waitFor(
          `a ready replica as instance ${cp} sees it`,
          async () =>
            (await adminCall<ReplicaView[]>(cp, 'GET', '/api/v1/replicas?model=shared-slow')).body.some(
              (r) => r.state === 'ready',
            )
              ? true
              : undefined,
          90_000,
        );
      }
      const made = await adminCall<{ id: string; secret: string }>(0, 'POST', '/api/v1/keys', {
        name: 'shared-revoked',
      });
      expect(made.status).toBe(201);
      const body = {
        model: 'shared-slow',
        messages: [{ role: 'user', content: 'hi' }],
        max_tokens: 2000,
        stream: true,
      };
      const res = await waitFor(
        'the key known to the second instance',
        async () => {
          const r = await fetch(`${cps[1]!.urls.client}/v1/chat/completions`, {
            method: 'POST',
            headers: { authorization: `Bearer ${made.body.secret}`, 'content-type': 'application/json' },
            body: JSON.stringify(body),
            signal: AbortSignal.timeout(60_000),
          });
          if (r.status === 200) return r;
          await r.text();
          return undefined;
        },
        10_000,
      );
      const reader = res.body!.getReader();
      expect((await reader.read()).done, 'the stream began').toBe(false);
      const revoked = await adminCall(0, 'DELETE', `/api/v1/keys/${made.body.id}`);
      expect(revoked.status).toBe(200);
      let text = '';
      for (;;) {
        const { done, value } = await reader.read().catch(() => ({ done: true, value: undefined }));
        if (done) break;
        text += Buffer.from(value!).toString('utf8');
      }
      expect(
        text.trimEnd().split(/\n\n/).at(-1),
        'the second instance ended the stream, naming the revocation',
      ).toMatch(/^data: \{"error":\{"message":"the API key \S+ was revoked/);
    },
  );
});
