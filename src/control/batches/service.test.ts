// The Files and Batch APIs' service over a real SQLite store and files
// directory. Guards against a batch line that names its model by an alias
// being stored and counted under the alias: the scaler's batch demand and
// the pace (interactive requests waiting, lines in flight) are kept per model
// name, so such lines were invisible to both.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { Store } from '../store/index.js';
import { BatchRepository } from './batch-store.js';
import { FileContent } from './content.js';
import { BatchDemandReader } from './demand.js';
import { FileRepository } from './files-store.js';
import { BatchService } from './service.js';

const NOW = 1_000_000;
const line = (i: number, model: string) =>
  JSON.stringify({
    custom_id: `c${i}`,
    method: 'POST',
    url: '/v1/chat/completions',
    body: { model, messages: [{ role: 'user', content: `q${i}` }] },
  });

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c();
});

async function setup() {
  const dir = mkdtempSync(join(tmpdir(), 'llmgw-batch-service-'));
  const store = await Store.open({ location: { kind: 'sqlite', path: join(dir, 'db') }, now: () => NOW });
  cleanups.push(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const batches = new BatchRepository(store.connection);
  const service = new BatchService({
    files: new FileRepository(store.connection),
    batches,
    content: new FileContent(join(dir, 'files')),
    settings: {
      filesDir: join(dir, 'files'),
      fileMaxBytes: 1 << 20,
      maxLines: 100,
      leaseMs: 60_000,
      minWindowMs: 1,
      headroomFraction: 0.5,
    },
    now: () => NOW,
    notify: () => {},
    // `q` is an alias of qwen; `gone` is in no catalog.
    catalog: { resolve: (n) => (n === 'qwen' || n === 'q' ? { name: 'qwen' } : undefined) },
  });
  return { store, batches, service };
}

describe('the batch service', () => {
  it('stores and counts a line that names an alias under its model', async () => {
    const { store, batches, service } = await setup();
    const caller = { keyId: 'k1', team: 'ml' };
    const input = [line(1, 'q'), line(2, 'qwen'), line(3, 'q'), line(4, 'gone')].join('\n');
    const file = await service.uploadFile(caller, {
      filename: 'in.jsonl',
      purpose: 'batch',
      bytes: Buffer.from(input),
    });
    const batch = await service.createBatch(caller, {
      input_file_id: file.id as string,
      endpoint: '/v1/chat/completions',
      completion_window: '24h',
    });
    expect(await batches.models(batch.id as string)).toEqual(['gone', 'qwen']);

    const demand = new BatchDemandReader(store.connection.db, () => NOW, pino({ level: 'silent' }));
    await demand.refresh();
    expect(Object.fromEntries(demand.demand())).toEqual({
      qwen: { inFlight: 0, waiting: 3 },
      gone: { inFlight: 0, waiting: 1 },
    });
    // The runner claims per stored model: all three qwen lines in one claim.
    const claimed = await batches.claim([batch.id as string], 'qwen', 10, 'me', NOW + 60_000, NOW);
    expect(claimed.map((l) => l.customId)).toEqual(['c1', 'c2', 'c3']);
  });
});
