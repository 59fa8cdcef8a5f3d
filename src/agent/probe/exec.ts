// Running the machine's own tools (nvidia-smi, dmesg, an engine's --version)
// with a bounded wait, and finding them on a given PATH. The one place the
// probe starts processes, so tests replace it with a function that returns
// captured output and no probe needs a GPU to be tested.
import { execFile } from 'node:child_process';
import { accessSync, constants, statSync } from 'node:fs';
import { access, stat } from 'node:fs/promises';
import { delimiter, isAbsolute, join } from 'node:path';

export interface ExecResult {
  /** Null when the process was ended by a signal (a timeout included). */
  exitCode: number | null;
  stdout: string;
  stderr: string;
  /** The process ran past its timeout and was killed: its output is whatever it had printed. */
  timedOut: boolean;
}

export interface ExecOptions {
  /** How long to wait before killing it, in milliseconds. */
  timeoutMs: number;
  /** The child's environment; absent = the agent's own. */
  env?: NodeJS.ProcessEnv;
}

/**
 * Runs `file` with `args` and resolves with its exit and output, whatever the
 * exit code. Rejects only when it could not be started at all, with the
 * errno error (`code` 'ENOENT', 'EACCES'), so callers can tell "not installed"
 * from "installed and failing".
 */
export type ExecFn = (file: string, args: readonly string[], options: ExecOptions) => Promise<ExecResult>;

/** Output beyond this is cut: nvidia-smi for 8 GPUs prints a few KiB; dmesg a few MiB at most. */
const MAX_OUTPUT_BYTES = 32 * 1024 * 1024;

export const execProcess: ExecFn = (file, args, options) =>
  new Promise((resolve, reject) => {
    execFile(
      file,
      [...args],
      {
        timeout: options.timeoutMs,
        // A hung nvidia-smi (a GPU stuck in a GSP timeout) ignores SIGTERM.
        killSignal: 'SIGKILL',
        maxBuffer: MAX_OUTPUT_BYTES,
        encoding: 'utf8',
        env: options.env ?? process.env,
        windowsHide: true,
      },
      (error, stdout, stderr) => {
        if (error === null) {
          resolve({ exitCode: 0, stdout, stderr, timedOut: false });
          return;
        }
        const code = (error as NodeJS.ErrnoException).code;
        if (typeof code === 'string' && code !== 'ERR_CHILD_PROCESS_STDIO_MAXBUFFER') {
          reject(error);
          return;
        }
        const killed = (error as { killed?: boolean }).killed === true;
        resolve({
          exitCode: typeof code === 'number' ? code : null,
          stdout,
          stderr,
          timedOut: killed && (error as { signal?: string | null }).signal === 'SIGKILL',
        });
      },
    );
  });

/** True when `path` is a file this process may execute. */
export type IsExecutableFn = (path: string) => Promise<boolean>;

export const isExecutableFile: IsExecutableFn = async (path) => {
  try {
    await access(path, constants.X_OK);
    return (await stat(path)).isFile();
  } catch {
    return false;
  }
};

/**
 * The first executable `name` on `pathEnv` (colon-separated), or null.
 * Empty and relative entries are skipped: they mean "the current directory",
 * and an agent's working directory is no place to find nvidia-smi.
 */
export async function findOnPath(name: string, pathEnv: string, isExecutable: IsExecutableFn): Promise<string | null> {
  for (const dir of pathEnv.split(delimiter)) {
    if (dir === '' || !isAbsolute(dir)) continue;
    const candidate = join(dir, name);
    if (await isExecutable(candidate)) return candidate;
  }
  return null;
}

/**
 * findOnPath without waiting, for a caller that must answer at once (the
 * agent choosing an engine's executable as it builds the command line).
 */
export function findOnPathSync(name: string, pathEnv: string): string | null {
  for (const dir of pathEnv.split(delimiter)) {
    if (dir === '' || !isAbsolute(dir)) continue;
    const candidate = join(dir, name);
    try {
      accessSync(candidate, constants.X_OK);
      if (statSync(candidate).isFile()) return candidate;
    } catch {
      // Not here; the next directory.
    }
  }
  return null;
}

/** True for the error `ExecFn` rejects with when the program does not exist. */
export function isNotFound(err: unknown): boolean {
  return (err as NodeJS.ErrnoException | null)?.code === 'ENOENT';
}
