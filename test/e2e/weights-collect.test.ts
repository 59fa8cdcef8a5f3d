// Reclaiming weights with a real control plane and a real agent over real
// files: orphans are listed and collected, the operator's files never appear,
// and a model added back between listing and collect keeps its weights.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { cacheNameOf } from '../../src/protocol/index.js';
import { startControl, startLlmgw, stopAll } from '../support/processes.js';
import { waitFor } from '../support/wait.js';

afterAll(stopAll);

const JOIN = 'e2e-join-token-0123456789abcdef';
const ADMIN = 'e2e-admin-token-0123456789abcdef';
const headers = { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json', 'x-llmgw-actor': 'tidy-up' };

function entry(cacheDir: string, source: string, bytes: number): string {
  const path = join(cacheDir, cacheNameOf(source)!);
  mkdirSync(join(path, 'files'), { recursive: true });
  writeFileSync(join(path, 'files', 'model.gguf'), Buffer.alloc(bytes, 7));
  writeFileSync(join(path, 'manifest.json'), JSON.stringify({ source, files: [] }));
  return path;
}

describe('weights: orphans and collect', () => {
  it('lists and collects only what llmgw fetched and no model wants', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-e2e-weights-'));
    const cacheDir = join(dir, 'cache');
    const modelDir = join(dir, 'models');
    mkdirSync(join(modelDir, 'llama-70b'), { recursive: true });
    writeFileSync(join(modelDir, 'llama-70b', 'weights.safetensors'), 'operator copied this for a week');
    const kept = entry(cacheDir, 'hf://org/kept', 1000);
    const orphan = entry(cacheDir, 'hf://org/gone', 3000);
    const readded = entry(cacheDir, 'hf://org/back', 2000);
    writeFileSync(join(cacheDir, 'README-by-operator.txt'), "not llmgw's");
    mkdirSync(join(cacheDir, 'my-model'));

    const control = await startControl([
      '--store',
      `sqlite:${join(dir, 'db')}`,
      '--join-token',
      JOIN,
      '--admin-token',
      ADMIN,
      '--log-level',
      'warn',
    ]);
    const admin = control.urls.admin;
    // min 0: wanted in the catalog, but nothing is placed (so nothing is fetched from the internet).
    const add = (name: string, source: string) =>
      fetch(`${admin}/api/v1/models?force=true`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ name, source, scaling: { min: 0 }, profiles: [{ engine: 'sim' }] }),
      });
    expect((await add('kept', 'hf://org/kept')).status).toBe(200);

    startLlmgw([
      'agent',
      '--control',
      control.urls.agent,
      '--join-token',
      JOIN,
      '--node-id',
      'w1',
      '--state-dir',
      join(dir, 'agent'),
      '--cache-dir',
      cacheDir,
      '--model-dir',
      modelDir,
      '--simulate',
      'gpus=0,ram=16g',
      '--heartbeat-interval',
      '300ms',
      '--log-level',
      'warn',
    ]);

    type Orphans = {
      nodes: { node: string; entries: { path: string; size_bytes?: number }[]; reclaimable_bytes: number }[];
      total_bytes: number;
    };
    const listed = await waitFor('orphans reported', async () => {
      const o = (await (await fetch(`${admin}/api/v1/weights/orphans`, { headers })).json()) as Orphans;
      return o.nodes.length ? o : undefined;
    });
    expect(listed.nodes).toHaveLength(1);
    expect(listed.nodes[0]!.node).toBe('w1');
    expect(listed.nodes[0]!.entries.map((e) => e.path).sort()).toEqual([orphan, readded].sort());
    expect(listed.total_bytes).toBeGreaterThanOrEqual(5000);

    // Between listing and collecting, someone adds the model back: its weights are wanted again.
    expect((await add('back', 'hf://org/back')).status).toBe(200);
    const res = await fetch(`${admin}/api/v1/weights/collect`, { method: 'POST', headers });
    const summary = (await res.json()) as {
      asked: number;
      removed: number;
      refused: number;
      unreachable: number;
      nodes: { asked: { path: string }[] }[];
    };
    expect(summary).toMatchObject({ asked: 1, removed: 1, refused: 0, unreachable: 0 });
    expect(summary.nodes[0]!.asked.map((a) => a.path)).toEqual([orphan]);

    expect(existsSync(orphan), 'the orphan is gone').toBe(false);
    expect(existsSync(readded), 'the model added back keeps its weights').toBe(true);
    expect(existsSync(kept), 'a wanted model at zero replicas keeps its weights').toBe(true);
    expect(readFileSync(join(modelDir, 'llama-70b', 'weights.safetensors'), 'utf8')).toBe(
      'operator copied this for a week',
    );
    expect(existsSync(join(cacheDir, 'README-by-operator.txt'))).toBe(true);
    expect(existsSync(join(cacheDir, 'my-model'))).toBe(true);

    // The next heartbeat no longer reports the removed entry.
    await waitFor('the node reports the space back', async () => {
      const nodes = (await (await fetch(`${admin}/api/v1/nodes`, { headers })).json()) as {
        models_on_disk?: string[];
      }[];
      return nodes[0]?.models_on_disk && !nodes[0].models_on_disk.includes(orphan) ? true : undefined;
    });
    const after = (await (await fetch(`${admin}/api/v1/weights/orphans`, { headers })).json()) as Orphans;
    expect(after.total_bytes).toBe(0);
  });
});
