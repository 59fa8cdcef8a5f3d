// Stand-ins for what the supervisor is given (clock, processes, probes,
// logger), so its state machine is tested in milliseconds: a clock moved by
// hand, processes that exist only as objects, probes that answer what the
// test says. For the supervisor's own tests and the agent's; under test/ so
// the build leaves them out and production code cannot pick them up.
import { writeSync } from 'node:fs';
import type { LlmgwError } from '../../src/errors/index.js';
import type { Readiness } from '../../src/agent/engines/index.js';
import type { SupervisorClock } from '../../src/agent/supervisor/clock.js';
import type { ProcessIdentity, ProcessTable } from '../../src/agent/supervisor/process-table.js';
import type { ProbeResult, ReadinessProber } from '../../src/agent/supervisor/readiness.js';
import type { ShardLogger } from '../../src/agent/supervisor/shard.js';
import type { ProcessExit, SpawnRequest, SpawnedProcess, Spawner } from '../../src/agent/supervisor/spawner.js';

/** Lets promise chains and setImmediate callbacks woken by the last step run before the next. */
export async function settle(rounds = 8): Promise<void> {
  for (let i = 0; i < rounds; i++) await new Promise<void>((resolve) => setImmediate(resolve));
}

interface Timer {
  readonly atMs: number;
  readonly seq: number;
  readonly resolve: () => void;
  readonly forget: () => void;
}

/** A clock that moves only when told to; sleepers wake in time order. */
export class ManualClock implements SupervisorClock {
  #nowMs: number;
  #seq = 0;
  readonly #timers: Timer[] = [];

  constructor(startMs = Date.UTC(2026, 0, 1)) {
    this.#nowMs = startMs;
  }

  now(): number {
    return this.#nowMs;
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      if (signal?.aborted) return resolve();
      const onAbort = () => {
        const index = this.#timers.indexOf(timer);
        if (index !== -1) this.#timers.splice(index, 1);
        resolve();
      };
      const timer: Timer = {
        atMs: this.#nowMs + Math.max(0, ms),
        seq: this.#seq++,
        resolve,
        forget: () => signal?.removeEventListener('abort', onAbort),
      };
      this.#timers.push(timer);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** Sleepers waiting now. */
  get pending(): number {
    return this.#timers.length;
  }

  /** Moves time forward by `ms`, waking each sleeper due on the way in order and letting it run before the next. */
  async advance(ms: number): Promise<void> {
    const endMs = this.#nowMs + ms;
    for (;;) {
      await settle();
      const next = this.#next();
      if (!next || next.atMs > endMs) break;
      this.#wake(next);
    }
    this.#nowMs = endMs;
    await settle();
  }

  /**
   * Wakes sleepers one at a time, in order, until `predicate` holds. Throws
   * when it still does not after `maxMs` of clock time or with nobody left
   * asleep, naming `what`.
   */
  async until(predicate: () => boolean, what: string, maxMs = 24 * 3_600_000): Promise<void> {
    const limitMs = this.#nowMs + maxMs;
    for (;;) {
      await settle();
      if (predicate()) return;
      let next = this.#next();
      // Nobody asleep: the code may be in real I/O (files); give it real time, against a deadline, before giving up.
      const ioDeadline = Date.now() + 5_000;
      while (!next && !predicate() && Date.now() < ioDeadline) {
        await new Promise((resolve) => setTimeout(resolve, 5));
        next = this.#next();
      }
      if (predicate()) return;
      if (!next) throw new Error(`still waiting for ${what}, and nothing is asleep to wake`);
      if (next.atMs > limitMs) throw new Error(`still waiting for ${what} after ${maxMs}ms of clock time`);
      this.#wake(next);
    }
  }

  #next(): Timer | undefined {
    return [...this.#timers].sort((a, b) => a.atMs - b.atMs || a.seq - b.seq)[0];
  }

  #wake(timer: Timer): void {
    this.#timers.splice(this.#timers.indexOf(timer), 1);
    this.#nowMs = Math.max(this.#nowMs, timer.atMs);
    timer.forget();
    timer.resolve();
  }
}

/** How a fake process behaves; every member has a default. */
export interface FakeBehaviour {
  /** Stays alive through SIGTERM (only SIGKILL ends it). Default false. */
  ignoreTerm?: boolean;
  /** Lines written to the shard's log at the start, as the engine's own output. Default none. */
  output?: readonly string[];
  /** Extra members of its process group (workers) that outlive the leader until signalled. Default 0. */
  workers?: number;
  /** Makes spawn() fail with this error instead. */
  failSpawn?: LlmgwError;
}

