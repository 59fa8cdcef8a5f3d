// Attack replays for API keys and for what nodes report, against a real
// control plane with a real simulated agent over loopback, and a node forged
// with raw HTTP and the join token. Each test names the attack it replays,
// asserts the refusal, and asserts that nothing changed: the forbidden model
// generated nothing, the refused requests never reached an engine, the
// "internal" server a forged node pointed at received nothing.
import { mkdirSync, mkdtempSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CollectSummary, ReplicaView } from '../../src/api/index.js';
import { NodeProber } from '../../src/agent/probe/index.js';
import { killEnginesOf, startControl, startLlmgw, stopAll } from '../support/processes.js';
import { waitFor } from '../support/wait.js';

const JOIN = 'e2e-join-token-security-01234567';
const ADMIN = 'e2e-admin-token-security-0123456';
const admin = { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json', 'x-llmgw-actor': 'e2e-security' };
const MAX_HELD_PER_KEY = 2;

let dir = '';
let adminUrl = '';
let clientUrl = '';
let agentUrl = '';
const stateDirs: string[] = [];
const servers: Server[] = [];

async function api<T>(method: string, path: string, body?: unknown): Promise<{ status: number; body: T }> {
  const res = await fetch(`${adminUrl}${path}`, {
    method,
    headers: admin,
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: res.status, body: (await res.json()) as T };
}

async function createKey(def: Record<string, unknown>): Promise<string> {
  const res = await api<{ secret: string }>('POST', '/api/v1/keys', def);
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body.secret;
}

function chat(key: string, body: Record<string, unknown>, signal?: AbortSignal): Promise<Response> {
  return fetch(`${clientUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ messages: [{ role: 'user', content: 'hi' }], ...body }),
    ...(signal ? { signal } : {}),
  });
}

async function readyReplica(model: string): Promise<ReplicaView> {
  return waitFor(
    `a ready replica of ${model}`,
    async () =>
      (await api<ReplicaView[]>('GET', `/api/v1/replicas?model=${model}`)).body.find((r) => r.state === 'ready'),
    60_000,
  );
}

/** A value from the control plane's /metrics (0 when the series does not exist yet). */
async function metric(name: string, label: string): Promise<number> {
  const text = await (await fetch(`${adminUrl}/metrics`, { headers: admin })).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name}{`) && l.includes(label));
  return line ? Number(line.split(' ').pop()) : 0;
}

/** A sim engine's count of tokens it generated, from its own /metrics. */
async function generated(endpoint: string): Promise<number> {
  const text = await (await fetch(`${endpoint}/metrics`)).text();
  return Number(
    text
      .split('\n')
      .find((l) => l.startsWith('vllm:generation_tokens_total'))
      ?.split(' ')
      .pop() ?? 'NaN',
  );
}

/** A loopback HTTP server that records every request it gets; `answer` writes the reply (default 200 {}). */
async function listen(
  answer?: (req: IncomingMessage, body: string) => { status: number; body: unknown },
): Promise<{ port: number; seen: string[] }> {
  const seen: string[] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      seen.push(`${req.method} ${req.url}`);
      const a = answer?.(req, body) ?? { status: 200, body: {} };
      res.writeHead(a.status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(a.body));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  servers.push(server);
  return { port: (server.address() as AddressInfo).port, seen };
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'llmgw-e2e-security-'));
  const control = await startControl([
    '--store',
    `sqlite:${join(dir, 'db')}`,
    '--join-token',
    JOIN,
    '--admin-token',
    ADMIN,
    '--reconcile-interval',
    '300ms',
    '--cold-start-timeout',
    '60s',
    '--max-held-per-key',
    String(MAX_HELD_PER_KEY),
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
    '26000-26099',
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
      ...def,
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
  };
  const real = { engine: 'sim', pool: 'pool=real' };
  await add({ name: 'secret-model', scaling: { min: 1 }, profiles: [real] });
  // Needs 8 GPUs on a CPU-only fleet: never placed, so only its fallback could answer.
  await add(
    { name: 'public-model', fallbacks: ['secret-model'], profiles: [{ engine: 'vllm', gpus: 8, gpu_memory_gb: 80 }] },
    true,
  );
  // Five tokens a second: a burst of requests is all admitted before the first ends.
  await add({ name: 'slow-model', scaling: { min: 1 }, profiles: [{ ...real, args: ['--tokens-per-second', '5'] }] });
  // At zero, and its engine takes minutes to load: requests for it wait.
  await add({
    name: 'cold-model',
    scaling: { min: 0, max: 1 },
    profiles: [{ ...real, args: ['--startup-delay-ms', '600000'] }],
  });
  // Only a forged node labelled pool=forged can run it.
  await add({ name: 'forged-model', scaling: { min: 1 }, profiles: [{ engine: 'sim', pool: 'pool=forged' }] }, true);
  await readyReplica('secret-model');
  await readyReplica('slow-model');
}, 120_000);

