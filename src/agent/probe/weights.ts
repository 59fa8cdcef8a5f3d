// The weights already on this machine: entries in the agent's cache (named
// by cache name, fetched by llmgw) and in the operator's model directories
// (used in place, never deleted). Placement prefers nodes that hold a
// model's weights and skips the disk check there, so this is what lets a
// restarted fleet reuse what it already downloaded.
import type { Dirent, Stats } from 'node:fs';
import { join } from 'node:path';
import { CACHE_NAME_RE, type WeightsReport } from '../../protocol/index.js';
import { MANIFEST_FILE } from '../cache/manifest.js';

export interface WeightsProbeDeps {
  readdir: (path: string) => Promise<Dirent[]>;
  lstat: (path: string) => Promise<Stats>;
  readFile: (path: string) => Promise<string>;
}

/**
 * Bytes of the regular files under `path`, not following links (a
 * Hugging Face snapshot links into its own blobs; following would count
 * them twice, and a link out of the tree could count a whole disk). A link
 * itself counts nothing. Null when any part could not be read: a partial
 * sum would look like a complete one.
 */
export async function treeSizeBytes(
  path: string,
  deps: Pick<WeightsProbeDeps, 'readdir' | 'lstat'>,
): Promise<number | null> {
  try {
    const stats = await deps.lstat(path);
    if (stats.isFile()) return stats.size;
    if (!stats.isDirectory()) return 0;
    let total = 0;
    for (const child of await deps.readdir(path)) {
      const size = await treeSizeBytes(join(path, child.name), deps);
      if (size === null) return null;
      total += size;
    }
    return total;
  } catch {
    return null;
  }
}

/** The `source` a cache entry's manifest records; absent when there is no manifest or it does not say. */
async function manifestSource(entryPath: string, readFile: WeightsProbeDeps['readFile']): Promise<string | undefined> {
  try {
    const json: unknown = JSON.parse(await readFile(join(entryPath, MANIFEST_FILE)));
    const source = (json as { source?: unknown } | null)?.source;
    return typeof source === 'string' ? source : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Hidden names are never weights: the cache keeps its trash, partial
 * downloads and use records under dot-names, and Hugging Face downloads
 * leave `.cache` and `.locks` beside models.
 */
function isHidden(name: string): boolean {
  return name.startsWith('.');
}

async function entryReport(
  path: string,
  isLink: boolean,
  deps: WeightsProbeDeps,
): Promise<Pick<WeightsReport, 'path' | 'size_bytes'>> {
  // A link is reported with its size unknown rather than walked: it may lead anywhere, a network share included.
  const size = isLink ? null : await treeSizeBytes(path, deps);
  return size === null ? { path } : { path, size_bytes: size };
}

/**
 * Every direct child of the cache directory and of each model directory,
 * with its size. In the cache, a child whose name is a cache name is a
 * cache entry; anything else there was put there by someone else and is
 * reported as the operator's (`model_dir`), never as llmgw's. A model
 * directory's child carries the file:// source that names it, which is
 * how placement matches it to a model. `inPlace` adds the file:// weights
 * engines use where they lie, outside those directories (`llmgw up`'s demo
 * model, a path named in the catalog), as the operator's too: they are on
 * this disk, and nothing of llmgw's. A directory that cannot be read
 * contributes nothing and a sentence; an in-place path that is gone,
 * nothing.
 */
export async function listWeights(
  cacheDir: string,
  modelDirs: readonly string[],
  deps: WeightsProbeDeps,
  inPlace: readonly { readonly path: string; readonly source: string }[] = [],
): Promise<{ weights: WeightsReport[]; problems: string[] }> {
  const weights: WeightsReport[] = [];
  const problems: string[] = [];
  const dirs = [{ dir: cacheDir, isCache: true }, ...modelDirs.map((dir) => ({ dir, isCache: false }))];
  for (const { dir, isCache } of dirs) {
    let children: Dirent[];
    try {
      children = await deps.readdir(dir);
    } catch (err) {
      // A cache directory the agent has not created yet holds nothing; that is not a problem.
      if (!(isCache && (err as NodeJS.ErrnoException).code === 'ENOENT')) {
        problems.push(
          `cannot list ${isCache ? 'the cache directory' : 'the model directory'} ${dir}: ${(err as Error).message}`,
        );
      }
      continue;
    }
    children.sort((a, b) => a.name.localeCompare(b.name));
    for (const child of children) {
      if (isHidden(child.name)) continue;
      const path = join(dir, child.name);
      const base = await entryReport(path, child.isSymbolicLink(), deps);
      if (isCache && CACHE_NAME_RE.test(child.name) && child.isDirectory()) {
        const source = await manifestSource(path, deps.readFile);
        weights.push({ ...base, kind: 'cache', cache_name: child.name, ...(source === undefined ? {} : { source }) });
      } else {
        weights.push({ ...base, kind: 'model_dir', ...(isCache ? {} : { source: `file://${path}` }) });
      }
    }
  }
  for (const used of inPlace) {
    const listed = weights.find((w) => w.path === used.path);
    if (listed) {
      // The catalog may spell the source differently (file://localhost/…, a trailing slash): match it as written.
      if (listed.kind === 'model_dir' && listed.source !== used.source) listed.source = used.source;
      continue;
    }
    // Inside a listed entry (a file in a model directory's subfolder): named, so placement matches its source, but
    // with no size, as its bytes are already counted with that entry.
    if (weights.some((w) => used.path.startsWith(`${w.path}/`))) {
      weights.push({ path: used.path, kind: 'model_dir', source: used.source });
      continue;
    }
    let isLink: boolean;
    try {
      isLink = (await deps.lstat(used.path)).isSymbolicLink();
    } catch {
      continue;
    }
    weights.push({ ...(await entryReport(used.path, isLink, deps)), kind: 'model_dir', source: used.source });
  }
  return { weights, problems };
}
