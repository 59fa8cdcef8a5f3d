// The two halves of removing something from disk without trusting what the
// path says: a syntax check on the raw string (before anything is resolved, so
// no encoding or lookalike can be normalised into a traversal), and a walk
// that deletes a tree using lstat only, staying on one filesystem. Kept apart
// from the cache so that each can be read, and tested, for exactly what it
// refuses.
import type { Stats } from 'node:fs';
import { lstat, readdir, readFile, rmdir, unlink } from 'node:fs/promises';
import { posix } from 'node:path';

/**
 * Why `raw` cannot be a cache entry's path, as a sentence, or null when its
 * spelling is acceptable. `cacheDirs` are the spellings of the cache
 * directory this agent accepts as a prefix (as configured, and its real path):
 * the operator chose those and they may hold any character, while what
 * follows them is llmgw's own naming, which is ASCII hex and nothing else.
 */
export function pathSyntaxProblem(raw: unknown, cacheDirs: readonly string[]): string | null {
  if (typeof raw !== 'string') return 'the path is not a string';
  if (raw === '') return 'the path is empty';
  if (raw.includes('\0')) return 'the path contains a NUL byte';
  if (raw.split(/[/\\]/).includes('..')) {
    return `the path ${JSON.stringify(raw)} has a ".." segment, which could traverse out of the cache directory`;
  }
  if (!raw.startsWith('/')) {
    return `the path ${JSON.stringify(raw)} is not absolute; an entry is named by its full path, <cache dir>/<cache name>`;
  }
  const prefix = cacheDirs.find((dir) => raw.startsWith(`${dir}/`));
  const tail = prefix === undefined ? raw : raw.slice(prefix.length);
  const percent = tail.indexOf('%');
  if (percent !== -1) {
    return `the path contains ${JSON.stringify(tail.slice(percent, percent + 3))}: percent-encoded paths are refused, and a cache path never holds "%"`;
  }
  for (const char of tail) {
    const codePoint = char.codePointAt(0)!;
    if (codePoint < 0x20 || codePoint > 0x7e) {
      const hex = codePoint.toString(16).toUpperCase().padStart(4, '0');
      return `the path contains U+${hex} (${JSON.stringify(char)}); characters outside printable ASCII, such as lookalikes of "." and "/", are refused, and llmgw names entries in ASCII hex`;
    }
  }
  if (tail.includes('\\')) return 'the path contains a backslash, which no cache path holds';
  if (posix.normalize(raw) !== raw || (raw.length > 1 && raw.endsWith('/'))) {
    return `the path ${JSON.stringify(raw)} is not in normal form (a "." segment, a doubled or a trailing "/")`;
  }
  return null;
}

export interface TreeRemoval {
  /** Bytes of regular files whose last link was removed; a file still linked elsewhere frees nothing. */
  bytesFreed: number;
  /** What was left in place, and why (another filesystem mounted inside, a name that would not go). */
  leftBehind: { path: string; reason: string }[];
}

/**
 * Deletes the tree at `root`, which must already be out of the cache's
 * namespace (in the trash).
 *
 * Not `fs.rm({ recursive: true })`: that follows no symlinks either, but it
 * happily descends into a directory that is another filesystem mounted inside
 * the tree (a bind mount of the operator's model store, an NFS share), and
 * deletes what is there. This walk lstat()s every name, unlinks links and files
 * (so a link's target and a hard link's other name are untouched), and leaves
 * in place, and reports, any directory on another device or named in the mount
 * table (a bind mount of the same filesystem keeps its st_dev, so the device
 * alone cannot see it).
 *
 * `deviceId` is the cache filesystem's st_dev; `mountPoints` are the mount
 * points of the machine at the time of the walk.
 */
export async function removeTreeOnDevice(
  root: string,
  deviceId: number,
  mountPoints: ReadonlySet<string>,
): Promise<TreeRemoval> {
  const result: TreeRemoval = { bytesFreed: 0, leftBehind: [] };
  await removeNode(root, deviceId, mountPoints, result);
  return result;
}

/** Returns true when `path` is gone. */
async function removeNode(
  path: string,
  deviceId: number,
  mountPoints: ReadonlySet<string>,
  out: TreeRemoval,
): Promise<boolean> {
  const stats = await lstatOrNull(path);
  if (!stats) return true;
  if (stats.isDirectory()) {
    if (stats.dev !== deviceId) {
      out.leftBehind.push({
        path,
        reason: `another filesystem is mounted here (device ${stats.dev}, the cache is on ${deviceId}); left in place`,
      });
      return false;
    }
    if (mountPoints.has(path)) {
      out.leftBehind.push({ path, reason: 'a mount point (a bind mount of another directory); left in place' });
      return false;
    }
    let names: string[];
    try {
      names = await readdir(path);
    } catch (err) {
      out.leftBehind.push({
        path,
        reason: `could not be listed (${(err as NodeJS.ErrnoException).code ?? (err as Error).message}); left in place`,
      });
      return false;
    }
    // The directory could have been swapped for a link between lstat and
    // readdir; the trash is written only by this agent, so check again rather
    // than descend through something that is no longer what we examined.
    const again = await lstatOrNull(path);
    if (!again || !again.isDirectory() || again.ino !== stats.ino || again.dev !== stats.dev) {
      out.leftBehind.push({ path, reason: 'changed while it was being removed; left in place' });
      return false;
    }
    let allGone = true;
    for (const name of names) {
      if (!(await removeNode(posix.join(path, name), deviceId, mountPoints, out))) allGone = false;
    }
    if (!allGone) return false;
    return removeName(path, () => rmdir(path), out);
  }
  // Files, symlinks, sockets, fifos: unlink removes this name and nothing it points at.
  const gone = await removeName(path, () => unlink(path), out);
  if (gone && stats.isFile() && stats.nlink === 1) out.bytesFreed += stats.size;
  return gone;
}

/** Runs one unlink or rmdir; a name that will not go (EACCES, EBUSY) is reported, and the walk goes on with the rest. */
async function removeName(path: string, remove: () => Promise<void>, out: TreeRemoval): Promise<boolean> {
  try {
    await remove();
    return true;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return true;
    out.leftBehind.push({ path, reason: `could not be removed (${code ?? (err as Error).message}); left in place` });
    return false;
  }
}

/** What lstat says of `path`; null when nothing is there. */
export async function lstatOrNull(path: string): Promise<Stats | null> {
  try {
    return await lstat(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
}

/**
 * The machine's mount points, from /proc/self/mountinfo. Empty where there is
 * no such file (not Linux): the walk then relies on st_dev alone.
 */
export async function readMountPoints(mountInfoPath = '/proc/self/mountinfo'): Promise<Set<string>> {
  let text: string;
  try {
    text = await readFile(mountInfoPath, 'utf8');
  } catch {
    return new Set();
  }
  const points = new Set<string>();
  for (const line of text.split('\n')) {
    const field = line.split(' ')[4];
    // The kernel escapes space, tab, newline and backslash as octal.
    if (field)
      points.add(field.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8))));
  }
  return points;
}
