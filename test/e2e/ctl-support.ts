// Running `llmgw ctl` as a user does, for the ctl end-to-end tests: a child
// process with its own environment, its output collected, its exit code
// returned: the real `llmgw ctl`, through bin/llmgw.js.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/** The ctl command line, as a user types it after `node`. */
export const CTL_ARGV: readonly string[] = [fileURLToPath(new URL('../../bin/llmgw.js', import.meta.url)), 'ctl'];

export interface CtlResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs ctl with only the environment given (plus PATH and HOME): an
 * LLMGW_ADMIN_URL in the developer's shell must not reach a test.
 */
export function runCtlCli(
  args: readonly string[],
  options: { env?: Record<string, string>; cwd?: string; timeoutMs?: number } = {},
): Promise<CtlResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...CTL_ARGV, ...args], {
      cwd: options.cwd,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...options.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (s: string) => (stdout += s));
    child.stderr.setEncoding('utf8').on('data', (s: string) => (stderr += s));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(
        new Error(
          `llmgw ctl ${args.join(' ')} did not finish in ${options.timeoutMs ?? 30_000} ms; stdout:\n${stdout}\nstderr:\n${stderr}`,
        ),
      );
    }, options.timeoutMs ?? 30_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

// eslint-disable-next-line no-control-regex
export const ANSI_RE = /\x1b\[/;
