// What every fault test needs around a real fleet on loopback: a control
// plane, agents with simulated hardware and their own engine port ranges
// (each test file gets its own slice of 30000-31999, so files can run side
// by side), the admin API as the operator sees it, and the engine records
// each agent keeps (pid, restarts), read from its state directory, because
// "no engine was started again" is a fact about processes, not about views.
import { mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'vitest';
import type { NodeView, ReplicaView } from '../../src/api/index.js';
import { startControl, startLlmgw, type RunningProcess } from '../support/processes.js';
import { waitFor } from '../support/wait.js';

export const JOIN = 'faults-join-token-0123456789abcdef';
export const ADMIN = 'faults-admin-token-0123456789abcdef';
export const adminHeaders = {
  authorization: `Bearer ${ADMIN}`,
  'content-type': 'application/json',
  'x-llmgw-actor': 'faults',
};

// The admin API's own shapes, as the typed client declares them.
export type { NodeView, ReplicaView } from '../../src/api/index.js';

/** One running engine, from the record its agent keeps in `<stateDir>/shards`. */
export interface EngineRecord {
  shardId: string;
  replicaId: string;
  pid: number;
  pgid: number;
  restarts: number;
  port: number | null;
}

export class Fleet {
  readonly agents = new Map<string, RunningProcess>();
  readonly stateDirs: string[] = [];
  #nextPort: number;

  constructor(
    readonly dir: string,
    /** First engine port of this file's slice; each agent takes the next 20. */
    firstPort: number,
    public admin = '',
    public agentUrl = '',
  ) {
    this.#nextPort = firstPort;
  }

  /** Starts the control plane on the store in `dir` (fixed ports may be passed in `args`). */
  async startControl(args: string[] = [], env?: NodeJS.ProcessEnv) {
    const control = await startControl(
      [
        '--store',
        `sqlite:${join(this.dir, 'db')}`,
        '--join-token',
        JOIN,
        '--admin-token',
        ADMIN,
        '--log-level',
        'warn',
        ...args,
      ],
      env ? { env } : {},
    );
    this.admin = control.urls.admin;
    this.agentUrl = control.urls.agent;
    return control;
  }

  stateDir(id: string): string {
    return join(this.dir, id);
  }

  /** Starts (or restarts, on the same state dir and port range) an agent; `control` defaults to the plane's agent URL. */
  startAgent(id: string, extra: string[] = [], control = this.agentUrl): RunningProcess {
    const stateDir = this.stateDir(id);
    if (!this.stateDirs.includes(stateDir)) this.stateDirs.push(stateDir);
    const range = this.#ranges.get(id) ?? `${this.#nextPort}-${(this.#nextPort += 20) - 1}`;
    this.#ranges.set(id, range);
    const proc = startLlmgw([
      'agent',
      '--control',
      control,
      '--join-token',
      JOIN,
      '--node-id',
      id,
      '--state-dir',
      stateDir,
      '--heartbeat-interval',
      '300ms',
      '--port-range',
      range,
      '--log-level',
      'warn',
      ...(extra.some((a) => a === '--simulate') ? [] : ['--simulate', 'gpus=0,ram=16g']),
      ...extra,
    ]);
    this.agents.set(id, proc);
    return proc;
  }

  readonly #ranges = new Map<string, string>();

  async api<T>(method: string, path: string, body?: unknown): Promise<{ status: number; body: T }> {
    const res = await fetch(`${this.admin}${path}`, {
      method,
      headers: adminHeaders,
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await res.text();
    return { status: res.status, body: (text ? JSON.parse(text) : null) as T };
  }

  async replicas(model?: string): Promise<ReplicaView[]> {
    return (await this.api<ReplicaView[]>('GET', `/api/v1/replicas${model ? `?model=${model}` : ''}`)).body;
  }

  async nodes(): Promise<NodeView[]> {
    return (await this.api<NodeView[]>('GET', '/api/v1/nodes')).body;
  }

  async nodesUp(count: number, timeoutMs = 60_000): Promise<void> {
    await waitFor(
      `${count} nodes up`,
      async () => {
        const nodes = await this.nodes();
        return nodes.filter((n) => n.liveness === 'up').length >= count ? true : undefined;
      },
      timeoutMs,
    );
  }

  async addModel(def: Record<string, unknown>): Promise<void> {
    const res = await this.api('POST', '/api/v1/models', { source: this.weights(), ...def });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
  }

  /** Waits for at least `count` ready replicas of `model` and returns the ready ones. */
  async ready(model: string, count: number, timeoutMs = 90_000): Promise<ReplicaView[]> {
    return waitFor(
      `${count} ready replica(s) of ${model}`,
      async () => {
        const up = (await this.replicas(model)).filter((r) => r.state === 'ready');
        return up.length >= count ? up : undefined;
      },
      timeoutMs,
    );
  }

  /** A file:// source for sim models: used in place, never fetched. */
  weights(): string {
    const w = join(this.dir, 'weights');
    mkdirSync(w, { recursive: true });
    return `file://${w}`;
  }

  /** The engines an agent runs, by its records; empty when it has none (or no state dir). */
  engines(id: string): EngineRecord[] {
    const shards = join(this.stateDir(id), 'shards');
    let files: string[] = [];
    try {
      files = readdirSync(shards).filter((f) => f.endsWith('.json'));
    } catch {
      return [];
    }
    return files
      .map(
        (f) =>
          JSON.parse(readFileSync(join(shards, f), 'utf8')) as {
            shardId: string;
            pid: number;
            pgid: number;
            restarts: number;
            port: number | null;
            launch: { replicaId: string };
          },
      )
      .map((r) => ({
        shardId: r.shardId,
        replicaId: r.launch.replicaId,
        pid: r.pid,
        pgid: r.pgid,
        restarts: r.restarts,
        port: r.port,
      }))
      .sort((a, b) => a.replicaId.localeCompare(b.replicaId));
  }

  /** The engine record of one replica, wherever it runs. */
  engineOf(replicaId: string): EngineRecord | undefined {
    for (const id of this.agents.keys()) {
      const found = this.engines(id).find((e) => e.replicaId === replicaId);
      if (found) return found;
    }
    return undefined;
  }
}

/** True while a process with this pid lives (and is not a zombie). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !/\) Z /.test(stat);
  } catch {
    return false;
  }
}

/**
 * Every process on this machine whose environment marks it as the engine of
 * `shardId` (`LLMGW_SHARD_ID`): the engines that really run, whatever any
 * record says.
 */
export function enginesInProcessTable(shardId: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const env = readFileSync(`/proc/${entry}/environ`, 'utf8').split('\0');
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      // Group leaders only: the engine process itself, not what it forks.
      if (Number(fields[2]) !== Number(entry) || fields[0] === 'Z') continue;
      if (env.some((kv) => kv === `LLMGW_SHARD_ID=${shardId}`)) pids.push(Number(entry));
    } catch {
      // Gone, or not readable: not an engine of ours.
    }
  }
  return pids;
}
