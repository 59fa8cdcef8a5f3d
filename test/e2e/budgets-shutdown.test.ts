// A control plane told to stop while a budgeted stream is in flight lets
// the stream finish and reports what it spent before handing its leases
// back. The failure this guards against: the admin listener's close (which
// hands the leases back) ran beside the client listener's (which waits for
// requests in flight), so a stream still running at shutdown settled into a
// lease already given back, and its tokens never reached the store: every
// rolling restart under load let a team spend past its hard budget unseen.
import Database from 'better-sqlite3';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { ReplicaView } from '../../src/api/index.js';
import { weightsDir } from '../support/fleet.js';
import { killEnginesOf, startControl, startLlmgw, stopAll } from '../support/processes.js';
import { waitFor } from '../support/wait.js';

const dir = mkdtempSync(join(tmpdir(), 'llmgw-e2e-budgets-shutdown-'));
const stateDir = join(dir, 'n1');

afterAll(async () => {
  await stopAll();
  killEnginesOf([stateDir]);
});

describe('a control plane stopped while a budgeted stream is in flight', () => {
  it('finishes the stream and reports its tokens to the store before it hands its leases back', async () => {
    const joinToken = 'e2e-join-token-budgets-shutdown-0123456789';
    const adminToken = 'e2e-admin-token-budgets-shutdown-0123456789';
    const db = join(dir, 'db');
    const control = await startControl([
      '--store',
      `sqlite:${db}`,
      '--join-token',
      joinToken,
      '--admin-token',
      adminToken,
      '--reconcile-interval',
      '300ms',
      '--log-level',
      'warn',
    ]);
    const api = async <T>(method: string, path: string, body?: unknown): Promise<{ status: number; body: T }> => {
      const res = await fetch(`${control.urls.admin}${path}`, {
        method,
        headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      return { status: res.status, body: (await res.json()) as T };
    };
    startLlmgw([
      'agent',
      '--control',
      control.urls.agent,
      '--join-token',
      joinToken,
      '--node-id',
      'n1',
      '--state-dir',
      stateDir,
      '--simulate',
      'gpus=0,ram=16g',
      '--heartbeat-interval',
      '300ms',
      '--port-range',
      '29200-29229',
      '--log-level',
      'warn',
    ]);
    await waitFor('the node up', async () => {
      const { body } = await api<{ liveness: string }[]>('GET', '/api/v1/nodes');
      return body.some((n) => n.liveness === 'up') ? true : undefined;
    });
    expect((await api('POST', '/api/v1/teams', { name: 'ml' })).status).toBe(201);
    // Far from spent: what matters is what the store is told, not a refusal.
    const budget = await api<{ id: string }>('POST', '/api/v1/budgets', {
      scope: 'team',
      subject: 'ml',
      unit: 'tokens',
      period: 'day',
      amount: 1_000_000,
    });
    expect(budget.status).toBe(201);
    const key = await api<{ secret: string }>('POST', '/api/v1/keys', { name: 'streamer', team: 'ml' });
    expect(key.status).toBe(201);
    // 20 tokens a second: a stream of 60 runs for about 3 s, well past the plane's own shutdown.
    const added = await api('POST', '/api/v1/models', {
      name: 'chat',
      source: weightsDir(dir),
      scaling: { min: 1 },
      profiles: [{ engine: 'sim', args: ['--tokens-per-second', '20'] }],
    });
    expect(added.status, JSON.stringify(added.body)).toBe(200);
    await waitFor('a ready replica of chat', async () => {
      const { body } = await api<ReplicaView[]>('GET', '/api/v1/replicas?model=chat');
      return body.some((r) => r.state === 'ready') ? true : undefined;
    });

    const res = await fetch(`${control.urls.client}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key.body.secret}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'chat',
        messages: [{ role: 'user', content: 'tell me a long story' }],
        max_tokens: 60,
        stream: true,
        stream_options: { include_usage: true },
      }),
    });
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let text = decoder.decode((await reader.read()).value);
    // The stream has begun: the plane is told to stop now, while it runs.
    const exited = control.stop('SIGTERM');
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
    }
    expect(text.endsWith('data: [DONE]\n\n'), 'the stream was let finish').toBe(true);
    const usage = text
      .split('\n')
      .filter((l) => l.startsWith('data: {'))
      .map((l) => JSON.parse(l.slice(6)) as { usage?: { total_tokens: number } | null })
      .find((e) => e.usage)?.usage;
    expect(usage?.total_tokens, 'the stream reported its usage').toBeGreaterThan(60);
    expect((await exited).code, 'the plane stopped cleanly').toBe(0);

    const store = new Database(db, { readonly: true });
    try {
      const rows = store.prepare('SELECT spent FROM budget_spend WHERE budget_id = ?').all(budget.body.id) as {
        spent: number;
      }[];
      const spent = rows.reduce((sum, r) => sum + r.spent, 0);
      console.log(`budget spent in the store after shutdown: ${spent}; the stream used ${usage!.total_tokens}`);
      expect(spent, 'the in-flight stream is charged in the store').toBe(usage!.total_tokens);
    } finally {
      store.close();
    }
  }, 120_000);
});
