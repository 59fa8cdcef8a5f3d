// The files an engine reads its API key from when it takes it from no
// variable (SGLang's --config): written just before the engine starts, where
// only the agent's user can read them, and removed once the shard stops. The
// key never goes on a command line, which every user of the machine can read.
import { mkdirSync, renameSync, unlinkSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import type { EngineFile } from '../engines/shard-launch.js';

/** Writes each file 0600 (its directory made 0700 when absent), whole or not at all: an engine never reads half a key. */
export function writeEngineFiles(files: readonly EngineFile[] | undefined): void {
  for (const file of files ?? []) {
    mkdirSync(dirname(file.path), { recursive: true, mode: 0o700 });
    const temporary = `${file.path}.tmp-${process.pid}`;
    writeFileSync(temporary, file.text, { mode: 0o600 });
    renameSync(temporary, file.path);
  }
}

/** Removes the files; one already gone is fine. */
export function removeEngineFiles(files: readonly EngineFile[] | undefined): void {
  for (const file of files ?? []) {
    try {
      unlinkSync(file.path);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
  }
}
