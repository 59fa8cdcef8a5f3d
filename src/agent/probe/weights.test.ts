import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { lstat, readdir, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { cacheNameOf } from '../../protocol/index.js';
import { WeightsReportSchema } from '../../protocol/node-report.js';
import { listWeights, treeSizeBytes, type WeightsProbeDeps } from './weights.js';

const deps: WeightsProbeDeps = {
  readdir: (path) => readdir(path, { withFileTypes: true }),
  lstat: (path) => lstat(path),
  readFile: (path) => readFile(path, 'utf8'),
};

let root: string;
beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'llmgw-weights-'));
});
afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

async function file(path: string, bytes: number): Promise<void> {
  await mkdir(join(path, '..'), { recursive: true });
  await writeFile(path, Buffer.alloc(bytes));
}

describe('listWeights', () => {
  it("reports cache entries with their cache name and source, and anything else in the cache as the operator's", async () => {
    const cache = join(root, 'cache');
    const source = 'hf://Qwen/Qwen2.5-0.5B-Instruct';
    const name = cacheNameOf(source)!;
    await file(join(cache, name, 'files', 'model.safetensors'), 1000);
    await writeFile(join(cache, name, 'manifest.json'), JSON.stringify({ version: 1, source }));
    const bare = 'a'.repeat(64);
    await file(join(cache, bare, 'files', 'x.bin'), 10);
    await file(join(cache, 'my-model.gguf'), 7);
    await file(join(cache, '.partial-abc', 'x'), 5);
    await file(join(cache, '.trash', 'y'), 5);

    const { weights, problems } = await listWeights(cache, [], deps);
    expect(problems).toEqual([]);
    const manifestBytes = JSON.stringify({ version: 1, source }).length;
    const expected = [
      { path: join(cache, bare), size_bytes: 10, kind: 'cache', cache_name: bare },
      { path: join(cache, name), size_bytes: 1000 + manifestBytes, kind: 'cache', cache_name: name, source },
      { path: join(cache, 'my-model.gguf'), size_bytes: 7, kind: 'model_dir' },
    ];
    expect(weights, 'in name order').toEqual(expected.sort((a, b) => a.path.localeCompare(b.path)));
    for (const w of weights) WeightsReportSchema.parse(w);
  });

  it('lists each direct child of a model directory with its size, not following links inside it', async () => {
    const models = join(root, 'models');
    await file(join(models, 'llama', 'blobs', 'abc'), 300);
    await mkdir(join(models, 'llama', 'snapshots', 'main'), { recursive: true });
    // A Hugging Face snapshot links to its blob: following the link would count the 300 bytes twice.
    await symlink('../../blobs/abc', join(models, 'llama', 'snapshots', 'main', 'model.safetensors'));
    await file(join(models, 'tiny.gguf'), 42);
    await file(join(models, '.locks', 'x'), 1);
    await symlink(join(root, 'elsewhere'), join(models, 'linked'));

    const { weights } = await listWeights(join(root, 'no-cache-yet'), [models], deps);
    expect(weights, 'each with the file:// source placement matches a model against').toEqual([
      { path: join(models, 'linked'), kind: 'model_dir', source: `file://${join(models, 'linked')}` },
      { path: join(models, 'llama'), size_bytes: 300, kind: 'model_dir', source: `file://${join(models, 'llama')}` },
      {
        path: join(models, 'tiny.gguf'),
        size_bytes: 42,
        kind: 'model_dir',
        source: `file://${join(models, 'tiny.gguf')}`,
      },
    ]);
  });

  it("reports file:// weights used in place outside every listed directory, as the operator's, with the source as written", async () => {
    const models = join(root, 'models');
    await file(join(models, 'tiny.gguf'), 42);
    await file(join(models, 'llama', 'model.gguf'), 300);
    await file(join(root, 'data', 'demo.gguf'), 64);
    const inPlace = [
      // llmgw up's demo model: no model directory lists it.
      { path: join(root, 'data', 'demo.gguf'), source: `file://${join(root, 'data', 'demo.gguf')}` },
      // Listed already, spelt differently in the catalog: the catalog's spelling wins, so placement matches it.
      { path: join(models, 'tiny.gguf'), source: `file://localhost${join(models, 'tiny.gguf')}` },
      // Inside a listed entry: named for placement, its bytes already counted with the entry.
      { path: join(models, 'llama', 'model.gguf'), source: `file://${join(models, 'llama', 'model.gguf')}` },
      // Gone since the engine started: not reported.
      { path: join(root, 'gone.gguf'), source: `file://${join(root, 'gone.gguf')}` },
    ];
    const { weights, problems } = await listWeights(join(root, 'cache'), [models], deps, inPlace);
    expect(problems).toEqual([]);
    expect(weights).toEqual([
      { path: join(models, 'llama'), size_bytes: 300, kind: 'model_dir', source: `file://${join(models, 'llama')}` },
      {
        path: join(models, 'tiny.gguf'),
        size_bytes: 42,
        kind: 'model_dir',
        source: `file://localhost${join(models, 'tiny.gguf')}`,
      },
      {
        path: join(root, 'data', 'demo.gguf'),
        size_bytes: 64,
        kind: 'model_dir',
        source: `file://${join(root, 'data', 'demo.gguf')}`,
      },
      {
        path: join(models, 'llama', 'model.gguf'),
        kind: 'model_dir',
        source: `file://${join(models, 'llama', 'model.gguf')}`,
      },
    ]);
    for (const w of weights) WeightsReportSchema.parse(w);
  });

  it('says which model directory could not be listed and still lists the others', async () => {
    const models = join(root, 'models');
    await file(join(models, 'a.gguf'), 1);
    const { weights, problems } = await listWeights(join(root, 'cache'), [join(root, 'missing'), models], deps);
    expect(weights.map((w) => w.path)).toEqual([join(models, 'a.gguf')]);
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(/^cannot list the model directory .*missing: ENOENT/);
  });
});

describe('treeSizeBytes', () => {
  it('is null, not a partial sum, when part of the tree cannot be read', async () => {
    await file(join(root, 'a', 'b'), 5);
    const failing: typeof deps = {
      ...deps,
      readdir: (p) => (p.endsWith('/a') ? Promise.reject(new Error('EACCES')) : deps.readdir(p)),
    };
    expect(await treeSizeBytes(root, deps)).toBe(5);
    expect(await treeSizeBytes(root, failing)).toBeNull();
  });
});
