// The agent's half of "collect orphans": every way a path can try to reach
// something llmgw did not fetch is refused, with the target left intact. A
// miss here deletes an operator's model, which may have taken a week to copy.
import { execFileSync } from 'node:child_process';
import {
  link,
  lstat,
  mkdir,
  mkdtemp,
  readdir,
  readFile,
  readlink,
  realpath,
  rename,
  rm,
  stat,
  symlink,
  writeFile,
} from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { pathSyntaxProblem } from './safe-remove.js';
import { WeightCache, type RemoveCheck, type RemoveResult } from './weight-cache.js';

const NAME = 'a'.repeat(64);
const OTHER = 'b'.repeat(64);
const notInUse = (): null => null;

/** Whether this machine lets the test mount (root in a sandbox that permits it); the reason when not. */
const mountProbe = ((): { ok: boolean; reason: string } => {
  let dir: string | null = null;
  try {
    dir = execFileSync('mktemp', ['-d'], { encoding: 'utf8' }).trim();
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', dir], { stdio: 'ignore' });
    execFileSync('umount', [dir], { stdio: 'ignore' });
    return { ok: true, reason: '' };
  } catch (err) {
    return {
      ok: false,
      reason: `cannot mount here (${(err as Error).message.split('\n')[0]}); needs root and a sandbox that allows mount`,
    };
  } finally {
    if (dir) execFileSync('rmdir', [dir]);
  }
})();
if (!mountProbe.ok) console.warn(`skipping the mount tests: ${mountProbe.reason}`);

let base: string;
let outside: string;
let cache: WeightCache;
const mounted: string[] = [];

beforeEach(async () => {
  base = await realpath(await mkdtemp(join(tmpdir(), 'llmgw-remove-')));
  outside = join(base, 'outside');
  await mkdir(outside);
  await writeFile(join(outside, 'secret.txt'), "the operator's model");
  cache = await WeightCache.create({ cacheDir: join(base, 'cache') });
});

afterEach(async () => {
  for (const point of mounted.splice(0).reverse()) {
    try {
      execFileSync('umount', [point], { stdio: 'ignore' });
    } catch {
      // Already gone, or moved into the trash: the next lines find it.
    }
  }
  // A mount the walk left in the trash would make rm fail; unmount whatever is still under base.
  const info = await readFile('/proc/self/mountinfo', 'utf8').catch(() => '');
  for (const line of info.split('\n').reverse()) {
    const point = line.split(' ')[4];
    if (point?.startsWith(`${base}/`)) execFileSync('umount', [point], { stdio: 'ignore' });
  }
  await rm(base, { recursive: true, force: true });
});

/** A cache entry with two files, 5 and 7 bytes. */
async function makeEntry(name = NAME): Promise<string> {
  const entry = join(cache.cacheDir, name);
  await mkdir(join(entry, 'files', 'sub'), { recursive: true });
  await writeFile(join(entry, 'files', 'a.bin'), '12345');
  await writeFile(join(entry, 'files', 'sub', 'b.bin'), '1234567');
  return entry;
}

/** Every path under `root` with its file content, link target or "dir": to show that nothing changed. */
async function snapshot(root: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  const walk = async (path: string, rel: string): Promise<void> => {
    const stats = await lstat(path);
    if (stats.isSymbolicLink()) out[rel] = `-> ${await readlink(path)}`;
    else if (stats.isDirectory()) {
      out[rel] = 'dir';
      for (const name of await readdir(path)) await walk(join(path, name), `${rel}/${name}`);
    } else out[rel] = await readFile(path, 'utf8');
  };
  await walk(root, '.');
  return out;
}

function expectRefused(result: RemoveResult, check: RemoveCheck, reason?: RegExp): void {
  expect(result.removed, `expected a refusal by ${check}, got ${JSON.stringify(result)}`).toBe(false);
  if (result.removed) return;
  expect(result.check, result.reason).toBe(check);
  expect(result.reason.length, 'a refusal says why in a sentence').toBeGreaterThan(10);
  if (reason) expect(result.reason).toMatch(reason);
}

