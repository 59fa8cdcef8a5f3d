// The router as a user meets it: the official `openai` client against a real
// `llmgw control` process, with simulated agents running real sim engines.
// The in-process router tests (src/gateway/router.test.ts) cover each rule
// with stub directories; this file proves the rules hold when keys come from
// the store, replicas from the reconciler, and engines are processes that can
// be killed.
import { mkdirSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ReplicaView } from '../../src/api/index.js';
import { killEnginesOf, startControl, startLlmgw, stopAll, type RunningProcess } from '../support/processes.js';
import { waitFor } from '../support/wait.js';

const JOIN = 'e2e-join-token-router-0123456789';
const ADMIN = 'e2e-admin-token-router-012345678';
const admin = { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json', 'x-llmgw-actor': 'e2e-router' };
const stateDirs: string[] = [];
/** Agent processes by node id. */
const agents = new Map<string, RunningProcess>();

let adminUrl = '';
let clientUrl = '';
let dir = '';
/** A key for every model with no limits. */
let key = '';

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

function client(apiKey: string): OpenAI {
  // No retries in the client: every status the router sends must reach the test as it was sent.
  return new OpenAI({ baseURL: `${clientUrl}/v1`, apiKey, maxRetries: 0 });
}

async function ready(model: string, count: number): Promise<ReplicaView[]> {
  return waitFor(
    `${count} ready replica(s) of ${model}`,
    async () => {
      const { body } = await api<ReplicaView[]>('GET', `/api/v1/replicas?model=${model}`);
      const up = body.filter((r) => r.state === 'ready');
      return up.length >= count ? up : undefined;
    },
    60_000,
  );
}

/** The engine processes an agent runs, from the records its supervisor keeps: replica id → pid. */
function enginesOf(stateDir: string): Map<string, number> {
  const out = new Map<string, number>();
  const shards = join(stateDir, 'shards');
  for (const f of readdirSync(shards).filter((n) => n.endsWith('.json'))) {
    const rec = JSON.parse(readFileSync(join(shards, f), 'utf8')) as { pid: number; launch: { replicaId: string } };
    out.set(rec.launch.replicaId, rec.pid);
  }
  return out;
}

function enginePid(replicaId: string): number {
  for (const d of stateDirs) {
    const pid = enginesOf(d).get(replicaId);
    if (pid) return pid;
  }
  throw new Error(`no agent runs replica ${replicaId}`);
}

/** The sim's own gauge of requests it is generating, read from its /metrics. */
async function running(endpoint: string): Promise<number> {
  const text = await (await fetch(`${endpoint}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith('vllm:num_requests_running'));
  return Number(line?.split(' ').pop());
}

async function metric(name: string, label: string): Promise<number> {
  const text = await (await fetch(`${adminUrl}/metrics`, { headers: admin })).text();
  return text
    .split('\n')
    .filter((l) => l.startsWith(name) && l.includes(label))
    .reduce((sum, l) => sum + Number(l.split(' ').pop()), 0);
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'llmgw-e2e-router-'));
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
  for (const [i, id] of ['r1', 'r2'].entries()) {
    const stateDir = join(dir, id);
    stateDirs.push(stateDir);
    const first = 25000 + i * 100;
    agents.set(
      id,
      startLlmgw([
        'agent',
        '--control',
        control.urls.agent,
        '--join-token',
        JOIN,
        '--node-id',
        id,
        '--state-dir',
        stateDir,
        '--simulate',
        'gpus=0,ram=16g',
        '--heartbeat-interval',
        '300ms',
        '--port-range',
        `${first}-${first + 99}`,
        '--log-level',
        'warn',
      ]),
    );
  }
  await waitFor('two nodes up', async () => {
    const { body } = await api<{ liveness: string }[]>('GET', '/api/v1/nodes');
    return body.length === 2 && body.every((n) => n.liveness === 'up') ? true : undefined;
  });
  const weights = join(dir, 'weights');
  mkdirSync(weights);
  const source = `file://${weights}`;
  const add = async (def: Record<string, unknown>, force = false) => {
    const res = await api('POST', `/api/v1/models${force ? '?force=true' : ''}`, { source, ...def });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
  };
  await add({
    name: 'chat',
    aliases: ['c'],
    scaling: { min: 2 },
    profiles: [{ engine: 'sim', args: ['--ttft-ms', '1'] }],
  });
  // Five tokens a second: a stream stays open long enough to leave or to break.
  await add({ name: 'slow', scaling: { min: 1 }, profiles: [{ engine: 'sim', args: ['--tokens-per-second', '5'] }] });
  // Needs 8 GPUs on a CPU-only fleet: never placed, so one answers through its fallback and the other with 503.
  await add({ name: 'big', fallbacks: ['chat'], profiles: [{ engine: 'vllm', gpus: 8, gpu_memory_gb: 80 }] }, true);
  await add({ name: 'nowhere', profiles: [{ engine: 'vllm', gpus: 8, gpu_memory_gb: 80 }] }, true);
  key = (await createKey({ name: 'everything' })).secret;
  await ready('chat', 2);
  await ready('slow', 1);
}, 120_000);

afterAll(async () => {
  await stopAll();
  killEnginesOf(stateDirs);
});

describe('the router through the openai client, against a real control plane', () => {
  it('lists models with aliases, answers chat, a stream with usage, completions and embeddings, and an alias', async () => {
    const ai = client(key);
    const ids = (await ai.models.list()).data.map((m) => m.id).sort();
    expect(ids).toEqual(['big', 'c', 'chat', 'nowhere', 'slow']);

    const chat = await ai.chat.completions.create({
      model: 'chat',
      messages: [{ role: 'user', content: 'hello' }],
      max_tokens: 8,
    });
    expect(chat.choices[0]!.message.content!.length).toBeGreaterThan(0);
    expect(chat.usage!.completion_tokens).toBe(8);

    const stream = await ai.chat.completions.create({
      model: 'c',
      messages: [{ role: 'user', content: 'hello' }],
      max_tokens: 6,
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = '';
    let usage: OpenAI.CompletionUsage | null | undefined;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? '';
      if (chunk.usage) usage = chunk.usage;
    }
    expect(text.length).toBeGreaterThan(0);
    expect(usage?.completion_tokens).toBe(6);

    const completion = await ai.completions.create({ model: 'chat', prompt: 'once upon', max_tokens: 4 });
    expect(completion.usage!.completion_tokens).toBe(4);

    const emb = await ai.embeddings.create({ model: 'c', input: ['one', 'two'] });
    expect(emb.data).toHaveLength(2);
    expect(emb.data[0]!.embedding.length).toBeGreaterThan(0);
  });

  it('answers every refusal with the status and error class OpenAI would, saying what to fix', async () => {
    await expect(
      client('sk-not-a-key').chat.completions.create({ model: 'chat', messages: [{ role: 'user', content: 'x' }] }),
    ).rejects.toBeInstanceOf(OpenAI.AuthenticationError);

    const onlyChat = await createKey({ name: 'only-chat', allowed_models: ['chat'] });
    const forbidden = await client(onlyChat.secret)
      .chat.completions.create({ model: 'slow', messages: [{ role: 'user', content: 'x' }] })
      .catch((e: unknown) => e);
    expect(forbidden).toBeInstanceOf(OpenAI.PermissionDeniedError);
    expect((forbidden as Error).message).toContain('`chat`');
    // The same key lists only what it may use, and may use it.
    expect((await client(onlyChat.secret).models.list()).data.map((m) => m.id).sort()).toEqual(['c', 'chat']);
    await client(onlyChat.secret).chat.completions.create({
      model: 'chat',
      messages: [{ role: 'user', content: 'x' }],
      max_tokens: 1,
    });

    const unknown = await client(key)
      .chat.completions.create({ model: 'chta', messages: [{ role: 'user', content: 'x' }] })
      .catch((e: unknown) => e);
    expect(unknown).toBeInstanceOf(OpenAI.NotFoundError);
    expect((unknown as Error).message).toContain('Did you mean `chat`?');

    const redirect = await client(key)
      .chat.completions.create({
        model: 'chat',
        messages: [{ role: 'user', content: 'x' }],
        base_url: 'http://evil.example',
      } as never)
      .catch((e: unknown) => e);
    expect(redirect).toBeInstanceOf(OpenAI.BadRequestError);
    expect((redirect as InstanceType<typeof OpenAI.BadRequestError>).param).toBe('base_url');

    const tooLong = await client(key)
      .chat.completions.create({ model: 'chat', messages: [{ role: 'user', content: 'x' }], max_tokens: 1e9 })
      .catch((e: unknown) => e);
    expect(tooLong).toBeInstanceOf(OpenAI.BadRequestError);

    const huge = await client(key)
      .chat.completions.create({ model: 'chat', messages: [{ role: 'user', content: 'x'.repeat(9 << 20) }] })
      .catch((e: unknown) => e);
    expect(huge).toBeInstanceOf(OpenAI.APIError);
    expect((huge as InstanceType<typeof OpenAI.APIError>).status).toBe(413);

    const none = await client(key)
      .chat.completions.create({ model: 'nowhere', messages: [{ role: 'user', content: 'x' }] })
      .catch((e: unknown) => e);
    expect(none).toBeInstanceOf(OpenAI.InternalServerError);
    expect((none as InstanceType<typeof OpenAI.APIError>).status).toBe(503);
    // The reason is the placement's: no node has the GPUs it asks for.
    expect((none as Error).message).toMatch(/model `nowhere` has 0 ready replicas: none can be placed/);

    const limited = await createKey({ name: 'one-a-minute', requests_per_minute: 1 });
    await client(limited.secret).chat.completions.create({
      model: 'chat',
      messages: [{ role: 'user', content: 'x' }],
      max_tokens: 1,
    });
    const over = await client(limited.secret)
      .chat.completions.create({ model: 'chat', messages: [{ role: 'user', content: 'x' }], max_tokens: 1 })
      .catch((e: unknown) => e);
    expect(over).toBeInstanceOf(OpenAI.RateLimitError);
    expect(Number((over as InstanceType<typeof OpenAI.APIError>).headers?.get('retry-after'))).toBeGreaterThan(0);
  });

  it('refuses a key once revoked, and once expired', async () => {
    const revoked = await createKey({ name: 'to-revoke' });
    await client(revoked.secret).chat.completions.create({
      model: 'chat',
      messages: [{ role: 'user', content: 'x' }],
      max_tokens: 1,
    });
    expect((await api('DELETE', `/api/v1/keys/${revoked.id}`)).status).toBe(200);
    await expect(
      client(revoked.secret).chat.completions.create({ model: 'chat', messages: [{ role: 'user', content: 'x' }] }),
    ).rejects.toBeInstanceOf(OpenAI.AuthenticationError);

    const expiring = await createKey({ name: 'brief', expires_at: new Date(Date.now() + 1500).toISOString() });
    await client(expiring.secret).chat.completions.create({
      model: 'chat',
      messages: [{ role: 'user', content: 'x' }],
      max_tokens: 1,
    });
    await waitFor('the key to expire', async () => {
      const e = await client(expiring.secret)
        .chat.completions.create({ model: 'chat', messages: [{ role: 'user', content: 'x' }], max_tokens: 1 })
        .then(
          () => undefined,
          (err: unknown) => err,
        );
      return e instanceof OpenAI.AuthenticationError ? e : undefined;
    });
  });

  it('serves a model with nothing placed through its fallback', async () => {
    const before = await metric('llmgw_router_fallbacks_total', 'model="big"');
    const reply = await client(key).chat.completions.create({
      model: 'big',
      messages: [{ role: 'user', content: 'x' }],
      max_tokens: 2,
    });
    expect(reply.usage!.completion_tokens).toBe(2);
    expect(await metric('llmgw_router_fallbacks_total', 'model="big"')).toBe(before + 1);
  });

  it('stops the engine generating as soon as the client goes away', async () => {
    const [slow] = await ready('slow', 1);
    const stream = await client(key).chat.completions.create({
      model: 'slow',
      messages: [{ role: 'user', content: 'x' }],
      max_tokens: 500,
      stream: true,
    });
    let seen = 0;
    // Leaving the loop is how a client hangs up: the client aborts its request.
    for await (const chunk of stream) {
      if (chunk.choices[0]?.delta.content) seen++;
      if (seen === 2) break;
    }
    expect(seen).toBe(2);
    // 500 tokens at 5 a second would run for 100 s; the engine's own gauge says it stopped.
    await waitFor(
      'the sim to stop generating',
      async () => ((await running(slow!.endpoint!)) === 0 ? true : undefined),
      10_000,
    );
  });

  it('retries on the other replica, before the first byte, when an engine refuses connections', async () => {
    const replicas = await ready('chat', 2);
    const victim = replicas[0]!;
    const agent = agents.get(victim.shards[0]!.node)!;
    const before = await metric('llmgw_router_retries_total', 'model="chat"');
    // The agent is paused first, so the control plane still lists the dead engine as ready: the router meets the refusal itself.
    agent.child.kill('SIGSTOP');
    try {
      process.kill(enginePid(victim.id), 'SIGKILL');
      await waitFor('the engine to refuse connections', async () =>
        fetch(`${victim.endpoint!}/health`).then(
          () => undefined,
          () => true,
        ),
      );
      // Concurrent, so least-in-flight choice sends some of them to the dead engine; every one must still be answered.
      const replies = await Promise.all(
        Array.from({ length: 20 }, () =>
          client(key).chat.completions.create({
            model: 'chat',
            messages: [{ role: 'user', content: 'x' }],
            max_tokens: 2,
          }),
        ),
      );
      expect(replies.every((r) => r.usage?.completion_tokens === 2)).toBe(true);
    } finally {
      agent.child.kill('SIGCONT');
    }
    expect(await metric('llmgw_router_retries_total', 'model="chat"')).toBeGreaterThan(before);
    // The agent restarts the engine and the model is back to two ready replicas.
    await ready('chat', 2);
  });

  it('never retries after the first byte: a stream whose engine dies ends with one error and no repeated tokens', async () => {
    const [slow] = await ready('slow', 1);
    const stream = await client(key).chat.completions.create({
      model: 'slow',
      messages: [{ role: 'user', content: 'x' }],
      max_tokens: 500,
      stream: true,
    });
    const ids = new Set<string>();
    let pieces = 0;
    const err = await (async () => {
      for await (const chunk of stream) {
        ids.add(chunk.id);
        if (chunk.choices[0]?.delta.content) pieces++;
        if (pieces === 2) process.kill(enginePid(slow!.id), 'SIGKILL');
      }
      return null;
    })().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.APIError);
    expect((err as Error).message).toContain('stopped answering mid-response');
    // One completion id: the stream was never restarted on another attempt.
    expect(ids.size).toBe(1);
    expect(pieces).toBeLessThan(10);
  });

  it('counts each key’s requests and tokens in /api/v1/usage', async () => {
    const usage = await waitFor('usage to be written', async () => {
      const { body } = await api<{ key_id?: string; model: string; requests: number; completion_tokens: number }[]>(
        'GET',
        '/api/v1/usage',
      );
      const chat = body.filter((u) => u.model === 'chat');
      return chat.reduce((s, u) => s + u.completion_tokens, 0) >= 8 + 6 + 4 ? chat : undefined;
    });
    expect(usage.reduce((s, u) => s + u.requests, 0)).toBeGreaterThanOrEqual(4);
  });
});
