// Helpers for end-to-end tests that run a fleet of real processes: simulated
// agents, the admin and client calls the tests make, and the sim engines'
// pids (read from the agents' state directories) to tell a replica that kept
// running from one that was started again.
import { mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ReplicaView } from '../../src/api/index.js';
import { type StartOptions, startLlmgw } from './processes.js';
import { waitFor } from './wait.js';

export const JOIN = 'e2e-join-token-0123456789abcdef';
export const ADMIN = 'e2e-admin-token-0123456789abcdef';
export const adminHeaders = {
  authorization: `Bearer ${ADMIN}`,
  'content-type': 'application/json',
  'x-llmgw-actor': 'e2e',
};

// The admin API's own shapes, as the typed client declares them.
export type { ControlPlaneView, ReplicaView } from '../../src/api/index.js';

/**
 * Starts a simulated agent (no GPUs) with its own port range; `control` may list several URLs, comma-separated.
 * `options.prefix` runs it under a command that execs it (prlimit, a network namespace); `options.extra` are more
 * agent flags, after these.
 */
export function startSimAgent(
  control: string,
  stateDir: string,
  id: string,
  ports: { first: number; count: number },
  options: { logLevel?: string; prefix?: StartOptions['prefix']; extra?: readonly string[] } = {},
) {
  return startLlmgw(
    [
      'agent',
      '--control',
      control,
      '--join-token',
      JOIN,
      '--node-id',
      id,
      '--state-dir',
      stateDir,
      '--simulate',
      'gpus=0,ram=16g',
      '--heartbeat-interval',
      '300ms',
      '--port-range',
      `${ports.first}-${ports.first + ports.count - 1}`,
      '--log-level',
      options.logLevel ?? 'warn',
      ...(options.extra ?? []),
    ],
    options.prefix ? { prefix: options.prefix } : {},
  );
}

export async function getJson<T>(url: string): Promise<T> {
  const res = await fetch(url, { headers: adminHeaders });
  if (res.status !== 200) throw new Error(`GET ${url} answered ${res.status}: ${await res.text()}`);
  return (await res.json()) as T;
}

/** Reconciler passes the control plane at `admin` has run (only a leader runs them), from its /metrics. */
export async function reconcilerPasses(admin: string): Promise<number> {
  const res = await fetch(`${admin}/metrics`, { headers: adminHeaders });
  if (res.status !== 200) throw new Error(`GET ${admin}/metrics answered ${res.status}`);
  const m = /^llmgw_reconciler_passes_total (\d+)$/m.exec(await res.text());
  if (!m) throw new Error(`${admin}/metrics has no llmgw_reconciler_passes_total`);
  return Number(m[1]);
}

/** Returns once the control plane at `admin` has run `passes` more reconciler passes than when called. */
export async function afterPasses(admin: string, passes: number, deadlineMs = 30_000): Promise<void> {
  const from = await reconcilerPasses(admin);
  await waitFor(
    `${passes} reconciler passes on ${admin}`,
    async () => ((await reconcilerPasses(admin)) >= from + passes ? true : undefined),
    deadlineMs,
  );
}

export async function replicasOf(admin: string, model: string): Promise<ReplicaView[]> {
  return getJson<ReplicaView[]>(`${admin}/api/v1/replicas?model=${encodeURIComponent(model)}`);
}

export async function postJson(url: string, body: unknown): Promise<Response> {
  return fetch(url, { method: 'POST', headers: adminHeaders, body: JSON.stringify(body) });
}

/** A tiny chat completion; resolves with the HTTP status (0 when the connection failed). */
export async function chat(client: string, key: string, model: string): Promise<number> {
  try {
    const res = await fetch(`${client}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 }),
      signal: AbortSignal.timeout(10_000),
    });
    await res.arrayBuffer();
    return res.status;
  } catch {
    return 0;
  }
}

/** The sim engines' pids an agent recorded, sorted: unchanged means nothing was restarted. */
export function enginePids(stateDir: string): number[] {
  const dir = join(stateDir, 'shards');
  return readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .map((f) => (JSON.parse(readFileSync(join(dir, f), 'utf8')) as { pid: number }).pid)
    .sort((a, b) => a - b);
}

/** An agent's record of the engine running a replica: its pid and the launch it was given (apiKey: the shard secret). */
export interface EngineRecord {
  pid: number;
  launch: { replicaId: string; apiKey?: string };
}

/** The record of the engine running `replicaId`, from whichever of these agents runs it. */
export function engineRecordOf(stateDirs: readonly string[], replicaId: string): EngineRecord {
  for (const stateDir of stateDirs) {
    const dir = join(stateDir, 'shards');
    let files: string[];
    try {
      files = readdirSync(dir).filter((f) => f.endsWith('.json'));
    } catch {
      continue;
    }
    for (const f of files) {
      const rec = JSON.parse(readFileSync(join(dir, f), 'utf8')) as EngineRecord;
      if (rec.launch.replicaId === replicaId) return rec;
    }
  }
  throw new Error(`no agent under ${stateDirs.join(', ')} runs an engine for replica ${replicaId}`);
}

/**
 * The secret a replica's engine takes: engines refuse requests without it,
 * and a test that reaches an engine directly (with the control plane dead,
 * say) must present it as the router does.
 */
export function engineSecretOf(stateDirs: readonly string[], replicaId: string): string {
  const secret = engineRecordOf(stateDirs, replicaId).launch.apiKey;
  if (!secret) throw new Error(`the engine for replica ${replicaId} was started without a secret`);
  return secret;
}

export function weightsDir(dir: string): string {
  const w = join(dir, 'weights');
  mkdirSync(w, { recursive: true });
  return `file://${w}`;
}

/**
 * Sends requests back to back from `workers` loops, round robin over
 * `clients`, until stop() is called; stop resolves with every status seen.
 */
export function clientLoad(
  clients: readonly string[],
  key: string,
  model: string,
  workers = 3,
): { count(): number; stop(): Promise<number[]> } {
  let running = true;
  const statuses: number[] = [];
  const loops = Array.from({ length: workers }, async (_, w) => {
    for (let i = w; running; i++) statuses.push(await chat(clients[i % clients.length]!, key, model));
  });
  return {
    /** Requests answered (or failed) so far. */
    count: () => statuses.length,
    async stop() {
      running = false;
      await Promise.all(loops);
      return statuses;
    },
  };
}
