// Batches end to end (issue #40): a real `llmgw control` on a SQLite file, a
// simulated agent with sim engines, and the official `openai` client's
// files.create and batches.create. Each test waits for states (a batch's
// status, its counts), never for durations: the machine may be slow.
import { mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI, { toFile } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  freePort,
  killEnginesOf,
  startControl,
  startLlmgw,
  stopAll,
  type RunningProcess,
} from '../support/processes.js';
import { waitFor } from '../support/wait.js';

const NAME = 'batches';
const ADMIN = `e2e-admin-token-${NAME}-0123456789abcdef`;
const JOIN = `e2e-join-token-${NAME}-0123456789abcdef`;
let dir = '';
let controlArgs: string[] = [];
let control: RunningProcess & { urls: { client: string; admin: string; agent: string } };
let client: OpenAI;
let secret = '';

async function api<T>(method: string, path: string, body?: unknown): Promise<{ status: number; body: T }> {
  const res = await fetch(`${control.urls.admin}${path}`, {
    method,
    headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json', 'x-llmgw-actor': 'e2e' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: res.status, body: (await res.json()) as T };
}

function input(n: number, model: string, prefix = 'req'): string {
  const lines: string[] = [];
  for (let i = 0; i < n; i++)
    lines.push(
      JSON.stringify({
        custom_id: `${prefix}-${i}`,
        method: 'POST',
        url: '/v1/chat/completions',
        body: { model, max_tokens: 4, messages: [{ role: 'user', content: `line ${i}` }] },
      }),
    );
  return `${lines.join('\n')}\n`;
}

async function upload(text: string): Promise<string> {
  const file = await client.files.create({ file: await toFile(Buffer.from(text), 'in.jsonl'), purpose: 'batch' });
  return file.id;
}

async function until(id: string, statuses: readonly string[], timeoutMs = 240_000): Promise<OpenAI.Batch> {
  return waitFor(
    () => `batch ${id} to be ${statuses.join(' or ')}`,
    async () => {
      const b = await client.batches.retrieve(id);
      return statuses.includes(b.status) ? b : undefined;
    },
    { timeoutMs, intervalMs: 250 },
  );
}

async function lines(fileId: string | null | undefined): Promise<Record<string, unknown>[]> {
  if (!fileId) return [];
  const text = await (await client.files.content(fileId)).text();
  return text
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

/** Each custom_id's count over both files. */
function tally(...files: Record<string, unknown>[][]): Map<string, number> {
  const seen = new Map<string, number>();
  for (const f of files) for (const l of f) seen.set(l.custom_id as string, (seen.get(l.custom_id as string) ?? 0) + 1);
  return seen;
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), `llmgw-e2e-${NAME}-`));
  // Fixed ports: the agent and the client find the control plane again after it is killed and started anew.
  const [clientPort, agentPort] = [await freePort(), await freePort()];
  controlArgs = [
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
    '--client-addr',
    `127.0.0.1:${clientPort}`,
    '--agent-addr',
    `127.0.0.1:${agentPort}`,
    '--batch-min-completion-window',
    '1s',
  ];
  control = await startControl(controlArgs);
  startLlmgw([
    'agent',
    '--control',
    control.urls.agent,
    '--join-token',
    JOIN,
    '--node-id',
    'n1',
    '--state-dir',
    join(dir, 'n1'),
    '--simulate',
    'gpus=0,ram=16g',
    '--heartbeat-interval',
    '300ms',
    '--port-range',
    '27700-27749',
    '--log-level',
    'warn',
  ]);
  await waitFor('the node up', async () => {
    const { body } = await api<{ liveness: string }[]>('GET', '/api/v1/nodes');
    return body.some((n) => n.liveness === 'up') ? true : undefined;
  });
  const weights = join(dir, 'weights');
  mkdirSync(weights);
  const added = await api('POST', '/api/v1/models', {
    name: 'demo',
    source: `file://${weights}`,
    scaling: { min: 1 },
    profiles: [{ engine: 'sim' }],
  });
  expect(added.status, JSON.stringify(added.body)).toBe(200);
  // A model no node can hold: its lines can never run, so a short window always expires them.
  const nofit = await api('POST', '/api/v1/models?force=true', {
    name: 'nofit',
    aliases: ['big'],
    source: `file://${weights}`,
    profiles: [{ engine: 'sim', gpus: 8 }],
  });
  expect(nofit.status, JSON.stringify(nofit.body)).toBe(200);
  const key = await api<{ secret: string }>('POST', '/api/v1/keys', { name: 'batcher' });
  expect(key.status).toBe(201);
  secret = key.body.secret;
  client = new OpenAI({ apiKey: secret, baseURL: `${control.urls.client}/v1`, maxRetries: 0, timeout: 30_000 });
  await waitFor(
    'a ready replica of demo',
    async () => {
      const { body } = await api<{ state: string }[]>('GET', '/api/v1/replicas?model=demo');
      return body.some((r) => r.state === 'ready') ? true : undefined;
    },
    60_000,
  );
}, 180_000);

