// Writes the engine stand-ins (src/engine/sim/stand-ins.ts) as executables
// for tests that run the exact command lines llmgw builds: a shared node
// script that imports the built sim and runs runStandIn, and a /bin/sh
// wrapper per program. Only tests write them, so the writer lives here; what
// the executables run (runStandIn) stays in src, built into dist/.
import { chmodSync, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { LlmgwError } from '../../src/errors/index.js';
import { readStartRecords, type StartRecord } from '../../src/engine/sim/record.js';
import { DEFAULT_STAND_IN_RECORD, STAND_IN_PROGRAMS, type StandInProgram } from '../../src/engine/sim/stand-ins.js';

const SCRIPT_NAME = 'llmgw-stand-in.mjs';

export interface StandInOptions {
  /** Where the stand-ins append their records; absent = `<dir>/stand-in-record.jsonl`. $LLMGW_STANDIN_RECORD, when set at run time, wins. */
  recordFile?: string;
  /** Sim flags every stand-in adds (e.g. ['--ttft-ms', '20']); absent = none. */
  simArgs?: string[];
  /** The built sim module the stand-ins import; absent = dist/engine/sim/index.js of this checkout. */
  simModulePath?: string;
}

export interface StandIns {
  readonly dir: string;
  readonly recordFile: string;
  /** Absolute path of each executable. */
  readonly paths: Readonly<Record<StandInProgram, string>>;
  /** Every record so far, oldest first. */
  records(): StartRecord[];
}

/** dist/engine/sim/index.js of this checkout: the built sim, which the stand-ins and engine tests run. */
export function builtSimModulePath(): string {
  return fileURLToPath(new URL('../../dist/engine/sim/index.js', import.meta.url));
}

function shellQuote(text: string): string {
  return `'${text.replaceAll("'", `'\\''`)}'`;
}

/**
 * Writes the stand-in executables into `dir` (created if absent): one shared
 * node script and a /bin/sh wrapper per program that runs it with this
 * Node's absolute path, so a supervisor's PATH needs only `dir`. Throws
 * LLMGW_ENGINE_START_FAILED when the sim is not built.
 */
export function writeStandIns(dir: string, options: StandInOptions = {}): StandIns {
  const absDir = resolve(dir);
  const modulePath = resolve(options.simModulePath ?? builtSimModulePath());
  if (!existsSync(modulePath)) {
    throw new LlmgwError(
      'LLMGW_ENGINE_START_FAILED',
      `the stand-ins run the built sim engine at ${modulePath}, which does not exist; run \`npm run build\` first`,
      { context: { modulePath } },
    );
  }
  const recordFile = resolve(options.recordFile ?? join(absDir, DEFAULT_STAND_IN_RECORD));
  mkdirSync(absDir, { recursive: true });
  const scriptPath = join(absDir, SCRIPT_NAME);
  const runOptions = { recordFile, simArgs: options.simArgs ?? [] };
  writeFileSync(
    scriptPath,
    [
      '// Written by llmgw writeStandIns(): each stand-in executable beside this file runs it',
      '// with its own name first. It records argv and env, then serves like the sim engine.',
      `import { runStandIn } from ${JSON.stringify(pathToFileURL(modulePath).href)};`,
      `await runStandIn(process.argv[2], process.argv.slice(3), ${JSON.stringify(runOptions)});`,
      '',
    ].join('\n'),
  );
  const paths = {} as Record<StandInProgram, string>;
  for (const program of STAND_IN_PROGRAMS) {
    const path = join(absDir, program);
    writeFileSync(
      path,
      [
        '#!/bin/sh',
        `# llmgw stand-in for ${program}: records its argv and env, then serves like the sim engine (${SCRIPT_NAME}).`,
        `exec ${shellQuote(process.execPath)} ${shellQuote(scriptPath)} ${program} "$@"`,
        '',
      ].join('\n'),
    );
    chmodSync(path, 0o755);
    paths[program] = path;
  }
  return { dir: absDir, recordFile, paths, records: () => readStartRecords(recordFile) };
}
