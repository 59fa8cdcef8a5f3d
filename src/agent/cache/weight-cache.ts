// The agent's weight cache: one directory of entries, each named by the cache
// name of its source (64 lowercase hex, see src/protocol/source.ts). Entries
// are written under a temporary name that no cache name can have, and renamed
// into place only once complete and verified, with a manifest. Removal is the
// dangerous half: the cache pins its directory's real path and device at
// start-up and checks every path it is asked to remove against them at the
// moment of removal, because the control plane asking is no proof that the
// path is something this agent fetched.
import { randomBytes } from 'node:crypto';
import { mkdir, open, readdir, readFile, realpath, rename, stat, unlink, utimes } from 'node:fs/promises';
import { posix, resolve } from 'node:path';
import { LlmgwError } from '../../errors/index.js';
import { CACHE_NAME_RE, cacheName, canonicalSource, parseSource, type WeightSource } from '../../protocol/index.js';
import type { WeightsReport } from '../../protocol/index.js';
import { nearestName } from '../../units/index.js';
import { MANIFEST_FILE, parseManifest, type WeightManifest } from './manifest.js';
import {
  lstatOrNull,
  pathSyntaxProblem,
  readMountPoints,
  removeTreeOnDevice,
  type TreeRemoval,
} from './safe-remove.js';

export interface WeightCacheOptions {
  /** Where fetched weights live. Created if missing; its real path is pinned at start-up. */
  cacheDir: string;
  /** Clock for last-use times, epoch ms. Absent: Date.now. */
  now?: () => number;
  /** The machine's mount points, for the removal walk. Absent: read from /proc/self/mountinfo (none off Linux). */
  mountPoints?: () => Promise<ReadonlySet<string>>;
}

const OPTION_KEYS = ['cacheDir', 'now', 'mountPoints'] as const;

/** A complete entry: one whose manifest was written and renamed into place with it. */
export interface CacheEntry {
  name: string;
  /** `<cacheDir>/<name>`: the path a removal names. */
  path: string;
  /** What an engine is given: the entry's `files` directory (a repository) or one file in it. */
  weightsPath: string;
  sizeBytes: number;
  /** The source as the catalog spelled it when fetched. */
  source: string;
  /** Epoch ms of the last `markUsed`; null = never recorded on this machine. */
  lastUsedMs: number | null;
  manifest: WeightManifest;
}

/** The check that refused a removal; each is one rule of "collect orphans". */
export type RemoveCheck =
  | 'path_syntax'
  | 'outside_cache'
  | 'not_cache_name'
  | 'symlink'
  | 'other_filesystem'
  | 'in_use'
  | 'missing'
  | 'cache_dir_changed';

export type RemoveResult =
  | {
      removed: true;
      name: string;
      bytesFreed: number;
      /** Empty unless something inside the entry could not go (another filesystem mounted in it); it stays in `.trash`. */
      leftBehind: TreeRemoval['leftBehind'];
    }
  | { removed: false; check: RemoveCheck; reason: string };

/** Names who uses an entry ("replica r-1a2b"), or null when nothing does. */
export type InUseCheck = (name: string) => string | null;

const TRASH_DIR = '.trash';
const USED_DIR = '.used';
const PARTIAL_PREFIX = '.partial-';

export class WeightCache {
  /** The cache directory's real path, pinned at start-up; every entry path is built from it. */
  readonly cacheDir: string;
  /** The cache directory as configured (absolute); may differ from `cacheDir` when it was a link at start-up. */
  readonly configuredDir: string;
  readonly #deviceId: number;
  readonly #inode: number;
  readonly #now: () => number;
  readonly #mountPoints: () => Promise<ReadonlySet<string>>;
  /** Removals run one at a time, so two cannot race for the same trash name or entry. */
  #removing: Promise<unknown> = Promise.resolve();

  private constructor(
    configuredDir: string,
    realDir: string,
    deviceId: number,
    inode: number,
    options: WeightCacheOptions,
  ) {
    this.configuredDir = configuredDir;
    this.cacheDir = realDir;
    this.#deviceId = deviceId;
    this.#inode = inode;
    this.#now = options.now ?? Date.now;
    this.#mountPoints = options.mountPoints ?? (() => readMountPoints());
  }

