// The fleet most client-facing e2e files need: a real `llmgw control` on a
// SQLite file, one simulated CPU agent, the models the file asks for, API
// keys, and a ready replica of every model kept running (min above 0)
// before the first test. Kept in
// one place so that each file states only what it is about (its models, its
// engine ports) and how it is stopped is the same everywhere: by pid, with
// the engines the agent started.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'vitest';
import type { ReplicaView } from '../../src/api/index.js';
import { killEnginesOf, startControl, startLlmgw, stopAll, type RunningProcess } from './processes.js';
import { waitFor } from './wait.js';

export interface OneNodeOptions {
  /** Names the temp dir, the tokens and the audit actor, so that a failure says which file it was. */
  name: string;
  /** Engine ports, inclusive, e.g. '26800-26899': apart from other e2e files that may run at the same time. */
  portRange: string;
  /** Catalog entries as POST /api/v1/models takes them (they may use `dir`); those with scaling.min above 0 are waited for until a replica is ready. */
  models: (dir: string) => Promise<Record<string, unknown>[]> | Record<string, unknown>[];
  /** API keys to create, by name. */
  keys: readonly string[];
  /** How long the replicas may take to be ready, ms; absent = 60 s (a builtin engine on the tiny GGUF needs longer on a busy machine). */
  readyWithinMs?: number;
  /** The control plane's --store; absent = a SQLite file in the temp dir (`sqlite:<dir>/db`). */
  store?: string;
  /** More `llmgw control` flags (e.g. --remote-probe-interval); absent = none. */
  controlArgs?: readonly string[];
}

export interface OneNodeFleet {
  /** The temp dir holding the store (unless OneNodeOptions.store named another), the agent's state and whatever `models` put there. */
  dir: string;
  /** The control plane's --store, for another process to open the same one. */
  store: string;
  adminUrl: string;
  /** For `llmgw ctl` (LLMGW_ADMIN_TOKEN). */
  adminToken: string;
  clientUrl: string;
  /** The keys asked for, by name. */
  keys: Record<string, { id: string; secret: string }>;
  /** An admin API call with the admin token; the body is parsed JSON. */
  api<T>(method: string, path: string, body?: unknown): Promise<{ status: number; body: T }>;
  /** The `llmgw control` process, for a test that signals it alone (the agent and engines keep running). */
  control: RunningProcess;
  /** Ends the control plane, the agent and its engines. */
  stop(): Promise<void>;
}

export async function startOneNodeFleet(options: OneNodeOptions): Promise<OneNodeFleet> {
  const dir = mkdtempSync(join(tmpdir(), `llmgw-e2e-${options.name}-`));
  // Tokens must be 32 characters or more; the name keeps them apart between files.
  const join_ = `e2e-join-token-${options.name}-0123456789abcdef`;
  const adminToken = `e2e-admin-token-${options.name}-0123456789abcdef`;
  const headers = {
    authorization: `Bearer ${adminToken}`,
    'content-type': 'application/json',
    'x-llmgw-actor': `e2e-${options.name}`,
  };
  const control = await startControl([
    '--store',
    options.store ?? `sqlite:${join(dir, 'db')}`,
    '--join-token',
    join_,
    '--admin-token',
    adminToken,
    '--reconcile-interval',
    '300ms',
    '--log-level',
    'warn',
    ...(options.controlArgs ?? []),
  ]);
  const adminUrl = control.urls.admin;
  const api = async <T>(method: string, path: string, body?: unknown): Promise<{ status: number; body: T }> => {
    const res = await fetch(`${adminUrl}${path}`, {
      method,
      headers,
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: res.status, body: (await res.json()) as T };
  };
  const stateDir = join(dir, 'n1');
  const stop = async () => {
    await stopAll();
    killEnginesOf([stateDir]);
  };
  try {
    startLlmgw([
      'agent',
      '--control',
      control.urls.agent,
      '--join-token',
      join_,
      '--node-id',
      'n1',
      '--state-dir',
      stateDir,
      '--simulate',
      'gpus=0,ram=16g',
      '--heartbeat-interval',
      '300ms',
      '--port-range',
      options.portRange,
      '--log-level',
      'warn',
    ]);
    await waitFor('the node up', async () => {
      const { body } = await api<{ liveness: string }[]>('GET', '/api/v1/nodes');
      return body.some((n) => n.liveness === 'up') ? true : undefined;
    });
    const models = await options.models(dir);
    for (const model of models) {
      const added = await api('POST', '/api/v1/models', model);
      expect(added.status, JSON.stringify(added.body)).toBe(200);
    }
    const keys: OneNodeFleet['keys'] = {};
    for (const name of options.keys) {
      const created = await api<{ id: string; secret: string }>('POST', '/api/v1/keys', { name });
      expect(created.status, JSON.stringify(created.body)).toBe(201);
      keys[name] = created.body;
    }
    for (const { name, scaling } of models) {
      if (!((scaling as { min?: number } | undefined)?.min ?? 0)) continue;
      await waitFor(
        `a ready replica of ${String(name)}`,
        async () => {
          const { body } = await api<ReplicaView[]>('GET', `/api/v1/replicas?model=${String(name)}`);
          return body.some((r) => r.state === 'ready') ? true : undefined;
        },
        options.readyWithinMs ?? 60_000,
      );
    }
    const store = options.store ?? `sqlite:${join(dir, 'db')}`;
    return { dir, store, adminUrl, adminToken, clientUrl: control.urls.client, keys, api, control, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
