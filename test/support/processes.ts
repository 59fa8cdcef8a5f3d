// Real llmgw processes for end-to-end tests: started from the built dist/
// exactly as a user would run `llmgw`, their JSON log lines collected, and
// stopped by their own pid when the test ends.
import { type ChildProcess, spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { type AddressInfo, createServer } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const LLMGW_BIN = fileURLToPath(new URL('../../bin/llmgw.js', import.meta.url));

export interface RunningProcess {
  child: ChildProcess;
  /** Every stdout line so far, parsed when it is JSON. */
  lines: string[];
  stderr: () => string;
  /** Waits for a JSON log line matching `predicate`, or fails with what the process printed. */
  waitForLog(
    predicate: (entry: Record<string, unknown>) => boolean,
    timeoutMs?: number,
  ): Promise<Record<string, unknown>>;
  /** Resolves with the exit code (or signal) once the process has exited. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  stop(signal?: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

const running = new Set<ChildProcess>();

export interface StartOptions {
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /**
   * A command the process is started under, such as `ip netns exec NS` (test/support/netns.ts):
   * it must exec llmgw in its place, so that the pid is llmgw's and stop() signals llmgw. Absent = none.
   */
  prefix?: readonly string[];
}

export function startLlmgw(args: string[], options: StartOptions = {}): RunningProcess {
  const [command, ...before] = [...(options.prefix ?? []), process.execPath];
  const child = spawn(command!, [...before, LLMGW_BIN, ...args], {
    cwd: options.cwd,
    env: { ...process.env, ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  running.add(child);
  const lines: string[] = [];
  let stderr = '';
  let buffered = '';
  const waiters = new Set<() => void>();
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
    buffered += chunk;
    let nl = buffered.indexOf('\n');
    while (nl !== -1) {
      lines.push(buffered.slice(0, nl));
      buffered = buffered.slice(nl + 1);
      nl = buffered.indexOf('\n');
    }
    for (const w of waiters) w();
  });
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.on('exit', (code, signal) => {
      running.delete(child);
      for (const w of waiters) w();
      resolve({ code, signal });
    });
  });

  const parsed = (line: string): Record<string, unknown> | null => {
    try {
      return JSON.parse(line) as Record<string, unknown>;
    } catch {
      return null;
    }
  };

  return {
    child,
    lines,
    stderr: () => stderr,
    exited,
    waitForLog(predicate, timeoutMs = 30_000) {
      return new Promise((resolve, reject) => {
        let seen = 0;
        const check = () => {
          for (; seen < lines.length; seen++) {
            const entry = parsed(lines[seen]!);
            if (entry && predicate(entry)) {
              cleanup();
              resolve(entry);
              return;
            }
          }
          if (child.exitCode !== null || child.signalCode !== null) {
            cleanup();
            reject(
              new Error(
                `process exited (${child.exitCode ?? child.signalCode}) before the expected log line; stderr:\n${stderr}\nstdout:\n${lines.join('\n')}`,
              ),
            );
          }
        };
        const timer = setTimeout(() => {
          cleanup();
          reject(
            new Error(
              `no matching log line within ${timeoutMs} ms; stderr:\n${stderr}\nstdout:\n${lines.slice(-20).join('\n')}`,
            ),
          );
        }, timeoutMs);
        const cleanup = () => {
          clearTimeout(timer);
          waiters.delete(check);
        };
        waiters.add(check);
        check();
      });
    },
    async stop(signal = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}

/** Kills whatever a test left running (by pid): call from afterAll/afterEach. */
export async function stopAll(): Promise<void> {
  await Promise.all(
    [...running].map(
      (child) =>
        new Promise<void>((resolve) => {
          if (child.exitCode !== null || child.signalCode !== null) return resolve();
          child.once('exit', () => resolve());
          child.kill('SIGKILL');
        }),
    ),
  );
}

export interface ControlUrls {
  client: string;
  admin: string;
  agent: string;
}

/**
 * Starts `llmgw control` on free ports and waits until it listens. With no
 * admin token in `args`, `llmgw control` would make one in its data directory
 * (beside the store, or ./.llmgw in the working directory); tests that give
 * none mean a tokenless loopback admin API, so they get
 * --insecure-no-admin-token unless `makesAdminToken` asks for the default.
 */
export async function startControl(
  args: string[],
  options: StartOptions & { makesAdminToken?: boolean } = {},
): Promise<RunningProcess & { urls: ControlUrls }> {
  const proc = startLlmgw(
    [
      'control',
      '--client-addr',
      '127.0.0.1:0',
      '--admin-addr',
      '127.0.0.1:0',
      '--agent-addr',
      '127.0.0.1:0',
      ...(options.makesAdminToken || args.some((a) => a.startsWith('--admin-token'))
        ? []
        : ['--insecure-no-admin-token']),
      ...args,
    ],
    options,
  );
  const entry = await proc.waitForLog((e) => e.msg === 'llmgw control listening');
  return Object.assign(proc, {
    urls: { client: entry.client as string, admin: entry.admin as string, agent: entry.agent as string },
  });
}

/**
 * Engines outlive their agent by design (an agent restart must not cost a
 * replica), so a test that kills agents ends their engines itself: by the
 * process group each agent recorded in its state directory, never by name.
 */
export function killEnginesOf(stateDirs: readonly string[]): void {
  for (const dir of stateDirs) {
    let files: string[] = [];
    try {
      files = readdirSync(join(dir, 'shards')).filter((f) => f.endsWith('.json'));
    } catch {
      continue;
    }
    for (const f of files) {
      try {
        const record = JSON.parse(readFileSync(join(dir, 'shards', f), 'utf8')) as { pgid?: number; pid?: number };
        const group = record.pgid ?? record.pid;
        if (group && group > 1) process.kill(-group, 'SIGKILL');
      } catch {
        // Already gone, or not a record: nothing to end.
      }
    }
  }
}

/** A free loopback port, for a control plane that must come back on the same address. */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** Processes whose command line mentions `dir`: what a clean Ctrl-C must leave none of. */
export function processesUnder(dir: string): string[] {
  const found: string[] = [];
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
      if (cmd.includes(dir) && Number(pid) !== process.pid) found.push(`${pid}: ${cmd}`);
    } catch {
      // Gone while we looked.
    }
  }
  return found;
}
