// Clears files_dir of bytes no row will ever name: the temporary file of a
// writer killed mid-write (its random name is never renamed into place),
// and a file whose row was never written (a control plane killed between
// an upload's bytes and its row, or, before output ids were made per batch,
// between a batch's output files and the row of its end). Run once when the
// runner starts, since a crash is what leaves them and a restart follows.
// Which entries go is a pure decision (orphans), table-tested; reading the
// directory, the store and removing are the edges (sweepFiles).
import { readdir, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';

/** How old an unnamed entry must be before it is removed: an upload or an end in progress names its file long before. */
export const SWEEP_GRACE_MS = 3_600_000;

const FILE = /^file-[0-9a-f]{32}$/;
const TEMP = /^\.file-[0-9a-f]{32}\.[0-9a-f]+\.tmp$/;

export interface DirEntry {
  readonly name: string;
  /** Last written, epoch ms. */
  readonly mtimeMs: number;
}

/**
 * The entries to remove: temporary files, and files no row names, last
 * written `graceMs` or more before `nowMs`. Anything else in the directory
 * (not named as llmgw names its files) is left alone.
 */
export function orphans(
  entries: readonly DirEntry[],
  named: ReadonlySet<string>,
  nowMs: number,
  graceMs = SWEEP_GRACE_MS,
): string[] {
  return entries
    .filter((e) => nowMs - e.mtimeMs >= graceMs)
    .filter((e) => TEMP.test(e.name) || (FILE.test(e.name) && !named.has(e.name)))
    .map((e) => e.name);
}

/** Removes the orphans of `dir`; `named` says which of the given ids have a row. Returns what was removed. */
export async function sweepFiles(deps: {
  readonly dir: string;
  readonly named: (ids: readonly string[]) => Promise<ReadonlySet<string>>;
  readonly now: () => number;
  readonly logger: Logger;
  readonly graceMs?: number;
}): Promise<string[]> {
  let names: string[];
  try {
    names = await readdir(deps.dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
  const entries: DirEntry[] = [];
  for (const name of names) {
    if (!FILE.test(name) && !TEMP.test(name)) continue;
    const s = await stat(join(deps.dir, name)).catch(() => null);
    if (s?.isFile()) entries.push({ name, mtimeMs: s.mtimeMs });
  }
  const named = await deps.named(entries.filter((e) => FILE.test(e.name)).map((e) => e.name));
  const gone = orphans(entries, named, deps.now(), deps.graceMs);
  const removed: string[] = [];
  const when = new Map(entries.map((e) => [e.name, e.mtimeMs]));
  for (const name of gone) {
    // Written again since it was read (another instance ending its batch now): its row is on its way.
    const s = await stat(join(deps.dir, name)).catch(() => null);
    if (!s || s.mtimeMs !== when.get(name)) continue;
    await rm(join(deps.dir, name), { force: true });
    removed.push(name);
  }
  if (removed.length > 0) deps.logger.info({ removed: removed.length }, 'removed files in files_dir that no row names');
  return removed;
}
