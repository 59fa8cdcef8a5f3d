import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Store } from '../store/index.js';
import { Catalog, loadCatalogFile } from './catalog.js';

const base = (over: Record<string, unknown> = {}) => ({
  name: 'qwen',
  source: 'hf://Qwen/Qwen2.5-0.5B-Instruct',
  profiles: [{ engine: 'vllm', gpus: 1 }],
  ...over,
});

async function freshCatalog(): Promise<{ catalog: Catalog; store: Store }> {
  const dir = mkdtempSync(join(tmpdir(), 'llmgw-catalog-'));
  const store = await Store.open({ location: { kind: 'sqlite', path: join(dir, 'db') } });
  return { catalog: await Catalog.create({ store }), store };
}

describe('catalog validation: one message per problem', () => {
  // [what is wrong, definition, a piece of the message that says how to fix it]
  const table: [string, Record<string, unknown>, string][] = [
    ['missing name', { source: 'hf://a/b', profiles: [{ engine: 'sim' }] }, 'name: is required'],
    ['missing source', { name: 'x', profiles: [{ engine: 'sim' }] }, 'source: is required'],
    ['no profiles', base({ profiles: [] }), 'a model needs at least one profile'],
    ['profile with no engine', base({ profiles: [{ gpus: 1 }] }), 'profiles[0].engine'],
    ['unknown engine', base({ profiles: [{ engine: 'tgi' }] }), 'want one of vllm, llamacpp, sglang, builtin, sim'],
    [
      'unknown field, with the nearest valid one',
      base({ profiles: [{ engine: 'vllm', gpu: 2 }] }),
      'profiles[0].gpu: unknown field; did you mean "gpus"?',
    ],
    ['unknown top-level field', base({ fallback: ['x'] }), 'fallback: unknown field; did you mean "fallbacks"?'],
    ['wrong type', base({ scaling: { min: 'two' } }), 'scaling.min'],
    ['min greater than max', base({ scaling: { min: 3, max: 2 } }), 'scaling: min (3) is greater than max (2)'],
    ['bad duration', base({ scaling: { idle_timeout: '10' } }), 'want a duration with a unit'],
    [
      'a queue timeout longer than a timer can wait',
      base({ capacity: { per_replica: 4, queue_timeout: '30d' } }),
      'capacity.queue_timeout: want a duration up to 24d',
    ],
    ['unknown source scheme', base({ source: 's3://bucket/model' }), 'source scheme "s3:" is not supported'],
    ['source with no scheme', base({ source: 'Qwen/Qwen2.5' }), 'has no scheme'],
    ['plain http source', base({ source: 'http://example.com/m.gguf' }), 'uses plain http'],
    ['bad name', base({ name: '-x' }), 'name: want 1-128 letters'],
    ['alias equal to the name', base({ aliases: ['qwen'] }), `"qwen" is the model's own name`],
    ['fallback to itself', base({ fallbacks: ['qwen'] }), 'cannot fall back to itself'],
    ['fallback naming no model', base({ fallbacks: ['ghost'] }), '"ghost" names no model in the catalog'],
    [
      'GPU class on a CPU profile',
      base({ profiles: [{ engine: 'builtin', gpu_classes: ['h100-80gb'] }] }),
      'need gpus of at least 1',
    ],
    ['multi-node builtin', base({ profiles: [{ engine: 'builtin', shards: 2 }] }), 'runs on one node'],
    ['bad pool selector', base({ profiles: [{ engine: 'vllm', pool: 'zone in (a,' }] }), 'profiles[0].pool'],
    [
      'bad env name',
      base({ profiles: [{ engine: 'vllm', env: { 'BAD-NAME': '1' } }] }),
      'want an environment variable name',
    ],
    // A profile env that preloads or imports code ran the model author's code on a GPU node (issue 17).
    [
      'a loader hook in a profile env',
      base({ profiles: [{ engine: 'vllm', env: { LD_PRELOAD: '/tmp/x.so' } }] }),
      'profiles[0].env.LD_PRELOAD: LD_PRELOAD is a loader or interpreter hook',
    ],
    [
      'an endpoint no engine has',
      base({ endpoints: ['chat', 'speech'] }),
      'endpoints[1]: want one of chat, completions, embeddings, rerank, score, transcriptions, tokenize',
    ],
    ['an empty endpoints list', base({ endpoints: [] }), 'leave endpoints out for what its engines serve'],
    ['an endpoint listed twice', base({ endpoints: ['rerank', 'rerank'] }), 'endpoints: rerank listed twice'],
    [
      'an interpreter hook in a profile env',
      base({ profiles: [{ engine: 'sim', env: { NODE_OPTIONS: '--import=data:text/javascript,1' } }] }),
      'allow_unsafe_profile_env: true',
    ],
  ];

  for (const [what, def, message] of table) {
    it(`refuses ${what}`, async () => {
      const { catalog, store } = await freshCatalog();
      await expect(catalog.add(def, 'test')).rejects.toMatchObject({
        code: 'LLMGW_CATALOG_INVALID',
        message: expect.stringContaining(message),
      });
      expect(await store.models.list(), 'a refused model leaves nothing in the store').toEqual([]);
      await store.close();
    });
  }

  it('lists every problem of one definition at once', async () => {
    const { catalog, store } = await freshCatalog();
    const err = await catalog
      .add(base({ source: 'ftp://x', scaling: { min: 5, max: 1 }, fallbacks: ['ghost'] }), 't')
      .catch((e: unknown) => e);
    expect((err as { problems: string[] }).problems).toHaveLength(3);
    await store.close();
  });

  it('refuses a name or alias that collides with another model', async () => {
    const { catalog, store } = await freshCatalog();
    await catalog.add(base({ aliases: ['small'] }), 't');
    await expect(catalog.add(base({ source: 'hf://a/b' }), 't')).rejects.toThrow(
      'name "qwen" is already the name of a model',
    );
    await expect(catalog.add(base({ name: 'other', aliases: ['small'] }), 't')).rejects.toThrow(
      'alias "small" is already an alias of model "qwen"',
    );
    await expect(catalog.add(base({ name: 'small' }), 't')).rejects.toThrow(
      'name "small" is already an alias of model "qwen"',
    );
    await expect(catalog.add(base({ name: 'x', aliases: ['qwen'] }), 't')).rejects.toThrow(
      'alias "qwen" is already the name of a model',
    );
    await store.close();
  });

  it('refuses a fallback cycle', async () => {
    const { catalog, store } = await freshCatalog();
    await catalog.add(base({ name: 'a' }), 't');
    await catalog.add(base({ name: 'b', fallbacks: ['a'] }), 't');
    // c -> b -> a is fine; a cycle needs an edge back, which only a file can create at once.
    await catalog.add(base({ name: 'c', fallbacks: ['b'] }), 't');
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-cycle-'));
    const file = join(dir, 'catalog.yaml');
    writeFileSync(
      file,
      'models:\n  - {name: x, source: "hf://a/x", fallbacks: [y], profiles: [{engine: sim}]}\n  - {name: y, source: "hf://a/y", fallbacks: [x], profiles: [{engine: sim}]}\n',
    );
    expect(() => loadCatalogFile(file)).toThrow(/a cycle x -> y -> x/);
    await store.close();
  });

  it('fills the defaults a user expects', async () => {
    const { catalog, store } = await freshCatalog();
    const m = await catalog.add(
      base({ profiles: [{ engine: 'vllm' }, { engine: 'builtin' }, { engine: 'vllm', gpus: 2 }] }),
      't',
    );
    expect(m.scaling).toEqual({
      min: 1,
      max: 1,
      idleTimeoutMs: null,
      targetInflight: 8,
      windowMs: 30_000,
      cooldownMs: 300_000,
    });
    expect(m.profiles.map((p) => [p.name, p.gpus, p.shards])).toEqual([
      ['vllm', 1, 1],
      ['builtin', 0, 1],
      ['vllm-3', 2, 1],
    ]);
    await store.close();
  });
});