  static async create(options: WeightCacheOptions): Promise<WeightCache> {
    for (const key of Object.keys(options)) {
      if (!(OPTION_KEYS as readonly string[]).includes(key)) {
        const near = nearestName(key, OPTION_KEYS);
        throw new LlmgwError(
          'LLMGW_CONFIG_INVALID',
          `weight cache option "${key}" is unknown${near ? `; did you mean "${near}"?` : ''}`,
        );
      }
    }
    if (typeof options.cacheDir !== 'string' || options.cacheDir.trim() === '') {
      throw new LlmgwError(
        'LLMGW_CONFIG_INVALID',
        "cacheDir is empty; set the agent's cache directory, e.g. /var/lib/llmgw/cache",
      );
    }
    const configured = resolve(options.cacheDir);
    try {
      await mkdir(configured, { recursive: true });
    } catch (err) {
      throw new LlmgwError(
        'LLMGW_CONFIG_INVALID',
        `cannot create the cache directory ${configured}: ${(err as Error).message}`,
        { cause: err },
      );
    }
    const real = await realpath(configured);
    const stats = await stat(real);
    if (!stats.isDirectory()) {
      throw new LlmgwError('LLMGW_CONFIG_INVALID', `the cache directory ${configured} is not a directory`);
    }
    await mkdir(posix.join(real, TRASH_DIR), { recursive: true });
    await mkdir(posix.join(real, USED_DIR), { recursive: true });
    return new WeightCache(configured, real, stats.dev, stats.ino, options);
  }

  /** The cache name of a source; throws for `file://` (used in place, never cached) and unparsable sources. */
  nameFor(source: string | WeightSource): string {
    const parsed = typeof source === 'string' ? parseSource(source, { allowHttp: true }) : source;
    if (typeof parsed === 'string') throw new LlmgwError('LLMGW_SOURCE_INVALID', parsed);
    const name = cacheName(parsed);
    if (name === null) {
      throw new LlmgwError(
        'LLMGW_SOURCE_INVALID',
        `${canonicalSource(parsed)} is used in place and never cached, so it has no cache path`,
      );
    }
    return name;
  }

  /** `<cacheDir>/<cache name>`, whether or not it exists yet. */
  pathFor(source: string | WeightSource): string {
    return posix.join(this.cacheDir, this.nameFor(source));
  }

  /** Where a fetch of `name` writes until it is complete. Starts with "." so it can never be taken for an entry. */
  partialPath(name: string): string {
    assertCacheName(name);
    return posix.join(this.cacheDir, `${PARTIAL_PREFIX}${name}`);
  }

  async has(source: string | WeightSource): Promise<boolean> {
    return (await this.lookup(this.nameFor(source))) !== null;
  }

  /** The complete entry named `name`, or null when there is none (or it has no readable manifest). */
  async lookup(name: string): Promise<CacheEntry | null> {
    assertCacheName(name);
    const path = posix.join(this.cacheDir, name);
    const stats = await lstatOrNull(path);
    if (!stats || !stats.isDirectory()) return null;
    return this.#readEntry(name, path);
  }

  /** Every complete entry. Partials, the trash and anything not named like an entry are not listed. */
  async entries(): Promise<CacheEntry[]> {
    const out: CacheEntry[] = [];
    for (const dirent of await readdir(this.cacheDir, { withFileTypes: true })) {
      if (!dirent.isDirectory() || !CACHE_NAME_RE.test(dirent.name)) continue;
      const entry = await this.#readEntry(dirent.name, posix.join(this.cacheDir, dirent.name));
      if (entry) out.push(entry);
    }
    return out.sort((a, b) => a.name.localeCompare(b.name));
  }

  /** Records that a shard used the entry now (the mtime of `.used/<name>`). */
  async markUsed(name: string): Promise<void> {
    assertCacheName(name);
    const marker = posix.join(this.cacheDir, USED_DIR, name);
    const nowS = this.#now() / 1000;
    try {
      await utimes(marker, nowS, nowS);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      await (await open(marker, 'a')).close();
      await utimes(marker, nowS, nowS);
    }
  }

