import { mkdir, mkdtemp, readdir, readFile, realpath, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { cacheNameOf } from '../../protocol/index.js';
import { MANIFEST_VERSION, type WeightManifest } from './manifest.js';
import { toWeightsReport, WeightCache } from './weight-cache.js';

let base: string;

beforeEach(async () => {
  base = await realpath(await mkdtemp(join(tmpdir(), 'llmgw-cache-')));
});

afterEach(async () => {
  await rm(base, { recursive: true, force: true });
});

const SOURCE = 'https://weights.example/models/tiny.gguf';

function manifestFor(name: string, sizeBytes: number): WeightManifest {
  return {
    version: MANIFEST_VERSION,
    source: SOURCE,
    canonical_source: SOURCE,
    cache_name: name,
    weights_path: 'files/tiny.gguf',
    files: [{ path: 'tiny.gguf', size_bytes: sizeBytes, sha256: '0'.repeat(64) }],
    size_bytes: sizeBytes,
    fetched_at: new Date(0).toISOString(),
  };
}

/** Writes a partial the way the fetcher does and commits it. */
async function commitOne(cache: WeightCache, source = SOURCE): Promise<string> {
  const name = cache.nameFor(source);
  await mkdir(join(cache.partialPath(name), 'files'), { recursive: true });
  await writeFile(join(cache.partialPath(name), 'files', 'tiny.gguf'), 'weights!');
  await cache.commit(name, { ...manifestFor(name, 8), source, canonical_source: source });
  return name;
}

describe('WeightCache', () => {
  it('creates a missing cache directory and pins its real path', async () => {
    await mkdir(join(base, 'real'));
    await symlink(join(base, 'real'), join(base, 'link'));
    const cache = await WeightCache.create({ cacheDir: join(base, 'link', 'cache') });
    expect(cache.cacheDir, 'the pinned path is the real one, not the link').toBe(join(base, 'real', 'cache'));
    expect((await stat(cache.cacheDir)).isDirectory()).toBe(true);
  });

  it('rejects an unknown option, naming the nearest valid one', async () => {
    await expect(WeightCache.create({ cacheDir: base, cachedir: 'x' } as never)).rejects.toThrow(
      /"cachedir" is unknown; did you mean "cacheDir"/,
    );
  });

  it('names an entry by the cache name of its source and refuses file:// sources', async () => {
    const cache = await WeightCache.create({ cacheDir: join(base, 'cache') });
    expect(cache.pathFor(SOURCE)).toBe(join(cache.cacheDir, cacheNameOf(SOURCE)!));
    expect(() => cache.pathFor('file:///models/x')).toThrow(/used in place and never cached/);
  });

  it('lists a committed entry with its manifest, and not partials', async () => {
    const cache = await WeightCache.create({ cacheDir: join(base, 'cache') });
    const name = await commitOne(cache);
    const other = cache.nameFor('https://weights.example/other.gguf');
    await mkdir(join(cache.partialPath(other), 'files'), { recursive: true });

    const entries = await cache.entries();
    expect(
      entries.map((e) => e.name),
      'only the committed entry is listed',
    ).toEqual([name]);
    const [entry] = entries;
    expect(entry!.weightsPath).toBe(join(cache.cacheDir, name, 'files', 'tiny.gguf'));
    expect(await readFile(entry!.weightsPath, 'utf8')).toBe('weights!');
    expect(entry!.sizeBytes).toBe(8);
    expect(entry!.lastUsedMs, 'never used yet reads as unknown, not zero').toBeNull();
    expect(await cache.has(SOURCE)).toBe(true);
    expect(await cache.has('https://weights.example/other.gguf'), 'a partial is not a cached source').toBe(false);
    expect(await readdir(join(cache.cacheDir, name))).toEqual(['files', 'manifest.json']);
  });

  it('records the last use of an entry', async () => {
    let nowMs = 1_700_000_000_000;
    const cache = await WeightCache.create({ cacheDir: join(base, 'cache'), now: () => nowMs });
    const name = await commitOne(cache);
    await cache.markUsed(name);
    expect((await cache.lookup(name))!.lastUsedMs).toBe(nowMs);
    nowMs += 60_000;
    await cache.markUsed(name);
    const entry = (await cache.lookup(name))!;
    expect(entry.lastUsedMs).toBe(nowMs);
    expect(toWeightsReport(entry)).toEqual({
      path: join(cache.cacheDir, name),
      size_bytes: 8,
      kind: 'cache',
      cache_name: name,
      source: SOURCE,
      last_used_ms: nowMs,
    });
  });

  it('does not list an entry whose manifest points outside it', async () => {
    const cache = await WeightCache.create({ cacheDir: join(base, 'cache') });
    const name = await commitOne(cache);
    const manifestPath = join(cache.cacheDir, name, 'manifest.json');
    const manifest = JSON.parse(await readFile(manifestPath, 'utf8')) as WeightManifest;
    await writeFile(manifestPath, JSON.stringify({ ...manifest, weights_path: '../../etc' }));
    expect(await cache.lookup(name), 'an edited manifest must not hand an engine a path outside the entry').toBeNull();
  });

  it('keeps the existing entry when a second commit of the same name arrives', async () => {
    const cache = await WeightCache.create({ cacheDir: join(base, 'cache') });
    const name = await commitOne(cache);
    await mkdir(join(cache.partialPath(name), 'files'), { recursive: true });
    await writeFile(join(cache.partialPath(name), 'files', 'tiny.gguf'), 'later!!!');
    const entry = await cache.commit(name, manifestFor(name, 8));
    expect(await readFile(entry.weightsPath, 'utf8')).toBe('weights!');
    expect(
      (await readdir(cache.cacheDir)).filter((n) => n.startsWith('.partial-')),
      'the losing partial is dropped',
    ).toEqual([]);
  });
});