describe('catalog resolve, remove and origins', () => {
  it('resolves a model by name or alias', async () => {
    const { catalog, store } = await freshCatalog();
    await catalog.add(base({ aliases: ['small', 'q'] }), 't');
    expect(catalog.resolve('q')?.name).toBe('qwen');
    expect(catalog.resolve('qwen')?.name).toBe('qwen');
    expect(catalog.resolve('Qwen'), 'names are case-sensitive like the OpenAI API').toBeUndefined();
    await store.close();
  });

  it('refuses to remove a model others fall back to, naming them', async () => {
    const { catalog, store } = await freshCatalog();
    await catalog.add(base({ name: 'small' }), 't');
    await catalog.add(base({ name: 'big', fallbacks: ['small'] }), 't');
    await catalog.add(base({ name: 'huge', fallbacks: ['small'] }), 't');
    await expect(catalog.remove('small', 't')).rejects.toMatchObject({
      code: 'LLMGW_MODEL_IN_USE',
      message: expect.stringContaining('"big", "huge"'),
    });
    await catalog.remove('big', 't');
    await catalog.remove('huge', 't');
    await catalog.remove('small', 't');
    expect(catalog.models()).toEqual([]);
    await store.close();
  });

  it('keeps file models read-only and lets stored ones live beside them', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-file-'));
    const file = join(dir, 'catalog.yaml');
    writeFileSync(file, '- name: from-file\n  source: hf://a/b\n  profiles: [{engine: sim}]\n');
    const store = await Store.open({ location: { kind: 'sqlite', path: join(dir, 'db') } });
    const catalog = await Catalog.create({ store, catalogFile: file });
    await catalog.add(base({ name: 'stored', fallbacks: ['from-file'] }), 't');
    expect(catalog.models().map((m) => `${m.name}:${m.origin}`)).toEqual(['from-file:file', 'stored:store']);
    await expect(catalog.remove('from-file', 't')).rejects.toMatchObject({ code: 'LLMGW_MODEL_FROM_FILE' });
    await expect(catalog.add(base({ name: 'from-file' }), 't')).rejects.toThrow('already the name of a model');
    await store.close();
  });

  it('stops start-up when the file and the store define the same name', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-clash-'));
    const store = await Store.open({ location: { kind: 'sqlite', path: join(dir, 'db') } });
    const plain = await Catalog.create({ store });
    await plain.add(base({ name: 'both' }), 'alice');
    const file = join(dir, 'catalog.yaml');
    writeFileSync(file, '- name: both\n  source: hf://a/b\n  profiles: [{engine: sim}]\n');
    await expect(Catalog.create({ store, catalogFile: file })).rejects.toMatchObject({
      code: 'LLMGW_CATALOG_CONFLICT',
      message: expect.stringContaining('the catalog file and the store both define "both"'),
    });
    await store.close();
  });

  it('without a store, refuses writes with a reason', async () => {
    const catalog = await Catalog.create({ store: null });
    await expect(catalog.add(base(), 't')).rejects.toMatchObject({
      code: 'LLMGW_NO_STORE',
      message: expect.stringContaining('would not survive a restart'),
    });
  });

  it('accepts loader and interpreter hooks in a profile env only when the operator allows them', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-unsafe-env-'));
    const store = await Store.open({ location: { kind: 'sqlite', path: join(dir, 'db') } });
    const catalog = await Catalog.create({ store, allowUnsafeProfileEnv: true });
    const model = await catalog.add(base({ profiles: [{ engine: 'vllm', env: { PYTHONPATH: '/opt/plugins' } }] }), 't');
    expect(model.profiles[0]!.env).toEqual({ PYTHONPATH: '/opt/plugins' });
    await store.close();
    const file = join(dir, 'catalog.yaml');
    writeFileSync(file, '- name: a\n  source: hf://a/b\n  profiles: [{engine: sim, env: {BASH_ENV: /tmp/x}}]\n');
    expect(() => loadCatalogFile(file), 'the catalog file is checked too').toThrow(
      /model "a": profiles\[0\]\.env\.BASH_ENV: BASH_ENV is a loader or interpreter hook/,
    );
    expect(loadCatalogFile(file, { allowUnsafeProfileEnv: true }).map((m) => m.name)).toEqual(['a']);
  });

  it('reports every problem of a catalog file, per model', () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-badfile-'));
    const file = join(dir, 'catalog.yaml');
    writeFileSync(
      file,
      '- name: a\n  source: s3://x\n  profiles: [{engine: sim}]\n- name: b\n  source: hf://a/b\n  profiles: []\n',
    );
    expect(() => loadCatalogFile(file)).toThrow(
      /model "a": source: source scheme "s3:"[\s\S]*model "b": profiles: a model needs at least one profile/,
    );
  });
});