  /**
   * Moves a finished partial into place: writes its manifest, flushes it, and
   * renames the directory to its cache name in one step, so an entry is
   * either absent or complete. When the entry already exists complete (a
   * second agent process got there first) the partial is dropped and the
   * existing entry returned.
   */
  async commit(name: string, manifest: WeightManifest): Promise<CacheEntry> {
    const partial = this.partialPath(name);
    const handle = await open(posix.join(partial, MANIFEST_FILE), 'w');
    try {
      await handle.writeFile(`${JSON.stringify(manifest, null, 2)}\n`);
      await handle.sync();
    } finally {
      await handle.close();
    }
    await syncDir(partial);
    const target = posix.join(this.cacheDir, name);
    try {
      await rename(partial, target);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== 'ENOTEMPTY' && code !== 'EEXIST') throw err;
      const existing = await this.lookup(name);
      if (!existing) {
        throw new LlmgwError(
          'LLMGW_FETCH_FAILED',
          `${target} already exists but holds no manifest, so it is not a complete entry; remove it and fetch again`,
          { cause: err },
        );
      }
      await this.discardPartial(name);
      return existing;
    }
    await syncDir(this.cacheDir);
    const entry = await this.lookup(name);
    if (!entry) throw new LlmgwError('LLMGW_INTERNAL', `the entry ${name} vanished right after it was written`);
    return entry;
  }

  /** Deletes a partial download (verification failed, disk full) so that nothing partial stays in the cache. */
  async discardPartial(name: string): Promise<void> {
    const partial = this.partialPath(name);
    const stats = await lstatOrNull(partial);
    if (!stats) return;
    await removeTreeOnDevice(partial, this.#deviceId, await this.#mountPoints());
  }

  /**
   * Removes the entry at `path` only if every check holds, checked now: the
   * spelling (no traversal, encoding, lookalike or NUL), the cache directory
   * still being the one pinned at start-up, the path being a direct child of
   * it named exactly like a cache name, reached through no link, on the same
   * filesystem, and not in use. A refusal is an answer, not an error: it names
   * the check and says why, for the collect summary.
   */
  remove(path: string, inUse: InUseCheck): Promise<RemoveResult> {
    const next = this.#removing.then(() => this.#remove(path, inUse));
    this.#removing = next.catch(() => undefined);
    return next;
  }

  /** Deletes whatever a crashed or partly refused removal left in the trash. */
  async emptyTrash(): Promise<TreeRemoval> {
    const total: TreeRemoval = { bytesFreed: 0, leftBehind: [] };
    const trash = posix.join(this.cacheDir, TRASH_DIR);
    const mountPoints = await this.#mountPoints();
    for (const name of await readdir(trash)) {
      const one = await removeTreeOnDevice(posix.join(trash, name), this.#deviceId, mountPoints);
      total.bytesFreed += one.bytesFreed;
      total.leftBehind.push(...one.leftBehind);
    }
    return total;
  }

  async #remove(raw: string, inUse: InUseCheck): Promise<RemoveResult> {
    const refuse = (check: RemoveCheck, reason: string): RemoveResult => ({ removed: false, check, reason });

    const syntax = pathSyntaxProblem(raw, [this.configuredDir, this.cacheDir]);
    if (syntax) return refuse('path_syntax', syntax);

    const changed = await this.#cacheDirChange();
    if (changed) return refuse('cache_dir_changed', changed);

    if (raw === this.configuredDir || raw === this.cacheDir) {
      return refuse('outside_cache', `${raw} is the cache directory itself, not an entry in it`);
    }
    const parent = posix.dirname(raw);
    if (parent !== this.configuredDir && parent !== this.cacheDir) {
      const parentReal = await realpath(parent).catch(() => null);
      if (parentReal === this.cacheDir) {
        return refuse(
          'symlink',
          `${raw} reaches the cache directory through a link; name it as ${this.cacheDir}/<cache name>`,
        );
      }
      return refuse('outside_cache', `${raw} is not directly inside the cache directory ${this.cacheDir}`);
    }

    const name = posix.basename(raw);
    if (!CACHE_NAME_RE.test(name)) {
      return refuse(
        'not_cache_name',
        `${JSON.stringify(name)} is not a cache name (exactly 64 lowercase hex digits), so llmgw did not fetch it`,
      );
    }

    const target = posix.join(this.cacheDir, name);
    const stats = await lstatOrNull(target);
    if (!stats) return refuse('missing', `${target} does not exist; nothing to remove`);
    if (stats.isSymbolicLink()) {
      return refuse(
        'symlink',
        `${target} is a symbolic link; llmgw writes directories, never links, so it did not make this one`,
      );
    }
    if (stats.dev !== this.#deviceId) {
      return refuse(
        'other_filesystem',
        `${target} is on another filesystem (device ${stats.dev}, the cache is on ${this.#deviceId})`,
      );
    }
    if ((await this.#mountPoints()).has(target)) {
      return refuse('other_filesystem', `${target} is a mount point, not a directory llmgw wrote`);
    }
    if (!stats.isDirectory() && !stats.isFile()) {
      return refuse('not_cache_name', `${target} is neither a directory nor a file, so llmgw did not write it`);
    }
    const user = inUse(name);
    if (user !== null) return refuse('in_use', `${target} is in use by ${user}`);

    // Out of the namespace first, in one rename on the same filesystem, so the
    // entry is never half-deleted under its own name.
    const trashed = await this.#trashPathFor(name);
    try {
      await rename(target, trashed);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOENT') return refuse('missing', `${target} disappeared before it could be removed`);
      if (code === 'EBUSY' || code === 'EXDEV')
        return refuse('other_filesystem', `${target} could not be moved to the trash (${code}): it is a mount point`);
      throw err;
    }
    const moved = await lstatOrNull(trashed);
    if (!moved || moved.ino !== stats.ino || moved.dev !== stats.dev) {
      return refuse(
        'cache_dir_changed',
        `${target} was replaced while it was being removed; what was there is left in ${trashed}`,
      );
    }
    await unlink(posix.join(this.cacheDir, USED_DIR, name)).catch(() => undefined);
    const walked = await removeTreeOnDevice(trashed, this.#deviceId, await this.#mountPoints());
    return { removed: true, name, bytesFreed: walked.bytesFreed, leftBehind: walked.leftBehind };
  }

  /** A sentence when the cache directory is no longer the one pinned at start-up; null when it is. */
  async #cacheDirChange(): Promise<string | null> {
    const configuredReal = await realpath(this.configuredDir).catch(() => null);
    const pinnedReal = await realpath(this.cacheDir).catch(() => null);
    const stats = await stat(this.cacheDir).catch(() => null);
    if (configuredReal !== this.cacheDir || pinnedReal !== this.cacheDir || !stats) {
      return `the cache directory ${this.configuredDir} now resolves to ${configuredReal ?? 'nothing'}, not ${this.cacheDir} as at start-up; every removal is refused until the agent restarts`;
    }
    if (stats.dev !== this.#deviceId || stats.ino !== this.#inode) {
      return `the cache directory ${this.cacheDir} was replaced since start-up (device or inode changed); every removal is refused until the agent restarts`;
    }
    return null;
  }

  /** A fresh `.trash/<name>-<n>`, making sure `.trash` is still a real directory on the cache's filesystem. */
  async #trashPathFor(name: string): Promise<string> {
    const trash = posix.join(this.cacheDir, TRASH_DIR);
    const stats = await lstatOrNull(trash);
    if (!stats || !stats.isDirectory() || stats.dev !== this.#deviceId) {
      // Never rename into something that is not ours; a link there is unlinked, not followed.
      if (stats) await unlink(trash);
      await mkdir(trash);
    }
    for (let n = 1; ; n++) {
      const candidate = posix.join(trash, `${name}-${n}`);
      if (!(await lstatOrNull(candidate))) return candidate;
      if (n > 1000) return posix.join(trash, `${name}-${randomBytes(8).toString('hex')}`);
    }
  }

  async #readEntry(name: string, path: string): Promise<CacheEntry | null> {
    let text: string;
    try {
      text = await readFile(posix.join(path, MANIFEST_FILE), 'utf8');
    } catch {
      return null;
    }
    const manifest = parseManifest(text);
    if (!manifest || manifest.cache_name !== name) return null;
    // The manifest is on disk and could have been edited; never hand an engine a path outside the entry.
    const weightsPath = posix.join(path, manifest.weights_path);
    if (!weightsPath.startsWith(`${path}/`)) return null;
    const used = await stat(posix.join(this.cacheDir, USED_DIR, name)).catch(() => null);
    return {
      name,
      path,
      weightsPath,
      sizeBytes: manifest.size_bytes,
      source: manifest.source,
      lastUsedMs: used ? Math.round(used.mtimeMs) : null,
      manifest,
    };
  }
}

/** An entry as the agent reports it in its heartbeat. */
export function toWeightsReport(entry: CacheEntry): WeightsReport {
  return {
    path: entry.path,
    size_bytes: entry.sizeBytes,
    kind: 'cache',
    cache_name: entry.name,
    source: entry.source,
    ...(entry.lastUsedMs === null ? {} : { last_used_ms: entry.lastUsedMs }),
  };
}

function assertCacheName(name: string): void {
  if (!CACHE_NAME_RE.test(name)) {
    throw new LlmgwError('LLMGW_INTERNAL', `${JSON.stringify(name)} is not a cache name (64 lowercase hex digits)`);
  }
}

/** Flushes a directory's entries (a rename, a new file) to disk, so a crash cannot undo them. */
async function syncDir(path: string): Promise<void> {
  const handle = await open(path, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}