afterAll(async () => {
  await stopAll();
  killEnginesOf(stateDirs);
  for (const s of servers) s.close();
});

describe('API keys hold', () => {
  it('a key limited to public-model is not served by its fallback secret-model', async () => {
    // Attack: allowed_models bypassed through fallbacks. public-model has no replica; its fallback secret-model is
    // ready; a key limited to public-model asked for public-model and got secret-model's answer.
    const secret = await readyReplica('secret-model');
    const before = await generated(secret.endpoint!);
    const limited = await createKey({ name: 'public-only', allowed_models: ['public-model'] });
    const res = await chat(limited, { model: 'public-model', max_tokens: 4 });
    expect(res.status, 'answered as without fallbacks: 503, never 200 from secret-model').toBe(503);
    expect(res.headers.get('x-llmgw-fallback-skipped'), 'the answer names the skipped fallback').toBe('secret-model');
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('LLMGW_NO_REPLICA');
    expect(await generated(secret.endpoint!), 'secret-model generated nothing').toBe(before);
    expect(
      await metric('llmgw_router_fallbacks_total', 'fallback="secret-model"'),
      'no request was served by the fallback',
    ).toBe(0);

    // The fallback still works for a key that may use it: the refusal above is the key's, not a broken fallback.
    const everything = await createKey({ name: 'everything' });
    const served = await chat(everything, { model: 'public-model', max_tokens: 4 });
    expect(served.status).toBe(200);
    expect(((await served.json()) as { model: string }).model).toBe('secret-model');
  });

  it('a concurrent burst past the token balance: exactly the excess is refused', async () => {
    // Attack: the TPM limit admitted every concurrent request while the balance was above zero, so a burst of N
    // requests with max_tokens each spent N times what the key may use in a minute.
    const key = await createKey({ name: 'tpm', tokens_per_minute: 35 });
    const slow = await readyReplica('slow-model');
    const before = await generated(slow.endpoint!);
    // Each reserves max_tokens (10) plus the prompt's least size (0 for "hi"): 3 of 35.
    const answers = await Promise.all(
      Array.from({ length: 6 }, () => chat(key, { model: 'slow-model', max_tokens: 10 })),
    );
    const statuses = answers.map((r) => r.status).sort();
    expect(statuses, 'three reservations of 10 fit in 35; the other three are refused').toEqual([
      200, 200, 200, 429, 429, 429,
    ]);
    const refused = answers.find((r) => r.status === 429)!;
    expect(((await refused.json()) as { error: unknown }).error).toMatchObject({
      type: 'rate_limit_error',
      code: 'rate_limit_exceeded',
    });
    expect(refused.headers.get('x-ratelimit-limit-tokens')).toBe('35');
    expect(Number(refused.headers.get('retry-after')), 'Retry-After in whole seconds').toBeGreaterThanOrEqual(1);
    for (const ok of answers.filter((r) => r.status === 200)) await ok.text();
    expect(await generated(slow.endpoint!), 'only the admitted three generated tokens').toBe(before + 30);
  });

  it(`holds at most max_held_per_key (${MAX_HELD_PER_KEY}) requests of one key for a cold model`, async () => {
    // Attack: requests held for a cold model were unbounded per key: one key could keep any number of requests
    // (sockets, timers) waiting for the whole cold-start timeout.
    const key = await createKey({ name: 'waits' });
    const abort = new AbortController();
    const held = Array.from({ length: MAX_HELD_PER_KEY }, () =>
      chat(key, { model: 'cold-model', max_tokens: 1 }, abort.signal).catch(() => null),
    );
    try {
      await waitFor('the requests held', async () =>
        (await metric('llmgw_router_held_requests', 'model="cold-model"')) === MAX_HELD_PER_KEY ? true : undefined,
      );
      const next = await chat(key, { model: 'cold-model', max_tokens: 1 });
      expect(next.status).toBe(429);
      const body = (await next.json()) as { error: { message: string; type: string } };
      expect(body.error.type).toBe('rate_limit_error');
      expect(body.error.message, 'names the limit and the key to raise').toContain('max_held_per_key');
      expect(await metric('llmgw_router_held_requests', 'model="cold-model"'), 'the refused request was not held').toBe(
        MAX_HELD_PER_KEY,
      );
    } finally {
      abort.abort();
      await Promise.all(held);
    }
  });
});