afterAll(async () => {
  await stopAll();
  killEnginesOf([join(dir, 'n1')]);
});

describe('batches through the openai client', () => {
  it('runs a batch to completed: every custom_id answered once, in the output file', async () => {
    const fileId = await upload(input(20, 'demo'));
    const got = await client.files.retrieve(fileId);
    expect(got).toMatchObject({ id: fileId, object: 'file', purpose: 'batch', filename: 'in.jsonl' });
    const batch = await client.batches.create({
      input_file_id: fileId,
      endpoint: '/v1/chat/completions',
      completion_window: '24h',
      metadata: { run: 'one' },
    });
    expect(batch).toMatchObject({ object: 'batch', status: 'validating', request_counts: { total: 20 } });
    const done = await until(batch.id, ['completed', 'failed', 'expired']);
    expect(done.status).toBe('completed');
    expect(done.request_counts).toEqual({ total: 20, completed: 20, failed: 0 });
    expect(done.error_file_id ?? null).toBeNull();
    const out = await lines(done.output_file_id);
    expect([...tally(out).values()].every((n) => n === 1)).toBe(true);
    expect(tally(out).size).toBe(20);
    for (const l of out) {
      expect(l).toMatchObject({ response: { status_code: 200 }, error: null });
      expect((l.response as { body: { object: string } }).body.object).toBe('chat.completion');
    }
    const listed = await client.batches.list({ limit: 10 });
    expect(listed.data.map((b) => b.id)).toContain(batch.id);
    // Another team's key sees neither the batch nor its files.
    expect((await api('POST', '/api/v1/teams', { name: 'other' })).status).toBe(201);
    const outsider = await api<{ secret: string }>('POST', '/api/v1/keys', { name: 'outsider', team: 'other' });
    expect(outsider.status, JSON.stringify(outsider.body)).toBe(201);
    const other = new OpenAI({ apiKey: outsider.body.secret, baseURL: `${control.urls.client}/v1`, maxRetries: 0 });
    await expect(other.batches.retrieve(batch.id)).rejects.toMatchObject({ status: 404 });
    await expect(other.files.retrieve(fileId)).rejects.toMatchObject({ status: 404 });
    await expect(other.files.content(done.output_file_id!)).rejects.toMatchObject({ status: 404 });
    expect((await other.batches.list()).data).toEqual([]);
    // Deleted, a file is gone for good.
    expect(await client.files.delete(fileId)).toMatchObject({ id: fileId, deleted: true });
    await expect(client.files.retrieve(fileId)).rejects.toMatchObject({ status: 404 });
  });

  it('refuses a bad input line with a 400 naming its number', async () => {
    const text = `${input(2, 'demo')}${JSON.stringify({ custom_id: 'req-0', method: 'POST', url: '/v1/chat/completions', body: { model: 'demo' } })}\n`;
    const err = (await upload(text).catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>;
    expect(err.status).toBe(400);
    expect(err.message).toContain('line 3');
    expect(err.message).toContain('custom_id');
  });

  it('reports lines not run within the completion window as batch_expired', async () => {
    const fileId = await upload(input(5, 'nofit', 'late'));
    const batch = await client.batches.create({
      input_file_id: fileId,
      endpoint: '/v1/chat/completions',
      completion_window: '2s' as '24h',
    });
    const done = await until(batch.id, ['expired', 'completed', 'failed']);
    expect(done.status).toBe('expired');
    expect(done.request_counts).toEqual({ total: 5, completed: 0, failed: 5 });
    const errors = await lines(done.error_file_id);
    expect(errors.map((e) => e.custom_id).sort()).toEqual(['late-0', 'late-1', 'late-2', 'late-3', 'late-4']);
    for (const e of errors) expect(e).toMatchObject({ response: null, error: { code: 'batch_expired' } });
  });

  // Guards against lines that name a model by an alias being stored and counted under the alias: the scaler's demand,
  // the pace and the operator's view are kept per model name, and missed them.
  it('counts lines that name an alias under their model', async () => {
    const fileId = await upload(input(3, 'big', 'alias'));
    const batch = await client.batches.create({
      input_file_id: fileId,
      endpoint: '/v1/chat/completions',
      completion_window: '24h',
    });
    const view = await waitFor('the batch running', async () => {
      const { body } = await api<{ status: string; models: string[] }>('GET', `/api/v1/batches/${batch.id}`);
      return body.status === 'in_progress' ? body : undefined;
    });
    expect(view.models).toEqual(['nofit']);
    const metrics = await waitFor('the demand read', async () => {
      const text = await (
        await fetch(`${control.urls.admin}/metrics`, { headers: { authorization: `Bearer ${ADMIN}` } })
      ).text();
      return text.includes('llmgw_batch_lines_waiting{model="nofit"} 3') ? text : undefined;
    });
    expect(metrics).not.toContain('model="big"');
    await client.batches.cancel(batch.id);
    const done = await until(batch.id, ['cancelled']);
    expect(done.request_counts).toEqual({ total: 3, completed: 0, failed: 3 });
  });

  it('cancels a batch: what ran is in the output, the rest batch_cancelled, each line once', async () => {
    const fileId = await upload(input(300, 'demo', 'c'));
    const batch = await client.batches.create({
      input_file_id: fileId,
      endpoint: '/v1/chat/completions',
      completion_window: '24h',
    });
    const cancelling = await client.batches.cancel(batch.id);
    expect(['cancelling', 'cancelled']).toContain(cancelling.status);
    const done = await until(batch.id, ['cancelled']);
    const [out, errors] = [await lines(done.output_file_id), await lines(done.error_file_id)];
    const seen = tally(out, errors);
    expect(seen.size).toBe(300);
    expect([...seen.values()].every((n) => n === 1)).toBe(true);
    expect(done.request_counts!.completed + done.request_counts!.failed).toBe(300);
    expect(errors.length, 'a batch cancelled at once leaves lines unrun').toBeGreaterThan(0);
    for (const e of errors) expect(e).toMatchObject({ error: { code: 'batch_cancelled' } });
  });

  it('answers every line of 2,000 exactly once across a kill -9 of the control plane', async () => {
    const fileId = await upload(input(2000, 'demo', 'k'));
    const batch = await client.batches.create({
      input_file_id: fileId,
      endpoint: '/v1/chat/completions',
      completion_window: '24h',
    });
    await waitFor(
      'some lines answered before the kill',
      async () => {
        const b = await client.batches.retrieve(batch.id);
        return b.request_counts!.completed >= 100 ? b : undefined;
      },
      { timeoutMs: 120_000, intervalMs: 100 },
    );
    const killed = await control.stop('SIGKILL');
    expect(killed.signal).toBe('SIGKILL');
    control = await startControl(controlArgs);
    const done = await until(batch.id, ['completed', 'failed', 'expired'], 480_000);
    expect(done.status).toBe('completed');
    const [out, errors] = [await lines(done.output_file_id), await lines(done.error_file_id)];
    const seen = tally(out, errors);
    expect(seen.size).toBe(2000);
    expect([...seen.entries()].filter(([, n]) => n !== 1)).toEqual([]);
    expect(out.length).toBe(2000);
  }, 600_000);
});
