// A control plane told to stop while a budgeted stream is in flight lets
// the stream finish and reports what it spent before handing its leases
// back. The failure this guards against: the admin listener's close (which
// hands the leases back) ran beside the client listener's (which waits for
// requests in flight), so a stream still running at shutdown settled into a
// lease already given back, and its tokens never reached the store: every
// rolling restart under load let a team spend past its hard budget unseen.
import Database from 'better-sqlite3';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { weightsDir } from '../support/fleet.js';
import { startOneNodeFleet, type OneNodeFleet } from '../support/one-node.js';

let fleet: OneNodeFleet | undefined;

afterAll(async () => {
  await fleet?.stop();
});

describe('a control plane stopped while a budgeted stream is in flight', () => {
  it('finishes the stream and reports its tokens to the store before it hands its leases back', async () => {
    // 20 tokens a second: a stream of 60 runs for about 3 s, well past the plane's own shutdown.
    fleet = await startOneNodeFleet({
      name: 'budgets-shutdown',
      portRange: '29200-29229',
      keys: [],
      models: (dir) => [
        {
          name: 'chat',
          source: weightsDir(dir),
          scaling: { min: 1 },
          profiles: [{ engine: 'sim', args: ['--tokens-per-second', '20'] }],
        },
      ],
    });
    const { api, control } = fleet;
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

    const res = await fetch(`${fleet.clientUrl}/v1/chat/completions`, {
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

    const store = new Database(join(fleet.dir, 'db'), { readonly: true });
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
