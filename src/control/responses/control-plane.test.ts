// The control plane's choice of response store: in the store when it has
// one (so a conversation outlives a restart), in memory when it has none,
// with the configured limits either way.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { compileControlOptions } from '../config/index.js';
import { ControlPlane } from '../control-plane.js';
import { MemoryResponseStore, StoredResponses, type StoredResponse } from './index.js';

const planes: ControlPlane[] = [];
afterEach(async () => {
  await Promise.all(planes.splice(0).map((p) => p.close()));
});

async function plane(options: Record<string, unknown>): Promise<ControlPlane> {
  const p = await ControlPlane.create(compileControlOptions(options), { logger: pino({ level: 'silent' }) });
  planes.push(p);
  return p;
}

const kept: StoredResponse = {
  id: 'resp_cp',
  keyId: 'k1',
  model: 'm',
  createdAtMs: Date.now(),
  response: { id: 'resp_cp', object: 'response' },
  items: [],
};

describe('the control plane keeps responses', () => {
  it('in the store when it has one, across a restart', async () => {
    const db = `sqlite:${join(mkdtempSync(join(tmpdir(), 'llmgw-responses-cp-')), 'db')}`;
    const first = await plane({ store: db });
    expect(first.responses).toBeInstanceOf(StoredResponses);
    await first.responses.put(kept);
    await first.close();
    planes.splice(planes.indexOf(first), 1);
    const second = await plane({ store: db });
    expect(await second.responses.get('k1', 'resp_cp'), 'kept across the restart').toEqual(kept);
  });

  it('in memory without a store, within responses_max_per_key', async () => {
    const p = await plane({ store: 'none', responses_max_per_key: '0' });
    expect(p.responses).toBeInstanceOf(MemoryResponseStore);
    await p.responses.put(kept);
    expect(await p.responses.get('k1', 'resp_cp'), 'a cap of 0 keeps none').toBeUndefined();
  });
});
