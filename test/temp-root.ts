// One temporary directory per test run, removed when the run ends. Tests
// make their directories with mkdtemp under os.tmpdir(), and the processes
// they start (control planes, agents, npm in the quick start) write theirs
// there too; many files do not remove what they made, and a process killed
// mid-test cannot. Before this, every `npm test` left about 270 directories
// and 600 MB (the quick start's fresh install) in /tmp. Pointing TMPDIR at
// a directory of the run's own, before any worker or child starts, catches
// all of it without every test remembering to clean up.
//
// vitest runs a root-level global setup once for the root and once per
// project, in one process: the first call makes the directory, later calls
// (and a vitest started inside a test, which inherits the variable) use it,
// and only the call that made it removes it.
import { chmodSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Names the run's directory to later calls and to every process the run starts. */
export const TEST_TMPDIR_VAR = 'LLMGW_TEST_TMPDIR';

/** vitest's global setup (its argument, the project, is not needed): the run's own TMPDIR. */
export default function setup(): () => void {
  return useRunTmpdir(process.env);
}

/**
 * Makes the run's directory and points `env`'s TMPDIR at it, or does
 * nothing when a caller before it already did; returns what ends it.
 */
export function useRunTmpdir(env: NodeJS.ProcessEnv): () => void {
  const current = env[TEST_TMPDIR_VAR];
  if (current && existsSync(current) && env.TMPDIR === current) return () => {};
  const before = env.TMPDIR;
  const root = mkdtempSync(join(tmpdir(), 'llmgw-test-'));
  // Others may pass through, as they may into /tmp, but not list or write: a test runs Postgres as its own user in a
  // directory of its own here (test/support/private-postgres.ts).
  chmodSync(root, 0o711);
  env.TMPDIR = root;
  env[TEST_TMPDIR_VAR] = root;
  return () => {
    if (before === undefined) delete env.TMPDIR;
    else env.TMPDIR = before;
    delete env[TEST_TMPDIR_VAR];
    // maxRetries: a process a test left behind may still be writing into it.
    rmSync(root, { recursive: true, force: true, maxRetries: 3 });
  };
}