describe('the control plane checks what nodes report', () => {
  it('a forged node cannot point the router at an endpoint with a path, outside its ports, or on another host, nor collect and logs at its mgmt_addr', async () => {
    // Attack: a node's report was believed blindly. A shard endpoint with a path (http://127.0.0.1:9/internal) made
    // the router POST clients' prompts there and relay the answer; a free-form mgmt_addr sent collect and log calls,
    // with the node's bearer, wherever it said. Replayed with a node forged from the join token alone.
    const internal = await listen();
    const engine = await listen((_req, body) => ({
      status: 200,
      body: {
        id: 'c1',
        object: 'chat.completion',
        model: (JSON.parse(body) as { model: string }).model,
        choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }],
        usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
      },
    }));
    const range = { first: engine.port, last: engine.port };
    const joined = await fetch(`${agentUrl}/agent/v1/join`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        join_token: JOIN,
        node_id: 'forged',
        labels: { pool: 'forged' },
        agent_version: 'forged',
        protocol_version: 1,
        mgmt_addr: `127.0.0.1:${internal.port}/internal`,
        engine_host: '127.0.0.1',
        port_range: range,
      }),
    });
    expect(joined.status, 'the join itself is allowed: the token is right').toBe(200);
    const { credential } = (await joined.json()) as { credential: string };
    const cacheDir = join(dir, 'forged-cache');
    const orphan = 'a'.repeat(64);
    const report = {
      ...(await new NodeProber({
        cacheDir,
        modelDirs: [],
        fabrics: [],
        simulate: 'gpus=0,ram=16g',
        simulateSeed: 'forged',
      }).probe()),
      engine_host: '127.0.0.1',
      port_range: range,
      // An orphaned cache entry, so collect has something to ask this node to remove.
      weights: [{ path: join(cacheDir, orphan), kind: 'cache', cache_name: orphan, size_bytes: 1 }],
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
    const beating = setInterval(() => void beat().catch(() => undefined), 250);
    try {
      const shard = await waitFor('a shard assigned to the forged node', async () => {
        await beat();
        return assigned[0];
      });
      const reportEndpoint = (endpoint: string) => {
        shards = [{ shard_id: shard.shard_id, replica_id: shard.replica_id, state: 'ready', endpoint }];
      };
      const key = await createKey({ name: 'forged-client' });
      const refusedEndpoints = [
        ['with a path', `http://127.0.0.1:${internal.port}/internal`, /not http:\/\/host:port/],
        ['outside its port range', `http://127.0.0.1:${internal.port}`, /outside the node's engine port range/],
        ['on another host', `http://192.0.2.7:${engine.port}`, /not the node's own address/],
      ] as const;
      for (const [what, endpoint, reason] of refusedEndpoints) {
        reportEndpoint(endpoint);
        const replica = await waitFor(`the endpoint ${what} refused`, async () => {
          const r = (await api<ReplicaView[]>('GET', '/api/v1/replicas?model=forged-model')).body.find(
            (x) => x.id === shard.replica_id,
          );
          return r?.shards[0]?.error && reason.test(r.shards[0].error) ? r : undefined;
        });
        expect(replica.endpoint, `no endpoint to route to (${what})`).toBeUndefined();
        // The request finds no replica to send to and waits for one; it is never sent.
        const abort = new AbortController();
        const pending = chat(key, { model: 'forged-model', max_tokens: 1 }, abort.signal).catch(() => null);
        await waitFor('the request held', async () =>
          (await metric('llmgw_router_held_requests', 'model="forged-model"')) === 1 ? true : undefined,
        );
        abort.abort();
        expect(await pending, `no answer came from anywhere (${what})`).toBeNull();
        await waitFor('the hold to end', async () =>
          (await metric('llmgw_router_held_requests', 'model="forged-model"')) === 0 ? true : undefined,
        );
      }

      // The forged node's own address, in its range, is taken: the refusals above were the checks, not a broken setup.
      reportEndpoint(`http://127.0.0.1:${engine.port}`);
      await waitFor('the forged replica routable', async () =>
        (await api<ReplicaView[]>('GET', '/api/v1/replicas?model=forged-model')).body.find((x) => x.endpoint)
          ? true
          : undefined,
      );
      expect((await chat(key, { model: 'forged-model', max_tokens: 1 })).status).toBe(200);
      expect(engine.seen).toEqual(['POST /v1/chat/completions']);

      const logs = await api<{ error: string }>('GET', `/api/v1/replicas/${shard.replica_id}/log?shard=0`);
      expect(logs.status, 'logs refuse to call the node').toBeGreaterThanOrEqual(400);
      expect(logs.body.error, 'and say why').toMatch(/refused the node's mgmt_addr .* is not host:port/);
      const collected = await api<CollectSummary>('POST', '/api/v1/weights/collect?node=forged', {});
      expect(collected.status).toBe(200);
      expect(collected.body.nodes[0]?.unreachable, 'collect says why it did not call the node').toMatch(
        /refused the node's mgmt_addr/,
      );
      expect(internal.seen, 'the internal server received nothing: no prompt, no collect, no log call').toEqual([]);
    } finally {
      clearInterval(beating);
    }
    const nodes = (await api<{ id: string; liveness: string }[]>('GET', '/api/v1/nodes')).body;
    expect(nodes.find((n) => n.id === 'real')?.liveness, 'the real node is still up').toBe('up');
  });
});
