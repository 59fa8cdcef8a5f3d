// Starting a process, behind an interface so unit tests of the supervisor's
// state machine run without processes. The real one puts every engine in a
// process group of its own (a new session), so a stop can signal the engine
// and every worker it forked, and writes its output straight into the log
// file, so the engine keeps running, and logging, after the agent exits.
import { spawn } from 'node:child_process';
import { LlmgwError } from '../../errors/index.js';

export interface SpawnRequest {
  /** [executable, ...args]; never passed through a shell. */
  readonly argv: readonly string[];
  /** The whole environment of the process. */
  readonly env: Readonly<Record<string, string>>;
  /** An open file descriptor (append mode) for stdout and stderr; the spawner does not close it. */
  readonly logFd: number;
  /** Working directory; absent = the agent's. */
  readonly cwd?: string;
}

/** How a process ended. Both null = unknown (a process an earlier agent started). */
export interface ProcessExit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

export interface SpawnedProcess {
  readonly pid: number;
  /** The process group every stop signals: the pid itself, as the engine leads its own group. */
  readonly pgid: number;
  /** Resolves once the process has exited (its group may live on). */
  readonly exited: Promise<ProcessExit>;
}

export interface Spawner {
  /** Resolves once the program runs; throws LLMGW_ENGINE_START_FAILED when it cannot be started at all (not found, not executable). */
  spawn(request: SpawnRequest): Promise<SpawnedProcess>;
}

export function nodeSpawner(): Spawner {
  return {
    spawn(request) {
      const [command, ...args] = request.argv;
      if (command === undefined)
        return Promise.reject(new LlmgwError('LLMGW_ENGINE_START_FAILED', 'the engine command line is empty'));
      return new Promise((resolve, reject) => {
        const child = spawn(command, args, {
          env: { ...request.env },
          cwd: request.cwd,
          // A new session: the engine leads its own process group, and a terminal's Ctrl-C to the agent does not reach it.
          detached: true,
          stdio: ['ignore', request.logFd, request.logFd],
        });
        // The agent's life must not hang on its engines': it may exit (detach) while they serve.
        child.unref();
        const exited = new Promise<ProcessExit>((done) => child.once('exit', (code, signal) => done({ code, signal })));
        child.once('error', (err: NodeJS.ErrnoException) => {
          if (child.pid !== undefined) return; // An error after the start (a failed kill) is not a failed start.
          const hint =
            err.code === 'ENOENT'
              ? `${command} was not found${command.includes('/') ? '' : " on the engine's PATH"}`
              : err.code === 'EACCES'
                ? `${command} is not executable`
                : (err.code ?? err.message);
          reject(
            new LlmgwError('LLMGW_ENGINE_START_FAILED', `cannot start the engine: ${hint}`, {
              cause: err,
              context: { command },
            }),
          );
        });
        child.once('spawn', () => resolve({ pid: child.pid!, pgid: child.pid!, exited }));
      });
    },
  };
}
