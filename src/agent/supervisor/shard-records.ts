// What survives an agent restart: one small JSON file per running engine in
// the agent's state directory, written when the engine starts and removed
// when it stops. The next agent reads them to adopt its engines instead of
// starting them a second time (a GPU cannot hold two copies), and checks each
// against the live process first, since a pid alone may by then belong to
// something else. Files are written under a temporary name and renamed, so a
// crash mid-write leaves the old record or none, never half of one; mode
// 0600, because a launch's environment may carry tokens.
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, readdirSync, renameSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { EngineLaunchPlan, ShardLaunch } from '../engines/index.js';

export const SHARD_RECORD_VERSION = 1;

export interface ShardRecord {
  readonly version: number;
  readonly shardId: string;
  readonly pid: number;
  readonly pgid: number;
  /** ProcessIdentity.startToken read right after the start. */
  readonly startToken: string;
  /** The port the engine listens on; null when it has none. */
  readonly port: number | null;
  readonly argv: readonly string[];
  /** ISO 8601. */
  readonly startedAt: string;
  /** The spec the engine runs (see specHash): a wanted shard with another hash replaces it. */
  readonly specHash: string;
  readonly restarts: number;
  readonly launch: ShardLaunch;
  readonly plan: EngineLaunchPlan;
}

/** A record file that could be read, or why not. */
export type ReadRecord =
  { readonly file: string; readonly record: ShardRecord } | { readonly file: string; readonly problem: string };

/**
 * A file name for `id` that is safe on any filesystem: the id itself when it
 * is plain, otherwise a cleaned form with a short hash, so two ids never share
 * a file.
 */
export function fileNameFor(id: string): string {
  if (/^[A-Za-z0-9][A-Za-z0-9._-]{0,100}$/.test(id)) return id;
  const cleaned = id
    .replace(/[^A-Za-z0-9._-]+/g, '_')
    .replace(/^[._-]+/, '')
    .slice(0, 80);
  return `${cleaned || 'shard'}-${createHash('sha256').update(id).digest('hex').slice(0, 12)}`;
}

export class ShardRecords {
  readonly dir: string;

  constructor(stateDir: string) {
    this.dir = join(stateDir, 'shards');
  }

  ensureDir(): void {
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
  }

  write(record: ShardRecord): void {
    const file = join(this.dir, `${fileNameFor(record.shardId)}.json`);
    const temporary = `${file}.tmp-${process.pid}`;
    writeFileSync(temporary, `${JSON.stringify(record, null, 2)}\n`, { mode: 0o600 });
    renameSync(temporary, file);
  }

  remove(shardId: string): void {
    this.removeFile(join(this.dir, `${fileNameFor(shardId)}.json`));
  }

  removeFile(file: string): void {
    try {
      unlinkSync(file);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
  }

  /** Every record file, parsed where it can be; leftover temporary files are removed. */
  list(): ReadRecord[] {
    let names: string[];
    try {
      names = readdirSync(this.dir);
    } catch {
      return [];
    }
    const out: ReadRecord[] = [];
    for (const name of names.sort()) {
      const file = join(this.dir, name);
      if (name.includes('.json.tmp-')) {
        this.removeFile(file);
        continue;
      }
      if (!name.endsWith('.json')) continue;
      try {
        const record = JSON.parse(readFileSync(file, 'utf8')) as ShardRecord;
        const problem = recordProblem(record);
        out.push(problem === null ? { file, record } : { file, problem });
      } catch (err) {
        out.push({ file, problem: `unreadable: ${err instanceof Error ? err.message : String(err)}` });
      }
    }
    return out;
  }
}

function recordProblem(record: ShardRecord): string | null {
  if (typeof record !== 'object' || record === null) return 'not a JSON object';
  if (record.version !== SHARD_RECORD_VERSION)
    return `version ${String(record.version)}, this agent reads ${SHARD_RECORD_VERSION}`;
  if (typeof record.shardId !== 'string' || record.shardId === '') return 'no shardId';
  if (!Number.isInteger(record.pid) || record.pid <= 1 || !Number.isInteger(record.pgid) || record.pgid <= 1)
    return 'no valid pid and pgid';
  if (typeof record.startToken !== 'string' || !Array.isArray(record.argv) || typeof record.specHash !== 'string')
    return 'fields missing';
  if (
    typeof record.launch !== 'object' ||
    record.launch === null ||
    typeof record.plan !== 'object' ||
    record.plan === null
  )
    return 'no launch or plan';
  return null;
}
