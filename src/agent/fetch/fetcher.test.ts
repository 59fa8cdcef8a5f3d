import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, realpath, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isLlmgwError } from '../../errors/index.js';
import { cacheNameOf } from '../../protocol/index.js';
import { WeightCache } from '../cache/index.js';
import { Fetcher, fileNameOf, type FetcherOptions } from './fetcher.js';
import type { FetchProgress } from './progress.js';
import { FileServer, patternBytes, sha256 } from '../../../test/support/weight-servers.js';
import { waitFor } from '../../../test/support/wait.js';

const MiB = 1024 * 1024;

/** Whether this machine lets the test mount a small tmpfs (root in a sandbox that permits it); the reason when not. */
const tmpfsProbe = ((): { ok: boolean; reason: string } => {
  let dir: string | null = null;
  try {
    dir = execFileSync('mktemp', ['-d'], { encoding: 'utf8' }).trim();
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', dir], { stdio: 'ignore' });
    execFileSync('umount', [dir], { stdio: 'ignore' });
    return { ok: true, reason: '' };
  } catch (err) {
    return { ok: false, reason: `cannot mount a tmpfs here (${(err as Error).message.split('\n')[0]})` };
  } finally {
    if (dir) execFileSync('rmdir', [dir]);
  }
})();
if (!tmpfsProbe.ok) console.warn(`the full-disk test runs on an injected ENOSPC stream only: ${tmpfsProbe.reason}`);

let base: string;
let server: FileServer;
let cache: WeightCache;

beforeEach(async () => {
  base = await realpath(await mkdtemp(join(tmpdir(), 'llmgw-fetch-')));
  server = await new FileServer().listen();
  cache = await WeightCache.create({ cacheDir: join(base, 'cache') });
});

afterEach(async () => {
  await server.close();
  await rm(base, { recursive: true, force: true });
});

function fetcher(options: Partial<FetcherOptions> = {}, onCache = cache): Fetcher {
  return new Fetcher({ cache: onCache, allowHttp: true, ...options });
}

async function cacheListing(dir = cache.cacheDir): Promise<string[]> {
  return (await readdir(dir)).filter((n) => n !== '.trash' && n !== '.used').sort();
}

async function errorOf(promise: Promise<unknown>): Promise<Error & { code?: string }> {
  try {
    await promise;
  } catch (err) {
    return err as Error & { code?: string };
  }
  throw new Error('expected the fetch to fail, and it succeeded');
}

