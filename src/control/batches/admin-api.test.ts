import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { batchRow } from '../../../test/support/batch-records.js';
import type { BatchAdminView, BatchesAdminView } from '../../api/batch-types.js';
import { createJsonApp, setPrincipal } from '../../http/index.js';
import { Store } from '../store/index.js';
import { registerBatchesAdminApi, type BatchesAdminDeps } from './admin-api.js';
import { BatchRepository, type BatchRow } from './batch-store.js';

const NOW = 1_000_000;

/** A batch of `owner`, in progress for 100 s, as the admin API lists it. */
function row(id: string, owner: string, over: Partial<BatchRow> = {}): BatchRow {
  return batchRow(NOW - 100_000, { id, owner, key_id: 'k1', expires_at: NOW + 86_400_000, ...over });
}

const stores: Store[] = [];
afterEach(async () => {
  for (const s of stores.splice(0)) await s.close();
});

async function setup(over: Partial<BatchesAdminDeps> = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'llmgw-batches-admin-'));
  const store = await Store.open({ location: { kind: 'sqlite', path: join(dir, 'db') } });
  stores.push(store);
  const repo = new BatchRepository(store.connection);
  // A running batch of 10 lines over two models, 4 done (one failed) in the 100 s since it started.
  await repo.create(
    row('batch_ml', 'team:ml', { total: 10 }),
    Array.from({ length: 10 }, (_, i) => ({ line: i + 1, customId: `c${i}`, model: i % 2 ? 'chat' : 'embed' })),
  );
  const claimed = await repo.claim(['batch_ml'], 'chat', 5, 'me', NOW + 60_000, NOW);
  for (const [i, line] of claimed.slice(0, 4).entries()) await repo.finish(line, 'me', '{}', i === 0);
  // An ended batch of another team: counts from its row.
  await repo.create(
    row('batch_ops', 'team:ops', {
      status: 'completed',
      created_at: NOW - 50_000,
      completed_at: NOW - 1_000,
      total: 3,
      completed: 3,
    }),
    [],
  );
  const app = createJsonApp({ logger: pino({ level: 'silent' }), bodyLimitBytes: 1 << 20 });
  // Who asks, from a header: the admin guard's job on the real listener.
  app.addHook('onRequest', async (request) => {
    const team = request.headers['x-team'];
    if (typeof team === 'string')
      setPrincipal(request, { identity: 'person:t', person: 't', role: 'team-admin', teams: [team] });
  });
  const cancelled: string[] = [];
  registerBatchesAdminApi(app, {
    repo,
    now: () => NOW,
    pace: (model) =>
      model === 'chat'
        ? { reason: 'paused', message: 'paused: 2 interactive requests waiting', inFlight: 1 }
        : undefined,
    cancel: async (r) => {
      cancelled.push(r.id);
      return { ...r, status: 'cancelling', cancelling_at: NOW };
    },
    ...over,
  });
  return { app, cancelled };
}

describe('the admin API of batches', () => {
  it('lists every batch, newest first, with progress, rate, estimated finish and the pace of each model', async () => {
    const { app } = await setup();
    const res = await app.inject({ method: 'GET', url: '/api/v1/batches' });
    expect(res.statusCode, res.body).toBe(200);
    const { batches } = res.json<BatchesAdminView>();
    expect(batches.map((b) => b.id)).toEqual(['batch_ops', 'batch_ml']);
    const ml = batches[1]!;
    expect(ml).toMatchObject({
      owner: 'team:ml',
      models: ['chat', 'embed'],
      status: 'in_progress',
      total: 10,
      completed: 3,
      failed: 1,
      running: 1,
      // 4 lines in 100 s: 6 more take 150 s.
      lines_per_second: 0.04,
      estimated_finish_at: NOW + 150_000,
      pace: [{ model: 'chat', reason: 'paused', message: 'paused: 2 interactive requests waiting', in_flight: 1 }],
    });
    expect(batches[0]).toMatchObject({ status: 'completed', completed: 3, estimated_finish_at: null, models: [] });
    expect(batches[0]).not.toHaveProperty('pace');
  });

  it("shows a team-admin its teams' batches only, and another team's as missing", async () => {
    const { app } = await setup();
    const list = await app.inject({ method: 'GET', url: '/api/v1/batches', headers: { 'x-team': 'ml' } });
    expect(list.json<BatchesAdminView>().batches.map((b) => b.id)).toEqual(['batch_ml']);
    const other = await app.inject({ method: 'GET', url: '/api/v1/batches/batch_ops', headers: { 'x-team': 'ml' } });
    expect(other.statusCode).toBe(404);
    expect(other.json()).toEqual({
      error: 'no batch "batch_ops" of your teams; `llmgw ctl batches` lists them',
    });
    const mine = await app.inject({ method: 'GET', url: '/api/v1/batches/batch_ml', headers: { 'x-team': 'ml' } });
    expect(mine.json<BatchAdminView>().completed).toBe(3);
  });

  it('cancels a running batch and refuses one that has ended, saying so', async () => {
    const { app, cancelled } = await setup();
    const ok = await app.inject({ method: 'POST', url: '/api/v1/batches/batch_ml/cancel' });
    expect(ok.statusCode, ok.body).toBe(200);
    expect(ok.json<BatchAdminView>().status).toBe('cancelling');
    expect(cancelled).toEqual(['batch_ml']);
    const ended = await app.inject({ method: 'POST', url: '/api/v1/batches/batch_ops/cancel' });
    expect(ended.statusCode).toBe(409);
    expect(ended.json<{ error: string }>().error).toBe(
      'batch batch_ops is completed already; only a validating or in_progress batch can be cancelled',
    );
    const theirs = await app.inject({
      method: 'POST',
      url: '/api/v1/batches/batch_ml/cancel',
      headers: { 'x-team': 'ops' },
    });
    expect(theirs.statusCode, "another team's batch is not cancelled").toBe(404);
    expect(cancelled).toEqual(['batch_ml']);
  });
});
