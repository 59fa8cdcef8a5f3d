// Remote endpoints in end-to-end tests: sim engines on loopback standing in
// for a remote API, a control plane set up to keep remotes' keys (a secrets
// key file) and to probe remotes often, and the canary check that a
// remote's key shows nowhere it could be read. The remote tests
// (remote-endpoints, remote-dialects) share them so the check cannot drift
// apart between them: a place a key could leak, added here, is looked at by
// every test that sets one.
import { chmodSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'vitest';
import type { AdminClient } from '../../src/api/index.js';
import { freePort, startControl, startLlmgw, type ControlUrls, type RunningProcess } from './processes.js';
import { waitFor } from './wait.js';

/** Starts `llmgw engine sim` on a free loopback port with `args` (its models, its behaviour); answers its base URL. */
export async function startSimRemote(args: string[]): Promise<string> {
  const port = await freePort();
  const proc = startLlmgw(['engine', 'sim', '--port', String(port), ...args]);
  await waitFor(
    'the sim engine to listen',
    async () => (proc.lines.some((l) => l.includes('listening')) ? true : undefined),
    30_000,
  );
  return `http://127.0.0.1:${port}`;
}

/**
 * Starts `llmgw control` as the remote tests need it: its store at
 * `storePath`, `adminToken`, no API keys asked of clients, a secrets key
 * file (written in `dir`, 32 bytes of `keyByte`, a hex pair) so remotes'
 * keys are kept encrypted, remotes probed every 500 ms, and debug logging,
 * so the canary check reads every line a key could reach.
 */
export async function startControlForRemotes(options: {
  dir: string;
  storePath: string;
  adminToken: string;
  keyByte: string;
}): Promise<RunningProcess & { urls: ControlUrls }> {
  const keyFile = join(options.dir, 'secrets.key');
  writeFileSync(keyFile, `${options.keyByte.repeat(32)}\n`, { mode: 0o600 });
  chmodSync(keyFile, 0o600);
  return startControl([
    '--store',
    `sqlite:${options.storePath}`,
    '--admin-token',
    options.adminToken,
    '--api-keys',
    'off',
    '--secrets-key-file',
    keyFile,
    '--remote-probe-interval',
    '500ms',
    '--log-level',
    'debug',
  ]);
}

/**
 * Asserts that `canary` (a remote's API key) is in none of what the control
 * plane shows or keeps: its admin API's models, audit and request log, its
 * log lines (which must not be empty: a silent process proves nothing), and
 * the store's files in `dir` whose names start with `storePrefix` (the
 * database and its journal). Answers the admin answers' text, for checks a
 * test adds on top.
 */
export async function expectCanaryHidden(options: {
  canary: string;
  api: AdminClient;
  control: RunningProcess;
  dir: string;
  storePrefix: string;
}): Promise<string> {
  const { canary, api, control, dir, storePrefix } = options;
  const answers = JSON.stringify([await api.models(), await api.audit(), await api.requests({ limit: 50 })]);
  expect(answers, 'an admin API answer holds the key').not.toContain(canary);
  const logs = control.lines.join('\n') + control.stderr();
  expect(logs.length, 'the control plane logged something').toBeGreaterThan(0);
  expect(logs, 'a log line holds the key').not.toContain(canary);
  for (const f of readdirSync(dir).filter((n) => n.startsWith(storePrefix))) {
    const bytes = readFileSync(join(dir, f));
    expect(bytes.includes(Buffer.from(canary)), `the store file ${f} holds the key in plain text`).toBe(false);
  }
  return answers;
}