describe('removing a cache entry refuses', () => {
  it.each([
    ['a relative traversal', '../x'],
    ['a traversal from the cache dir', () => `${cache.cacheDir}/../outside`],
    ['percent-encoded dots and slash', '%2e%2e%2f'],
    ['percent-encoded traversal inside the cache dir', () => `${cache.cacheDir}/%2e%2e%2foutside`],
    ['a traversal with an encoded slash', '..%2f'],
    ['an encoded slash inside the cache dir', () => `${cache.cacheDir}/..%2foutside`],
    ['fullwidth dots and slash', () => `${cache.cacheDir}/\uFF0E\uFF0E\uFF0Foutside`],
    ['one-dot leaders and a division slash', () => `${cache.cacheDir}/\u2024\u2024\u2215outside`],
    ['a fraction slash', () => `${cache.cacheDir}/\u2024\u2024\u2044outside`],
    ['a fullwidth traversal with no prefix', '\uFF0E\uFF0E\uFF0Fetc\uFF0Fpasswd'],
    ['a NUL byte', () => `${cache.cacheDir}/${NAME}\0`],
    ['the empty string', ''],
    ['"."', '.'],
    ['a relative cache name', NAME],
    ['a "." segment', () => `${cache.cacheDir}/./${NAME}`],
    ['a trailing slash', () => `${cache.cacheDir}/${NAME}/`],
  ])('%s, by its spelling', async (_, raw) => {
    const entry = await makeEntry();
    const before = await snapshot(base);
    const result = await cache.remove(typeof raw === 'function' ? raw() : raw, notInUse);
    expectRefused(result, 'path_syntax');
    expect(await snapshot(base), 'nothing on disk changed').toEqual(before);
    expect((await stat(entry)).isDirectory()).toBe(true);
  });

  it('/etc/passwd, as outside the cache', async () => {
    const before = await readFile('/etc/passwd', 'utf8');
    expectRefused(await cache.remove('/etc/passwd', notInUse), 'outside_cache');
    expect(await readFile('/etc/passwd', 'utf8')).toBe(before);
  });

  it('a cache-named directory elsewhere, as outside the cache', async () => {
    await mkdir(join(outside, NAME));
    expectRefused(await cache.remove(join(outside, NAME), notInUse), 'outside_cache');
    expect((await stat(join(outside, NAME))).isDirectory()).toBe(true);
  });

  it('the cache directory itself', async () => {
    await makeEntry();
    const before = await snapshot(base);
    expectRefused(await cache.remove(cache.cacheDir, notInUse), 'outside_cache', /cache directory itself/);
    expect(await snapshot(base)).toEqual(before);
  });

  it.each([
    ['63 hex digits', 'a'.repeat(63)],
    ['65 hex digits', 'a'.repeat(65)],
    ['uppercase hex', 'A'.repeat(64)],
    ['a partial download', `.partial-${NAME}`],
    ['the trash', '.trash'],
  ])('%s, as not a cache name', async (_, name) => {
    await mkdir(join(cache.cacheDir, name), { recursive: true });
    await writeFile(join(cache.cacheDir, name, 'keep'), 'keep');
    expectRefused(await cache.remove(join(cache.cacheDir, name), notInUse), 'not_cache_name');
    expect(await readFile(join(cache.cacheDir, name, 'keep'), 'utf8')).toBe('keep');
  });

  it('an entry that is a symlink to a directory outside, leaving the target untouched', async () => {
    await symlink(outside, join(cache.cacheDir, NAME));
    const before = await snapshot(base);
    expectRefused(await cache.remove(join(cache.cacheDir, NAME), notInUse), 'symlink');
    expect(await snapshot(base)).toEqual(before);
  });

  it('a path that reaches the cache through a linked parent', async () => {
    await makeEntry();
    await symlink(cache.cacheDir, join(base, 'cache-link'));
    expectRefused(await cache.remove(join(base, 'cache-link', NAME), notInUse), 'symlink', /through a link/);
    expect((await stat(join(cache.cacheDir, NAME))).isDirectory()).toBe(true);
  });

  it('everything once the cache dir was replaced by a symlink after start-up', async () => {
    const elsewhere = join(base, 'elsewhere');
    await mkdir(join(elsewhere, NAME), { recursive: true });
    await writeFile(join(elsewhere, NAME, 'model.bin'), 'not ours');
    await rename(cache.cacheDir, join(base, 'cache-moved'));
    await symlink(elsewhere, join(base, 'cache'));
    const before = await snapshot(base);
    expectRefused(await cache.remove(join(base, 'cache', NAME), notInUse), 'cache_dir_changed');
    expect(await snapshot(base)).toEqual(before);
  });

  it('everything once the cache dir was swapped for another directory', async () => {
    await rename(cache.cacheDir, join(base, 'cache-moved'));
    await mkdir(join(base, 'cache', NAME), { recursive: true });
    expectRefused(await cache.remove(join(base, 'cache', NAME), notInUse), 'cache_dir_changed');
    expect((await stat(join(base, 'cache', NAME))).isDirectory()).toBe(true);
  });

  it('an entry in use, naming who uses it', async () => {
    const entry = await makeEntry();
    const before = await snapshot(entry);
    const result = await cache.remove(entry, (name) => (name === NAME ? 'replica r-1a2b' : null));
    expectRefused(result, 'in_use', /in use by replica r-1a2b/);
    expect(await snapshot(entry)).toEqual(before);
  });

  it('an entry that does not exist, as missing', async () => {
    expectRefused(await cache.remove(join(cache.cacheDir, OTHER), notInUse), 'missing');
  });

  it.skipIf(!mountProbe.ok)('an entry that is itself a mount point', async () => {
    const entry = join(cache.cacheDir, NAME);
    await mkdir(entry);
    execFileSync('mount', ['--bind', outside, entry]);
    mounted.push(entry);
    expectRefused(await cache.remove(entry, notInUse), 'other_filesystem', /mount point/);
    expect(await readFile(join(outside, 'secret.txt'), 'utf8')).toBe("the operator's model");
  });
});