export interface FakeProcess extends SpawnedProcess {
  readonly argv: readonly string[];
  readonly env: Readonly<Record<string, string>>;
  readonly signals: NodeJS.Signals[];
  alive: boolean;
  /** Workers still alive. */
  workersAlive: number;
  /** Ends the leader as a crash would (workers stay, as real forked workers do). */
  exit(code: number | null, signal?: NodeJS.Signals | null): void;
}

/** A process table and spawner whose processes are objects. */
export class FakeProcesses implements Spawner, ProcessTable {
  readonly spawned: FakeProcess[] = [];
  /** Decides each new process's behaviour from its request. */
  behaviour: (request: SpawnRequest) => FakeBehaviour = () => ({});
  #nextPid = 40_000;
  readonly #ignoreTerm = new Map<number, boolean>();

  spawn(request: SpawnRequest): Promise<SpawnedProcess> {
    const behaviour = this.behaviour(request);
    if (behaviour.failSpawn) return Promise.reject(behaviour.failSpawn);
    for (const line of behaviour.output ?? []) writeSync(request.logFd, `${line}\n`);
    const pid = this.#nextPid++;
    let resolveExit!: (exit: ProcessExit) => void;
    const exited = new Promise<ProcessExit>((resolve) => (resolveExit = resolve));
    const process: FakeProcess = {
      pid,
      pgid: pid,
      exited,
      argv: request.argv,
      env: request.env,
      signals: [],
      alive: true,
      workersAlive: behaviour.workers ?? 0,
      exit(code, signal = null) {
        if (!process.alive) return;
        process.alive = false;
        resolveExit({ code, signal });
      },
    };
    this.#ignoreTerm.set(pid, behaviour.ignoreTerm ?? false);
    this.spawned.push(process);
    return Promise.resolve(process);
  }

  byPid(pid: number | undefined): FakeProcess | undefined {
    return this.spawned.find((p) => p.pid === pid);
  }

  identity(pid: number): ProcessIdentity | null {
    const process = this.byPid(pid);
    return process?.alive ? { startToken: `fake-start-${pid}`, cmdline: process.argv } : null;
  }

  groupAlive(pgid: number): boolean {
    return this.spawned.some((p) => p.pgid === pgid && (p.alive || p.workersAlive > 0));
  }

  signalGroup(pgid: number, signal: NodeJS.Signals): boolean {
    let any = false;
    for (const process of this.spawned) {
      if (process.pgid !== pgid || (!process.alive && process.workersAlive === 0)) continue;
      any = true;
      process.signals.push(signal);
      if (signal === 'SIGKILL' || !this.#ignoreTerm.get(process.pid)) {
        process.workersAlive = 0;
        process.exit(null, signal);
      }
    }
    return any;
  }
}

/** Answers probes as `answer` says (default: ready), and counts them with the clock reading of each. */
export class ScriptedProber implements ReadinessProber {
  answer: (readiness: Readiness) => ProbeResult = () => ({ ok: true });
  readonly probesAtMs: number[] = [];

  constructor(private readonly clock: SupervisorClock) {}

  probe(readiness: Readiness): Promise<ProbeResult> {
    this.probesAtMs.push(this.clock.now());
    return Promise.resolve(this.answer(readiness));
  }
}

export interface LogEntry {
  readonly level: 'info' | 'warn' | 'error';
  readonly fields: Record<string, unknown>;
  readonly message: string;
}

/** Keeps every line, for assertions on what was logged. */
export class CapturingLogger implements ShardLogger {
  readonly entries: LogEntry[] = [];
  info(fields: Record<string, unknown>, message: string): void {
    this.entries.push({ level: 'info', fields, message });
  }
  warn(fields: Record<string, unknown>, message: string): void {
    this.entries.push({ level: 'warn', fields, message });
  }
  error(fields: Record<string, unknown>, message: string): void {
    this.entries.push({ level: 'error', fields, message });
  }
  /** The `from → to` transitions logged for a shard, in order. */
  transitions(shardId: string): string[] {
    return this.entries
      .filter((e) => e.fields.shardId === shardId && e.fields.to !== undefined)
      .map((e) => `${String(e.fields.from ?? '')}→${String(e.fields.to)}`);
  }
}
