// hf:// sources against a loopback stand-in for the hub's endpoints, reached
// through the hub URL option exactly as a mirror set in HF_ENDPOINT would be.
import { mkdtemp, readdir, readFile, realpath, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { cacheNameOf } from '../../protocol/index.js';
import { WeightCache } from '../cache/index.js';
import { Fetcher, type FetcherOptions } from './fetcher.js';
import { unsafeRepoPath } from './hub.js';
import { HubStandIn, patternBytes, sha256, type HubRepoFixture } from '../../../test/support/weight-servers.js';

const MiB = 1024 * 1024;
const COMMIT = 'c0ffee'.padEnd(40, '0');
const TOKEN = 'hf_test_token_never_logged';

let base: string;
let hub: HubStandIn;
let cache: WeightCache;

function tinyRepo(overrides: Partial<HubRepoFixture> = {}): HubRepoFixture {
  return {
    id: 'acme/tiny',
    commit: COMMIT,
    files: {
      'config.json': Buffer.from('{"model_type":"llama"}\n'),
      'model-00001-of-00002.safetensors': patternBytes(2 * MiB + 5, 21),
      'model-00002-of-00002.safetensors': patternBytes(MiB, 22),
      'gguf/tiny.Q4_K_M.gguf': patternBytes(3 * MiB, 23),
    },
    ...overrides,
  };
}

beforeEach(async () => {
  base = await realpath(await mkdtemp(join(tmpdir(), 'llmgw-hub-')));
  hub = await new HubStandIn().listen();
  cache = await WeightCache.create({ cacheDir: join(base, 'cache') });
});

afterEach(async () => {
  await hub.close();
  await rm(base, { recursive: true, force: true });
});

function fetcher(options: Partial<FetcherOptions> = {}, onCache = cache): Fetcher {
  return new Fetcher({ cache: onCache, hubUrl: hub.url, ...options });
}

async function errorOf(promise: Promise<unknown>): Promise<Error & { code?: string }> {
  try {
    await promise;
  } catch (err) {
    return err as Error & { code?: string };
  }
  throw new Error('expected the fetch to fail, and it succeeded');
}

describe('fetching from the hub', () => {
  it('downloads a whole repository at the commit its branch points at', async () => {
    const repo = tinyRepo();
    hub.add(repo);
    const result = await fetcher().fetch('hf://acme/tiny');

    const name = cacheNameOf('hf://acme/tiny')!;
    expect(result.path, 'an engine gets the repository directory').toBe(join(cache.cacheDir, name, 'files'));
    for (const [path, content] of Object.entries(repo.files)) {
      expect(sha256(await readFile(join(result.path, path))), `${path} arrived whole`).toBe(sha256(content));
    }
    expect(result.manifest).toMatchObject({
      revision: 'main',
      commit: COMMIT,
      canonical_source: 'hf://acme/tiny@main',
      weights_path: 'files',
    });
    expect(result.manifest!.files.map((f) => f.path).sort()).toEqual(Object.keys(repo.files).sort());
    expect(result.sizeBytes).toBe(Object.values(repo.files).reduce((sum, b) => sum + b.length, 0));
    const downloaded = hub.downloads().map((r) => r.path);
    expect(
      downloaded.every((p) => p.includes(`/resolve/${COMMIT}/`)),
      'every file comes from the one commit, not the moving branch',
    ).toBe(true);
    expect(await readdir(cache.cacheDir)).toEqual(expect.arrayContaining([name]));
  });

  it('downloads one file of a repository', async () => {
    hub.add(tinyRepo());
    const result = await fetcher().fetch('hf://acme/tiny/gguf/tiny.Q4_K_M.gguf');
    expect(result.path.endsWith('/files/gguf/tiny.Q4_K_M.gguf')).toBe(true);
    expect(sha256(await readFile(result.path))).toBe(sha256(tinyRepo().files['gguf/tiny.Q4_K_M.gguf']!));
    expect(hub.downloads(), 'only that file was downloaded').toHaveLength(1);
  });

  it('resumes a cut download with a Range request in a new fetcher, as after an agent restart', async () => {
    const repo = tinyRepo({ files: { 'model.safetensors': patternBytes(4 * MiB, 31) } });
    hub.add(repo);
    hub.cutFirstDownload = 2 * MiB;
    const cut = await errorOf(fetcher().fetch('hf://acme/tiny'));
    expect(cut.code, cut.message).toBe('LLMGW_FETCH_FAILED');

    const restarted = await WeightCache.create({ cacheDir: join(base, 'cache') });
    const result = await fetcher({}, restarted).fetch('hf://acme/tiny');
    expect(sha256(await readFile(join(result.path, 'model.safetensors')))).toBe(
      sha256(repo.files['model.safetensors']!),
    );
    const [first, second] = hub.downloads();
    expect(first?.range, 'the first download asked for the whole file').toBeUndefined();
    expect(second?.range, 'the second asked only for the rest').toMatch(/^bytes=[1-9]\d*-$/);
  });

  it('starts afresh, rather than splicing, when the branch moved since the partial began', async () => {
    hub.add(tinyRepo({ files: { 'model.safetensors': patternBytes(4 * MiB, 61) } }));
    hub.cutFirstDownload = 2 * MiB;
    await errorOf(fetcher().fetch('hf://acme/tiny'));
    const moved = tinyRepo({
      commit: 'beef'.padEnd(40, '1'),
      files: { 'model.safetensors': patternBytes(4 * MiB, 62) },
    });
    hub.add(moved);
    hub.cutFirstDownload = undefined;

    const result = await fetcher().fetch('hf://acme/tiny');
    expect(result.manifest?.commit).toBe(moved.commit);
    expect(sha256(await readFile(join(result.path, 'model.safetensors')))).toBe(
      sha256(moved.files['model.safetensors']!),
    );
    const last = hub.downloads().at(-1)!;
    expect(last.path).toContain(`/resolve/${moved.commit}/`);
    expect(last.range, "the old commit's bytes were not resumed").toBeUndefined();
  });

  it('says 404 in words when the repository does not exist', async () => {
    const err = await errorOf(fetcher().fetch('hf://acme/nope'));
    expect(err.code).toBe('LLMGW_FETCH_NOT_FOUND');
    expect(err.message).toBe('hf://acme/nope@main: the hub has no such repository or revision (404)');
    expect(await readdir(cache.cacheDir), 'nothing was started in the cache').toEqual(['.trash', '.used']);
  });

  it('says 404 in words when the revision does not exist', async () => {
    hub.add(tinyRepo());
    const err = await errorOf(fetcher().fetch('hf://acme/tiny@v9'));
    expect(err.code).toBe('LLMGW_FETCH_NOT_FOUND');
    expect(err.message).toBe('hf://acme/tiny@v9: the hub has no such repository or revision (404)');
  });

  it('says which file is missing from a repository', async () => {
    hub.add(tinyRepo());
    const err = await errorOf(fetcher().fetch('hf://acme/tiny/nope.gguf'));
    expect(err.code).toBe('LLMGW_FETCH_NOT_FOUND');
    expect(err.message).toMatch(/has no file or directory nope\.gguf/);
  });

  it('says 401 in words, pointing at HF_TOKEN', async () => {
    hub.add(tinyRepo({ token: TOKEN }));
    const err = await errorOf(fetcher().fetch('hf://acme/tiny'));
    expect(err.code).toBe('LLMGW_FETCH_UNAUTHORIZED');
    expect(err.message).toMatch(/^hf:\/\/acme\/tiny@main: the hub refused access \(401\); set HF_TOKEN on the agent/);
  });

  it('sends HF_TOKEN to the hub, and never puts it in a message', async () => {
    hub.add(tinyRepo({ token: TOKEN, files: { 'model.gguf': patternBytes(MiB, 41) } }));
    const wrong = await errorOf(fetcher({ hfToken: 'hf_wrong_secret' }).fetch('hf://acme/tiny/model.gguf'));
    expect(wrong.code).toBe('LLMGW_FETCH_UNAUTHORIZED');
    expect(wrong.message).toMatch(/HF_TOKEN may lack access/);
    expect(wrong.message).not.toMatch(/hf_wrong_secret/);
    expect(JSON.stringify((wrong as { context?: unknown }).context)).not.toMatch(/hf_wrong_secret/);

    const result = await fetcher({ hfToken: TOKEN }).fetch('hf://acme/tiny/model.gguf');
    expect(result.sizeBytes).toBe(MiB);
    expect(hub.downloads()[0]?.authorization).toBe(`Bearer ${TOKEN}`);
  });

  it('refuses a file whose bytes do not hash to the listed sha256, leaving nothing in the cache', async () => {
    hub.add(
      tinyRepo({
        files: { 'model.safetensors': patternBytes(MiB, 51) },
        served: { 'model.safetensors': patternBytes(MiB, 52) },
      }),
    );
    const err = await errorOf(fetcher().fetch('hf://acme/tiny'));
    expect(err.code, err.message).toBe('LLMGW_FETCH_VERIFY_FAILED');
    expect(err.message).toMatch(/model\.safetensors hashes to sha256/);
    expect(await readdir(cache.cacheDir), 'no entry and no partial').toEqual(['.trash', '.used']);
  });
});

describe('unsafeRepoPath', () => {
  it('refuses listed paths that would leave the entry', () => {
    expect(unsafeRepoPath('model.safetensors')).toBeNull();
    expect(unsafeRepoPath('sub/dir/x.bin')).toBeNull();
    for (const bad of ['', '/etc/passwd', '../x', 'a/../../x', 'a//b', './a', 'a\\b', 'a\0b']) {
      expect(unsafeRepoPath(bad), JSON.stringify(bad)).not.toBeNull();
    }
  });
});