describe('removing a cache entry', () => {
  it('removes a normal entry, reports the bytes freed and leaves no trash', async () => {
    const entry = await makeEntry();
    await makeEntry(OTHER);
    await cache.markUsed(NAME);
    const result = await cache.remove(entry, notInUse);
    expect(result).toEqual({ removed: true, name: NAME, bytesFreed: 12, leftBehind: [] });
    await expect(stat(entry), 'the entry is gone').rejects.toThrow(/ENOENT/);
    expect(await readdir(join(cache.cacheDir, '.trash')), 'the trash was emptied').toEqual([]);
    expect(await readdir(join(cache.cacheDir, '.used')), 'the last-use marker went with it').toEqual([]);
    expect((await stat(join(cache.cacheDir, OTHER))).isDirectory(), 'the other entry is untouched').toBe(true);
  });

  it('unlinks a symlink inside an entry without touching what it points at', async () => {
    const entry = await makeEntry();
    await symlink(join(outside, 'secret.txt'), join(entry, 'files', 'file-link'));
    await symlink(outside, join(entry, 'files', 'dir-link'));
    const before = await snapshot(outside);
    const result = await cache.remove(entry, notInUse);
    expect(result.removed, JSON.stringify(result)).toBe(true);
    await expect(lstat(entry)).rejects.toThrow(/ENOENT/);
    expect(await snapshot(outside), 'the link targets are intact').toEqual(before);
  });

  it("unlinks a hard-linked file, leaving the other link's data intact and counting no bytes for it", async () => {
    const entry = await makeEntry();
    await writeFile(join(outside, 'shared.bin'), 'shared data');
    await link(join(outside, 'shared.bin'), join(entry, 'files', 'shared.bin'));
    const result = await cache.remove(entry, notInUse);
    expect(result).toEqual({ removed: true, name: NAME, bytesFreed: 12, leftBehind: [] });
    expect(await readFile(join(outside, 'shared.bin'), 'utf8')).toBe('shared data');
  });

  it.skipIf(!mountProbe.ok)('leaves a bind mount inside an entry in place, and reports it', async () => {
    const entry = await makeEntry();
    const mountPoint = join(entry, 'files', 'mnt');
    await mkdir(mountPoint);
    execFileSync('mount', ['--bind', outside, mountPoint]);
    mounted.push(mountPoint);
    const result = await cache.remove(entry, notInUse);
    expect(result.removed, JSON.stringify(result)).toBe(true);
    if (!result.removed) return;
    expect(result.leftBehind.map((l) => l.reason).join(), 'the mount is reported').toMatch(/mount point/);
    expect(await readFile(join(outside, 'secret.txt'), 'utf8'), 'nothing was deleted through the mount').toBe(
      "the operator's model",
    );
    await expect(stat(entry)).rejects.toThrow(/ENOENT/);
  });

  it.skipIf(!mountProbe.ok)('leaves another filesystem mounted inside an entry in place', async () => {
    const entry = await makeEntry();
    const mountPoint = join(entry, 'files', 'tmpfs');
    await mkdir(mountPoint);
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', mountPoint]);
    mounted.push(mountPoint);
    await writeFile(join(mountPoint, 'other-fs.txt'), 'on another filesystem');
    const result = await cache.remove(entry, notInUse);
    expect(result.removed, JSON.stringify(result)).toBe(true);
    if (!result.removed) return;
    expect(result.leftBehind).toHaveLength(1);
    const [left] = result.leftBehind;
    expect(left!.reason).toMatch(/another filesystem|mount point/);
    expect(await readFile(join(left!.path, 'other-fs.txt'), 'utf8'), 'the other filesystem was not entered').toBe(
      'on another filesystem',
    );
  });
});

describe('pathSyntaxProblem', () => {
  it('accepts the one spelling llmgw writes, under a cache dir with any characters', () => {
    expect(pathSyntaxProblem(`/var/cache/llmgw/${NAME}`, ['/var/cache/llmgw'])).toBeNull();
    expect(
      pathSyntaxProblem(`/données/cache/${NAME}`, ['/données/cache']),
      'the operator may name the cache dir in any script',
    ).toBeNull();
  });

  it('refuses a non-string', () => {
    expect(pathSyntaxProblem(42, [])).toMatch(/not a string/);
  });
});