describe('fetching a URL', () => {
  it('downloads a file into the cache under its cache name, with a manifest', async () => {
    const content = patternBytes(3 * MiB + 17);
    server.files.set('/models/tiny.gguf', content);
    const source = `${server.url}/models/tiny.gguf`;
    const progress: FetchProgress[] = [];
    const result = await fetcher().fetch(source, { onProgress: (p) => progress.push(p) });

    const name = cacheNameOf(source, { allowHttp: true })!;
    expect(result.path).toBe(join(cache.cacheDir, name, 'files', 'tiny.gguf'));
    expect(sha256(await readFile(result.path)), 'the bytes on disk are the served ones').toBe(sha256(content));
    expect(result.sizeBytes).toBe(content.length);
    expect(result.manifest).toMatchObject({
      source,
      cache_name: name,
      weights_path: 'files/tiny.gguf',
      files: [{ path: 'tiny.gguf', size_bytes: content.length, sha256: sha256(content) }],
      size_bytes: content.length,
    });
    expect(await cacheListing(), 'only the entry remains: no partial').toEqual([name]);
    expect(await readdir(join(cache.cacheDir, name))).toEqual(['files', 'manifest.json']);
    expect(progress.at(-1)).toMatchObject({ bytesDone: content.length, totalBytes: content.length });
  });

  it('returns a cached entry without asking the server again', async () => {
    server.files.set('/m.bin', patternBytes(1000));
    const source = `${server.url}/m.bin`;
    const first = await fetcher().fetch(source);
    const second = await fetcher().fetch(source);
    expect(second).toEqual(first);
    expect(server.requests, 'one request in all').toHaveLength(1);
  });

  it('resumes a download cut halfway, in a new fetcher as after an agent restart', async () => {
    const content = patternBytes(4 * MiB, 7);
    server.files.set('/big.safetensors', content);
    server.cutFirst = 2 * MiB;
    const source = `${server.url}/big.safetensors`;

    const cut = await errorOf(fetcher().fetch(source));
    expect(cut.code, cut.message).toBe('LLMGW_FETCH_FAILED');
    expect(cut.message).toMatch(/partial download is kept/);
    const name = cacheNameOf(source, { allowHttp: true })!;
    const partialFile = join(cache.cacheDir, `.partial-${name}`, 'files', 'big.safetensors');
    const keptBytes = (await readFile(partialFile)).length;
    expect(keptBytes, 'some bytes survived the cut').toBeGreaterThan(0);
    expect(keptBytes).toBeLessThanOrEqual(2 * MiB);

    const restartedCache = await WeightCache.create({ cacheDir: join(base, 'cache') });
    const progress: FetchProgress[] = [];
    const result = await fetcher({}, restartedCache).fetch(source, { onProgress: (p) => progress.push(p) });

    expect(sha256(await readFile(result.path)), 'the resumed file is whole and in order').toBe(sha256(content));
    expect(server.requests).toHaveLength(2);
    const resumed = server.requests[1]!;
    expect(resumed.range, 'the second request asked for the rest only').toBe(`bytes=${keptBytes}-`);
    expect(resumed.ifRange, 'and only if the file is unchanged').toBe(`"${sha256(content)}"`);
    expect(progress[0]?.bytesDone, 'progress starts from the bytes already on disk').toBe(keptBytes);
    expect(await cacheListing()).toEqual([name]);
  });

  it('starts again from zero when the server ignores the range', async () => {
    const content = patternBytes(2 * MiB, 3);
    server.files.set('/w.bin', content);
    server.cutFirst = MiB;
    const source = `${server.url}/w.bin`;
    await errorOf(fetcher().fetch(source));
    server.ignoreRange = true;
    const result = await fetcher().fetch(source);
    expect(server.requests[1]?.range, 'a resume was asked for').toMatch(/^bytes=\d+-$/);
    expect(sha256(await readFile(result.path)), 'the whole body replaced the partial instead of being appended').toBe(
      sha256(content),
    );
  });

  it('refuses bytes that do not match #sha256 and leaves nothing in the cache', async () => {
    server.files.set('/m.gguf', patternBytes(100_000));
    const source = `${server.url}/m.gguf#sha256=${'0'.repeat(64)}`;
    const err = await errorOf(fetcher().fetch(source));
    expect(err.code, err.message).toBe('LLMGW_FETCH_VERIFY_FAILED');
    expect(err.message).toMatch(/hashes to sha256 [0-9a-f]{64}, not the expected 0{64}/);
    expect(await cacheListing(), 'no entry and no partial').toEqual([]);
  });

  it('accepts bytes that match #sha256', async () => {
    const content = patternBytes(100_000);
    server.files.set('/m.gguf', content);
    const result = await fetcher().fetch(`${server.url}/m.gguf#sha256=${sha256(content).toUpperCase()}`);
    expect(result.sizeBytes).toBe(content.length);
  });

  it('says 404 and 401 in words', async () => {
    const missing = await errorOf(fetcher().fetch(`${server.url}/nope.gguf`));
    expect(missing.code).toBe('LLMGW_FETCH_NOT_FOUND');
    expect(missing.message).toBe(`${server.url}/nope.gguf: the server has no such file (404)`);
    server.forceStatus = 401;
    const refused = await errorOf(fetcher().fetch(`${server.url}/secret.gguf?X-Signature=s3cr3t`));
    expect(refused.code).toBe('LLMGW_FETCH_UNAUTHORIZED');
    expect(refused.message).toMatch(/refused access \(401\)/);
    expect(refused.message, "a signed URL's query never reaches a message").not.toMatch(/s3cr3t/);
  });

  it('refuses plain http unless created for tests', async () => {
    const err = await errorOf(new Fetcher({ cache }).fetch(`${server.url}/m.gguf`));
    expect(isLlmgwError(err) && err.code).toBe('LLMGW_SOURCE_INVALID');
    expect(server.requests).toHaveLength(0);
  });

  it('shares one download between two concurrent fetches of the same source', async () => {
    const content = patternBytes(3 * MiB, 11);
    server.files.set('/shared.gguf', content);
    const source = `${server.url}/shared.gguf`;
    const shared = fetcher({ progressIntervalMs: 0 });
    const seenA: FetchProgress[] = [];
    const seenB: FetchProgress[] = [];
    const [a, b] = await Promise.all([
      shared.fetch(source, { onProgress: (p) => seenA.push(p) }),
      shared.fetch(source, { onProgress: (p) => seenB.push(p) }),
    ]);
    expect(a).toEqual(b);
    expect(server.requests, 'the server saw one request').toHaveLength(1);
    expect(seenA.at(-1)?.bytesDone).toBe(content.length);
    expect(seenB.at(-1)?.bytesDone, 'both callers see the progress').toBe(content.length);
    expect(shared.downloads(), 'nothing is left in flight').toEqual([]);
  });

  it('keeps downloading for one caller when the other gives up', async () => {
    const content = patternBytes(2 * MiB, 5);
    server.files.set('/s.gguf', content);
    let release = (): void => undefined;
    server.gate = new Promise<void>((resolve) => (release = resolve));
    const source = `${server.url}/s.gguf`;
    const shared = fetcher();
    const quitter = new AbortController();
    const first = shared.fetch(source, { signal: quitter.signal });
    const firstSettled = first.catch((err: unknown) => err);
    await waitFor('the download request to reach the server', () => server.requests.length === 1, {
      timeoutMs: 20_000,
      intervalMs: 5,
    });
    const joined: FetchProgress[] = [];
    const second = shared.fetch(source, { onProgress: (p) => joined.push(p) });
    await waitFor('the second caller to join and get the latest progress', () => joined.length > 0, {
      timeoutMs: 20_000,
      intervalMs: 5,
    });

    quitter.abort();
    expect(String(await firstSettled), 'the caller that gave up stops waiting').toMatch(/abort/i);
    release();
    const result = await second;
    expect(sha256(await readFile(result.path))).toBe(sha256(content));
    expect(server.requests, 'the download went on; it was not started again').toHaveLength(1);
  });

  it('throttles progress by the clock, not by chunks', async () => {
    const content = patternBytes(4 * MiB, 13);
    server.files.set('/t.gguf', content);
    const reports: FetchProgress[] = [];
    // A clock that never moves: only the first and the last report may be made.
    await fetcher({ now: () => 1_000, progressIntervalMs: 250 }).fetch(`${server.url}/t.gguf`, {
      onProgress: (p) => reports.push(p),
    });
    expect(reports.length, JSON.stringify(reports)).toBeLessThanOrEqual(3);
    expect(reports.at(-1)).toEqual({ bytesDone: content.length, totalBytes: content.length });
  });

  it('removes the partial when an injected write stream fails with ENOSPC', async () => {
    server.files.set('/huge.gguf', patternBytes(3 * MiB));
    let writtenBytes = 0;
    const fullAfter = MiB;
    const createWriteStream = (): Writable =>
      new Writable({
        write(chunk: Buffer, _encoding, callback) {
          if (writtenBytes + chunk.length > fullAfter) {
            callback(Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' }));
            return;
          }
          writtenBytes += chunk.length;
          callback();
        },
      });
    const err = await errorOf(fetcher({ createWriteStream }).fetch(`${server.url}/huge.gguf`));
    expect(err.code, err.message).toBe('LLMGW_DISK_FULL');
    expect(err.message).toMatch(
      new RegExp(
        `^disk full while fetching ${server.url}/huge.gguf into ${cache.cacheDir} \\(\\d+ of ${3 * MiB} bytes written\\)`,
      ),
    );
    expect(await cacheListing(), 'nothing partial stays in the cache').toEqual([]);
  });

  it.skipIf(!tmpfsProbe.ok)('reports a full disk on a 1 MiB tmpfs and removes the partial', async () => {
    const small = join(base, 'small');
    await mkdir(small);
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', small]);
    try {
      const smallCache = await WeightCache.create({ cacheDir: join(small, 'cache') });
      server.files.set('/huge.gguf', patternBytes(3 * MiB));
      const err = await errorOf(fetcher({}, smallCache).fetch(`${server.url}/huge.gguf`));
      expect(err.code, err.message).toBe('LLMGW_DISK_FULL');
      expect(err.message).toMatch(
        new RegExp(
          `^disk full while fetching ${server.url}/huge.gguf into ${smallCache.cacheDir} \\(\\d+ of ${3 * MiB} bytes written\\)`,
        ),
      );
      expect(await cacheListing(smallCache.cacheDir), 'nothing partial stays in the cache').toEqual([]);
    } finally {
      execFileSync('umount', [small]);
    }
  });
});

describe('file:// sources', () => {
  it('are used in place with their size read from disk, never copied', async () => {
    const dir = join(base, 'operator-model');
    await mkdir(join(dir, 'sub'), { recursive: true });
    await writeFile(join(dir, 'a.bin'), '12345');
    await writeFile(join(dir, 'sub', 'b.bin'), '1234567');
    const result = await fetcher().fetch(`file://${dir}`);
    expect(result).toEqual({ path: dir, sizeBytes: 12, manifest: null });
    const file = await fetcher().fetch(`file://${dir}/a.bin`);
    expect(file).toEqual({ path: join(dir, 'a.bin'), sizeBytes: 5, manifest: null });
    expect(await cacheListing(), 'nothing was written to the cache').toEqual([]);
  });

  it('say so when the path is missing', async () => {
    const err = await errorOf(fetcher().fetch(`file://${base}/nope`));
    expect(err.code).toBe('LLMGW_FETCH_NOT_FOUND');
    expect(err.message).toMatch(/no such file or directory on this node/);
  });
});

describe('options and names', () => {
  it('rejects an unknown option and a token that is not a hub token, without echoing it', () => {
    expect(() => new Fetcher({ cache, hfTokn: 'x' } as never)).toThrow(/"hfTokn" is unknown; did you mean "hfToken"/);
    try {
      new Fetcher({ cache, hfToken: 'ghp_not-a-hub-token' });
      throw new Error('expected a refusal');
    } catch (err) {
      expect((err as Error).message).toMatch(/HF_TOKEN does not start with "hf_"/);
      expect((err as Error).message).not.toMatch(/ghp_not-a-hub-token/);
    }
  });

  it("stores a URL's weights under a safe file name", () => {
    expect(fileNameOf('https://x.example/a/model.Q4_K_M.gguf?sig=1')).toBe('model.Q4_K_M.gguf');
    expect(fileNameOf('https://x.example/a/..%2F..%2Fetc')).toBe('_.._etc');
    expect(fileNameOf('https://x.example/')).toBe('download');
  });
});
