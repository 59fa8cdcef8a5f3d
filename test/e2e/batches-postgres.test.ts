// A batch taken over by another control plane (issue #40): two instances on
// one Postgres, sharing files_dir, both running the batch's lines; the one
// the batch was made on is killed with -9 mid-batch, and the other finishes
// it once the killed one's leases lapse, every line answered exactly once.
// Waits for states, never for durations.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI, { toFile } from 'openai';
import { afterAll, expect, it } from 'vitest';
import { ADMIN, getJson, JOIN, postJson, replicasOf, startSimAgent, weightsDir } from '../support/fleet.js';
import { createTestDatabase, describePostgres, type TestDatabase } from '../support/postgres.js';
import { killEnginesOf, startControl, stopAll } from '../support/processes.js';
import { waitFor } from '../support/wait.js';

let db: TestDatabase | undefined;
const stateDirs: string[] = [];

afterAll(async () => {
  await stopAll();
  killEnginesOf(stateDirs);
  await db?.drop();
});

describePostgres('batches on several control planes', () => {
  it('finishes a batch on the second instance after the first is killed -9', { timeout: 420_000 }, async () => {
    db = await createTestDatabase();
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-e2e-batches-pg-'));
    const args = [
      '--store',
      db.url,
      '--join-token',
      JOIN,
      '--admin-token',
      ADMIN,
      '--reconcile-interval',
      '500ms',
      '--log-level',
      'warn',
      '--files-dir',
      join(dir, 'files'),
      '--batch-lease',
      '3s',
    ];
    const [a, b] = [await startControl(args), await startControl(args)];
    const stateDir = join(dir, 'n1');
    stateDirs.push(stateDir);
    startSimAgent(`${a.urls.agent},${b.urls.agent}`, stateDir, 'n1', { first: 27900, count: 40 });
    await waitFor('the node up', async () => {
      const nodes = await getJson<{ liveness: string }[]>(`${a.urls.admin}/api/v1/nodes`);
      return nodes.some((n) => n.liveness === 'up') ? true : undefined;
    });
    const add = await postJson(`${a.urls.admin}/api/v1/models`, {
      name: 'demo',
      source: weightsDir(dir),
      scaling: { min: 1 },
      profiles: [{ engine: 'sim' }],
    });
    expect(add.status, await add.clone().text()).toBe(200);
    for (const admin of [a.urls.admin, b.urls.admin])
      await waitFor(
        `a ready replica as ${admin} sees it`,
        async () => ((await replicasOf(admin, 'demo')).some((r) => r.state === 'ready') ? true : undefined),
        90_000,
      );
    const made = await postJson(`${a.urls.admin}/api/v1/keys`, { name: 'batcher' });
    const { secret } = (await made.json()) as { secret: string };
    const on = (url: string) => new OpenAI({ apiKey: secret, baseURL: `${url}/v1`, maxRetries: 0, timeout: 30_000 });
    const [first, second] = [on(a.urls.client), on(b.urls.client)];
    await waitFor('the key known to both', async () => {
      try {
        await second.batches.list();
        return true;
      } catch {
        return undefined;
      }
    });
    const text = Array.from({ length: 600 }, (_, i) =>
      JSON.stringify({
        custom_id: `pg-${i}`,
        method: 'POST',
        url: '/v1/chat/completions',
        body: { model: 'demo', max_tokens: 4, messages: [{ role: 'user', content: `line ${i}` }] },
      }),
    ).join('\n');
    const file = await first.files.create({ file: await toFile(Buffer.from(text), 'in.jsonl'), purpose: 'batch' });
    const batch = await first.batches.create({
      input_file_id: file.id,
      endpoint: '/v1/chat/completions',
      completion_window: '24h',
    });
    await waitFor(
      'some lines answered before the kill',
      async () => ((await second.batches.retrieve(batch.id)).request_counts!.completed >= 50 ? true : undefined),
      { timeoutMs: 120_000, intervalMs: 100 },
    );
    expect((await a.stop('SIGKILL')).signal).toBe('SIGKILL');
    const done = await waitFor(
      'the batch ended on the second instance',
      async () => {
        const got = await second.batches.retrieve(batch.id);
        return ['completed', 'failed', 'expired'].includes(got.status) ? got : undefined;
      },
      { timeoutMs: 300_000, intervalMs: 250 },
    );
    expect(done.status).toBe('completed');
    const out = (await (await second.files.content(done.output_file_id!)).text()).split('\n').filter(Boolean);
    const ids = out.map((l) => (JSON.parse(l) as { custom_id: string }).custom_id);
    expect(ids.length).toBe(600);
    expect(new Set(ids).size, 'each line answered once').toBe(600);
  });
});
