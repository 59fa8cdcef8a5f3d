// One shard under supervision: a small state machine around the engine
// process that runs it. It starts the engine, waits for its readiness probe,
// notices when it exits, kills what is left of its process group, and starts
// it again after the restart policy's delay. Every transition is checked
// against the table below (a wrong one is a bug: IllegalStateError) and
// logged with its reason. The supervisor owns the set of shards; this owns
// one shard's life.
import { closeSync } from 'node:fs';
import { LlmgwError, IllegalStateError, isLlmgwError, type ErrorCode } from '../../errors/index.js';
import type { EngineShardState } from '../../protocol/index.js';
import type { KvEventsEndpoint } from '../../protocol/kv-events.js';
import { hostPort, probeHost, type EngineAdapter, type EngineLaunchPlan, type ShardLaunch } from '../engines/index.js';
import type { SupervisorClock } from './clock.js';
import { formatElapsedMs } from './elapsed.js';
import { removeEngineFiles, writeEngineFiles } from './engine-files.js';
import type { PortAllocator } from './port-allocator.js';
import { killProcessGroup, type ProcessTable } from './process-table.js';
import type { ReadinessProber } from './readiness.js';
import type { RestartPolicy } from './restart-policy.js';
import { redactArgv, redactSecret, type ShardLog } from './shard-log.js';
import { SHARD_RECORD_VERSION, type ShardRecord, type ShardRecords } from './shard-records.js';
import type { ProcessExit, SpawnedProcess, Spawner } from './spawner.js';

/**
 * 'starting': the engine runs (or is being started) and its probe has not
 * answered yet. 'ready': the probe answered. 'failed': it exited or never
 * became ready; `error` says why and, unless the policy gave up, a restart is
 * due. 'stopping': it was asked to exit and has not yet. 'stopped': nothing
 * of it runs; the supervisor forgets it. ('fetching' comes before any of
 * these and is the agent's: there is no process to supervise yet.)
 */
export type ShardState = EngineShardState;

const TRANSITIONS: Readonly<Record<ShardState, readonly ShardState[]>> = {
  starting: ['ready', 'failed', 'stopping'],
  ready: ['failed', 'stopping'],
  // A failed shard has no process once its group is cleaned up: a stop needs no 'stopping'.
  failed: ['starting', 'stopped'],
  // 'failed' when the supervisor itself stopped an engine that was not ready in time.
  stopping: ['stopped', 'failed'],
  stopped: [],
};

/** A shard's last failure: the code to branch on and the sentence for the operator. */
export interface ShardError {
  readonly code: ErrorCode;
  readonly message: string;
}

export interface ShardStatus {
  readonly shardId: string;
  readonly replicaId: string;
  readonly engine: string;
  readonly state: ShardState;
  /** The engine's pid while a process runs; absent otherwise. */
  readonly pid?: number;
  /** The port the engine listens on; absent when it has none (vLLM headless) or none is held yet. */
  readonly port?: number;
  /** http://host:port (https:// for an engine serving TLS) for the rank that serves the API; absent for other ranks and before a port is known. */
  readonly endpoint?: string;
  /** Where the engine tells what its KV cache holds, reachable as the endpoint is; absent = it tells nothing. */
  readonly kvEvents?: KvEventsEndpoint;
  /** The latest failure; kept through a restart until the engine is ready again. */
  readonly error?: ShardError;
  /** Times the engine was started again after a failure, across agent restarts. */
  readonly restarts: number;
  /** Failures since the engine last ran long enough to count as stable (the restart policy's count); 0 when none. */
  readonly failuresInARow: number;
  /** When the running process started (ISO 8601); absent when none runs. */
  readonly startedAt?: string;
  /** When the running process became ready (ISO 8601); absent until it does. */
  readonly readyAt?: string;
  /** When a failed shard will be started again (ISO 8601); absent when no restart is due. */
  readonly nextRestartAt?: string;
  /** How the last process ended; absent when none has ended. Code and signal both null = unknown (adopted). */
  readonly lastExit?: { readonly code: number | null; readonly signal: string | null; readonly afterMs: number };
  /** True when this agent found the engine running, started by an earlier agent. */
  readonly adopted: boolean;
}

export interface ShardLogger {
  info(fields: Record<string, unknown>, message: string): void;
  warn(fields: Record<string, unknown>, message: string): void;
  error(fields: Record<string, unknown>, message: string): void;
}

/** What every shard shares, handed down by the supervisor. */
export interface ShardDeps {
  readonly clock: SupervisorClock;
  readonly spawner: Spawner;
  readonly table: ProcessTable;
  readonly prober: ReadinessProber;
  readonly logger: ShardLogger;
  readonly policy: RestartPolicy;
  readonly ports: PortAllocator;
  readonly records: ShardRecords;
  readonly settings: ShardSettings;
  /** Called after every transition and every change a status reader should see. */
  readonly onChange: (shard: Shard) => void;
  /** Called once, when the shard reaches 'stopped'. */
  readonly onStopped: (shard: Shard) => void;
}

export interface ShardSettings {
  readonly stopGraceMs: number;
  /** After SIGKILL, how long to wait for the group to be gone before reporting it stuck. */
  readonly killWaitMs: number;
  readonly readinessPollInitialMs: number;
  readonly readinessPollMaxMs: number;
  readonly probeTimeoutMs: number;
  readonly adoptedPollIntervalMs: number;
  /** How often a ready engine's probe is asked again; 0 = never (a hung engine is then only found by its clients). */
  readonly livenessIntervalMs: number;
  /** Failed liveness probes in a row after which a ready engine counts as hung and is stopped (then restarted). */
  readonly livenessFailures: number;
  readonly lastLogLines: number;
  readonly baseEnv: Readonly<Record<string, string>>;
  /** Host in endpoints; absent = the bind host (loopback for a wildcard bind). */
  readonly advertiseHost: string | undefined;
}

/**
 * Environment variables every engine is started with, so that the engines of
 * an agent whose state directory was lost can still be told apart from
 * everything else on the machine: the state directory (which agent), the
 * shard and the port.
 */
export const STATE_DIR_MARK = 'LLMGW_AGENT_STATE_DIR';
export const SHARD_ID_MARK = 'LLMGW_SHARD_ID';
export const SHARD_PORT_MARK = 'LLMGW_SHARD_PORT';

interface Run {
  readonly process: SpawnedProcess;
  readonly plan: EngineLaunchPlan;
  readonly startedAtMs: number;
  readyAtMs: number | undefined;
  /** Aborted when the run ends or supervision of it stops: ends the readiness loop and an adopted engine's watcher. */
  readonly abort: AbortController;
  ended: boolean;
}

export interface ShardInit {
  readonly launch: ShardLaunch;
  /** Null when no adapter could be made for the engine; `setupError` then says why. */
  readonly adapter: EngineAdapter | null;
  readonly setupError?: LlmgwError;
  readonly specHash: string;
  readonly startTimeoutMs: number;
  readonly log: ShardLog;
}

export interface AdoptedRun {
  readonly record: ShardRecord;
}

export class Shard {
  readonly launch: ShardLaunch;
  readonly specHash: string;
  readonly log: ShardLog;
  readonly #adapter: EngineAdapter | null;
  readonly #setupError: LlmgwError | undefined;
  readonly #startTimeoutMs: number;
  readonly #deps: ShardDeps;

  #state: ShardState = 'starting';
  #error: ShardError | undefined;
  #restarts = 0;
  #consecutiveFailures = 0;
  #adopted = false;
  /** The port held for this shard (from the range, or the launch's own); kept across restarts so the endpoint stays put. */
  #port: number | undefined;
  /** Ports of the engine's KV event publisher, held like #port across restarts; undefined = none. */
  #kvPorts: readonly number[] | undefined;
  #run: Run | undefined;
  #lastExit: ShardStatus['lastExit'];
  #nextRestartAtMs: number | undefined;
  #restartWait: AbortController | undefined;
  /** A start under way (port, plan, spawn); a stop waits for it so no process escapes. */
  #launching: Promise<void> | undefined;
  /** Killing what is left of a failed run; a restart or stop waits for it. */
  #cleanup: Promise<void> | undefined;
  #stopWanted = false;
  #stopping: Promise<void> | undefined;
  #detached = false;

  constructor(init: ShardInit, deps: ShardDeps) {
    this.launch = init.launch;
    this.specHash = init.specHash;
    this.log = init.log;
    this.#adapter = init.adapter;
    this.#setupError = init.setupError;
    this.#startTimeoutMs = init.startTimeoutMs;
    this.#deps = deps;
  }

  get shardId(): string {
    return this.launch.shardId;
  }

  get state(): ShardState {
    return this.#state;
  }

  /** Begins the first run; resolves once the engine was spawned or the start failed (not when it is ready). */
  start(): Promise<void> {
    if (this.#run || this.#launching || this.#stopWanted)
      throw new IllegalStateError(`shard ${this.shardId} was already started`, {
        shardId: this.shardId,
        state: this.#state,
      });
    this.#deps.logger.info(
      this.#fields({ to: 'starting', reason: 'wanted' }),
      `shard ${this.shardId}: starting (${this.launch.profile.engine})`,
    );
    this.#deps.onChange(this);
    return this.#startLaunch();
  }

  /**
   * Takes over an engine an earlier agent started and that was checked to be
   * that very process: no new process, its readiness probed again.
   */
  adopt(record: ShardRecord): void {
    if (this.#run || this.#launching)
      throw new IllegalStateError(`shard ${this.shardId} cannot adopt a process: it already runs one`, {
        shardId: this.shardId,
      });
    this.#adopted = true;
    this.#restarts = record.restarts;
    if (
      record.port !== null &&
      this.#adapter?.usesPort(this.launch) !== false &&
      this.#deps.ports.claim(record.port, this.shardId)
    )
      this.#port = record.port;
    const kv = record.plan.kvEvents;
    if (kv?.kind === 'zmq') {
      const held = [kv.port, ...(kv.replayPort === undefined ? [] : [kv.replayPort])];
      if (held.every((p) => this.#deps.ports.claim(p, this.shardId))) this.#kvPorts = held;
    }
    const abort = new AbortController();
    const run: Run = {
      process: { pid: record.pid, pgid: record.pgid, exited: this.#watchAdopted(record, abort.signal) },
      plan: record.plan,
      startedAtMs: Date.parse(record.startedAt) || this.#deps.clock.now(),
      readyAtMs: undefined,
      abort,
      ended: false,
    };
    this.#run = run;
    this.#deps.logger.info(
      this.#fields({ to: 'starting', pid: record.pid, reason: 'adopted' }),
      `shard ${this.shardId}: adopted pid ${record.pid} from an earlier agent; probing it`,
    );
    this.#deps.onChange(this);
    void run.process.exited.then((exit) => this.#onExit(run, exit));
    void this.#awaitReady(run, this.#deps.clock.now() + this.#startTimeoutMs);
  }

  status(): ShardStatus {
    const run = this.#run && !this.#run.ended ? this.#run : undefined;
    const port = this.#port ?? portOf(run?.plan ?? null);
    const servesApi = run?.plan.servesApi ?? this.launch.rank === 0;
    const host = this.#deps.settings.advertiseHost ?? probeHost(this.launch.host);
    const iso = (ms: number | undefined) => (ms === undefined ? undefined : new Date(ms).toISOString());
    return {
      shardId: this.shardId,
      replicaId: this.launch.replicaId,
      engine: this.launch.profile.engine,
      state: this.#state,
      ...(run ? { pid: run.process.pid } : {}),
      ...(port === undefined ? {} : { port }),
      ...(servesApi && port !== undefined && this.#state !== 'stopped'
        ? { endpoint: `${schemeOf(this.#run?.plan)}://${hostPort(host, port)}` }
        : {}),
      ...(servesApi && this.#state !== 'stopped' && run?.plan.kvEvents
        ? { kvEvents: kvEndpoint(run.plan.kvEvents, host) }
        : {}),
      ...(this.#error ? { error: this.#error } : {}),
      restarts: this.#restarts,
      failuresInARow: this.#consecutiveFailures,
      ...(run ? { startedAt: iso(run.startedAtMs) } : {}),
      ...(run?.readyAtMs !== undefined ? { readyAt: iso(run.readyAtMs) } : {}),
      ...(this.#nextRestartAtMs !== undefined ? { nextRestartAt: iso(this.#nextRestartAtMs) } : {}),
      ...(this.#lastExit ? { lastExit: this.#lastExit } : {}),
      adopted: this.#adopted,
    };
  }

  /** Makes the engine exit (SIGTERM to its group, SIGKILL after the grace period) and resolves once nothing of it runs. Idempotent. */
  stop(reason: string): Promise<void> {
    if (this.#detached)
      throw new IllegalStateError(`shard ${this.shardId} was detached; an agent that detached does not stop engines`, {
        shardId: this.shardId,
      });
    this.#stopping ??= this.#stop(reason);
    return this.#stopping;
  }

  /** Stops watching without touching the engine: the agent exits, the engine keeps serving, its record stays for the next agent. */
  detach(): void {
    this.#detached = true;
    this.#restartWait?.abort();
    this.#run?.abort.abort();
  }

  async #stop(reason: string): Promise<void> {
    this.#stopWanted = true;
    this.#restartWait?.abort();
    if (this.#state === 'starting' || this.#state === 'ready') this.#transition('stopping', reason);
    await this.#launching;
    await this.#cleanup;
    const run = this.#run;
    if (run && !run.ended) {
      run.abort.abort();
      this.log.note(`stopping pid ${run.process.pid}: ${reason}`);
      const gone = await this.#killGroup(run.process.pgid);
      if (!gone) this.#stuck(run.process.pgid);
      run.ended = true;
    }
    this.#finish();
    this.#transition('stopped', reason);
    this.#deps.onStopped(this);
  }

  #startLaunch(): Promise<void> {
    const launching = this.#launch().finally(() => {
      if (this.#launching === launching) this.#launching = undefined;
    });
    this.#launching = launching;
    return launching;
  }

  async #launch(): Promise<void> {
    if (!this.#adapter) {
      this.#fail(
        this.#setupError ??
          new LlmgwError('LLMGW_ENGINE_UNKNOWN', `no adapter for engine ${this.launch.profile.engine}`),
        0,
        false,
      );
      return;
    }
    let plan: EngineLaunchPlan;
    try {
      const port = await this.#ensurePort(this.#adapter);
      const kvPorts = await this.#ensureKvPorts(this.#adapter);
      if (this.#stopWanted || this.#detached) return;
      const launch = kvPorts === undefined ? this.launch : { ...this.launch, kvEventsPorts: kvPorts };
      plan = this.#adapter.plan(port === undefined ? launch : { ...launch, port });
    } catch (err) {
      // A wrong launch will not right itself; a port shortage may.
      this.#fail(asLlmgwError(err), 0, isLlmgwError(err) && err.code === 'LLMGW_PORT_EXHAUSTED');
      return;
    }
    const startedAtMs = this.#deps.clock.now();
    let process: SpawnedProcess;
    let fd: number | undefined;
    try {
      this.log.noteStart(
        `${this.launch.profile.engine} at ${new Date(startedAtMs).toISOString()}: ${redactArgv(plan.argv).join(' ')}`,
      );
      writeEngineFiles(plan.files);
      fd = this.log.openForEngine();
      // The marks let a later agent that lost its records find this engine again (supervisor.adopt()).
      const marks = {
        [SHARD_ID_MARK]: this.shardId,
        ...(this.#port === undefined ? {} : { [SHARD_PORT_MARK]: String(this.#port) }),
      };
      process = await this.#deps.spawner.spawn({
        argv: plan.argv,
        env: { ...this.#deps.settings.baseEnv, ...plan.env, ...marks },
        logFd: fd,
      });
    } catch (err) {
      this.#fail(asLlmgwError(err), 0, true);
      return;
    } finally {
      if (fd !== undefined) closeSync(fd);
    }
    const run: Run = { process, plan, startedAtMs, readyAtMs: undefined, abort: new AbortController(), ended: false };
    this.#run = run;
    this.#writeRecord(run);
    this.#deps.logger.info(
      this.#fields({ pid: process.pid, argv: redactArgv(plan.argv) }),
      `shard ${this.shardId}: spawned pid ${process.pid}`,
    );
    this.#deps.onChange(this);
    void process.exited.then((exit) => this.#onExit(run, exit));
    // A stop that came while spawning kills this run; it waits for #launching first.
    if (this.#stopWanted || this.#detached) return;
    void this.#awaitReady(run, startedAtMs + this.#startTimeoutMs);
  }

  /** The port to plan with: undefined when the engine listens on none of the range's. */
  async #ensurePort(adapter: EngineAdapter): Promise<number | undefined> {
    if (!adapter.usesPort(this.launch)) return undefined;
    const { ports } = this.#deps;
    if (this.launch.port !== 0) {
      if (!ports.claim(this.launch.port, this.shardId)) {
        throw new LlmgwError(
          'LLMGW_ENGINE_START_FAILED',
          `port ${this.launch.port} is already used by shard ${ports.holderOf(this.launch.port)} on this node`,
          {
            context: { shardId: this.shardId, port: this.launch.port },
          },
        );
      }
      this.#port = this.launch.port;
      return this.#port;
    }
    // A restart keeps its port, and with it its endpoint, unless something else took it meanwhile.
    if (this.#port !== undefined && !(await ports.isFree(this.launch.host, this.#port))) {
      this.#deps.logger.warn(
        this.#fields({ port: this.#port }),
        `shard ${this.shardId}: port ${this.#port} was taken while the engine was down; picking another`,
      );
      ports.release(this.#port, this.shardId);
      this.#port = undefined;
    }
    this.#port ??= await ports.allocate(this.shardId, this.launch.host);
    return this.#port;
  }

  /** The KV event ports the adapter asks for, allocated once and kept across restarts; undefined = none asked. */
  async #ensureKvPorts(adapter: EngineAdapter): Promise<readonly number[] | undefined> {
    const wanted = adapter.kvEventsPorts?.(this.launch) ?? 0;
    if (wanted === 0) return undefined;
    if (this.#kvPorts?.length === wanted) return this.#kvPorts;
    const ports: number[] = [];
    for (let i = 0; i < wanted; i++) ports.push(await this.#deps.ports.allocate(this.shardId, this.launch.host));
    this.#kvPorts = ports;
    return ports;
  }

  #writeRecord(run: Run): void {
    const identity = this.#deps.table.identity(run.process.pid);
    // A process gone already has nothing to adopt; its exit is on its way.
    if (!identity) return;
    const record: ShardRecord = {
      version: SHARD_RECORD_VERSION,
      shardId: this.shardId,
      pid: run.process.pid,
      pgid: run.process.pgid,
      startToken: identity.startToken,
      port: this.#port ?? portOf(run.plan) ?? null,
      argv: run.plan.argv,
      startedAt: new Date(run.startedAtMs).toISOString(),
      specHash: this.specHash,
      restarts: this.#restarts,
      launch: this.launch,
      plan: run.plan,
    };
    try {
      this.#deps.records.write(record);
    } catch (err) {
      // The engine runs; only a later agent's adoption of it is lost.
      this.#deps.logger.error(
        this.#fields({ err: String(err) }),
        `shard ${this.shardId}: cannot write its record; a restarted agent will not adopt this engine`,
      );
    }
  }

  async #awaitReady(run: Run, deadlineMs: number): Promise<void> {
    const { clock, prober, settings } = this.#deps;
    let delayMs = settings.readinessPollInitialMs;
    let last = 'no answer yet';
    for (;;) {
      if (run.abort.signal.aborted || run !== this.#run) return;
      // A whole probe timeout even near the deadline: a probe cut to a millisecond fails for its own reason, and its detail would hide the engine's.
      const result = await prober.probe(run.plan.readiness, settings.probeTimeoutMs);
      if (run.abort.signal.aborted || run !== this.#run || this.#state !== 'starting') return;
      if (result.ok) {
        run.readyAtMs = clock.now();
        this.#error = undefined;
        this.#transition(
          'ready',
          `${describeReadiness(run.plan)} answered after ${formatElapsedMs(run.readyAtMs - run.startedAtMs)}`,
        );
        void this.#watchLiveness(run);
        return;
      }
      last = result.detail;
      if (clock.now() >= deadlineMs) {
        this.#notReady(run, last);
        return;
      }
      await clock.sleep(Math.min(delayMs, Math.max(0, deadlineMs - clock.now())), run.abort.signal);
      delayMs = Math.min(settings.readinessPollMaxMs, delayMs * 1.5);
    }
  }

  /**
   * Readiness once is not health forever: an engine can hang (a deadlocked
   * scheduler, a wedged GPU) with its process alive, and no exit event ever
   * comes. So a ready engine is probed again on an interval, each probe
   * bounded by the probe timeout; after livenessFailures failures in a row it
   * is stopped and restarted like an engine that exited.
   */
  async #watchLiveness(run: Run): Promise<void> {
    const { clock, prober, settings } = this.#deps;
    if (settings.livenessIntervalMs === 0 || run.plan.readiness.kind === 'none' || run.plan.probeWhileReady === false)
      return;
    let failures = 0;
    for (;;) {
      await clock.sleep(settings.livenessIntervalMs, run.abort.signal);
      if (run.abort.signal.aborted || run !== this.#run || this.#state !== 'ready') return;
      const result = await prober.probe(run.plan.readiness, settings.probeTimeoutMs);
      if (run.abort.signal.aborted || run !== this.#run || this.#state !== 'ready') return;
      if (result.ok) {
        failures = 0;
        continue;
      }
      failures++;
      this.#deps.logger.warn(
        this.#fields({ failures, detail: result.detail }),
        `shard ${this.shardId}: liveness probe failed (${failures} of ${settings.livenessFailures}): ${result.detail}`,
      );
      if (failures >= settings.livenessFailures) {
        this.#notLive(run, result.detail, failures);
        return;
      }
    }
  }

  #notLive(run: Run, lastProbe: string, failures: number): void {
    const { probeTimeoutMs } = this.#deps.settings;
    this.#killThenFail(
      run,
      `${describeReadiness(run.plan)} failed ${failures} times in a row while ready (last: ${lastProbe}); the engine is hung`,
      (lines) =>
        new LlmgwError(
          'LLMGW_ENGINE_UNRESPONSIVE',
          `engine stopped answering its health check (${failures} probes in a row failed, each given ${formatElapsedMs(probeTimeoutMs)}; last: ${lastProbe}), so it was stopped and will be started again; ${lines}`,
          { context: { shardId: this.shardId, failures } },
        ),
    );
  }

  #notReady(run: Run, lastProbe: string): void {
    this.#killThenFail(
      run,
      `not ready within ${formatElapsedMs(this.#startTimeoutMs)} (last probe: ${lastProbe})`,
      (lines) =>
        new LlmgwError(
          'LLMGW_ENGINE_NOT_READY',
          `engine did not become ready within ${formatElapsedMs(this.#startTimeoutMs)} (last probe: ${lastProbe}), so it was stopped; ${lines}`,
          {
            context: { shardId: this.shardId, startTimeoutMs: this.#startTimeoutMs },
          },
        ),
    );
  }

  /**
   * Stops a run the probes gave up on (never ready, or hung once ready), then
   * fails the shard with the error `errorFor` makes from the log's last lines,
   * so the usual backoff restarts it. A stop asked for meanwhile finishes the
   * shard itself instead.
   */
  #killThenFail(run: Run, reason: string, errorFor: (lastLines: string) => LlmgwError): void {
    const uptimeMs = this.#deps.clock.now() - run.startedAtMs;
    this.#transition('stopping', reason);
    run.abort.abort();
    this.log.note(`stopping pid ${run.process.pid}: ${reason}`);
    this.#cleanup = (async () => {
      const gone = await this.#killGroup(run.process.pgid);
      if (!gone) this.#stuck(run.process.pgid);
      run.ended = true;
      this.#cleanup = undefined;
      if (this.#stopWanted || this.#detached) return;
      this.#fail(errorFor(this.#lastLines()), uptimeMs, true);
    })();
  }

  #onExit(run: Run, exit: ProcessExit): void {
    if (run !== this.#run || run.ended || this.#detached) return;
    run.ended = true;
    run.abort.abort();
    const afterMs = this.#deps.clock.now() - run.startedAtMs;
    this.#lastExit = { code: exit.code, signal: exit.signal, afterMs };
    // An expected exit: the stop (or the not-ready kill) that caused it carries on.
    if (this.#state === 'stopping') return;
    const wasReady = this.#state === 'ready';
    const how =
      exit.code === null && exit.signal === null
        ? `engine (pid ${run.process.pid}, started by an earlier agent) is gone after ${formatElapsedMs(afterMs)}; its exit code is unknown`
        : exit.signal
          ? `engine was killed by ${exit.signal} after ${formatElapsedMs(afterMs)}${wasReady ? '' : ', before it was ready'}`
          : `engine exited with code ${exit.code} after ${formatElapsedMs(afterMs)}${wasReady ? '' : ', before it was ready'}`;
    const error = new LlmgwError(
      wasReady ? 'LLMGW_ENGINE_EXITED' : 'LLMGW_ENGINE_START_FAILED',
      `${how}; ${this.#lastLines()}`,
      {
        context: { shardId: this.shardId, exitCode: exit.code, signal: exit.signal, afterMs },
      },
    );
    this.log.note(`pid ${run.process.pid} ended: ${exit.signal ?? `code ${exit.code}`}`);
    // Workers the engine forked may still hold GPUs: clear the group before any restart.
    this.#cleanup = (async () => {
      if (this.#deps.table.groupAlive(run.process.pgid)) {
        const gone = await this.#killGroup(run.process.pgid);
        if (!gone) this.#stuck(run.process.pgid);
      }
      this.#cleanup = undefined;
    })();
    this.#fail(error, afterMs, true);
  }

  #fail(error: LlmgwError, uptimeMs: number, restartable: boolean): void {
    if (this.#detached) return;
    this.#error = { code: error.code, message: error.message };
    this.#deps.records.remove(this.shardId);
    if (!restartable) {
      this.#transition('failed', `${error.message} (not restarted: the launch itself is wrong)`);
      return;
    }
    const decision = this.#deps.policy.decide(this.#consecutiveFailures, uptimeMs);
    this.#consecutiveFailures = decision.consecutiveFailures;
    if (!decision.restart) {
      this.#transition('failed', `${error.message} (${decision.reason})`);
      return;
    }
    this.#nextRestartAtMs = this.#deps.clock.now() + decision.delayMs;
    this.#transition('failed', `${error.message} (${decision.reason})`);
    const wait = new AbortController();
    this.#restartWait = wait;
    void (async () => {
      await this.#cleanup;
      await this.#deps.clock.sleep(Math.max(0, (this.#nextRestartAtMs ?? 0) - this.#deps.clock.now()), wait.signal);
      if (wait.signal.aborted || this.#stopWanted || this.#detached || this.#state !== 'failed') return;
      this.#nextRestartAtMs = undefined;
      this.#restarts++;
      this.#transition('starting', `restart ${this.#restarts}`);
      await this.#startLaunch();
    })();
  }

  /** SIGTERM to the group, SIGKILL after the grace period; true once no process of the group is left. */
  #killGroup(pgid: number): Promise<boolean> {
    const { table, clock, settings } = this.#deps;
    return killProcessGroup(pgid, {
      table,
      clock,
      stopGraceMs: settings.stopGraceMs,
      killWaitMs: settings.killWaitMs,
      onSigkill: () => {
        this.#deps.logger.warn(
          this.#fields({ pgid }),
          `shard ${this.shardId}: process group ${pgid} outlived SIGTERM by ${formatElapsedMs(settings.stopGraceMs)}; sending SIGKILL`,
        );
        this.log.note(`process group ${pgid} still alive after ${formatElapsedMs(settings.stopGraceMs)}: SIGKILL`);
      },
    });
  }

  #stuck(pgid: number): void {
    this.#deps.logger.error(
      this.#fields({ pgid }),
      `shard ${this.shardId}: process group ${pgid} is still alive after SIGKILL; a process stuck in the kernel (often the GPU driver) may hold a GPU until the node is rebooted`,
    );
  }

  /** Releases what the shard holds on the node once nothing of it runs. */
  #finish(): void {
    if (this.#port !== undefined) this.#deps.ports.release(this.#port, this.shardId);
    for (const p of this.#kvPorts ?? []) this.#deps.ports.release(p, this.shardId);
    this.#kvPorts = undefined;
    this.#deps.records.remove(this.shardId);
    try {
      removeEngineFiles(this.#run?.plan.files);
    } catch (err) {
      this.#deps.logger.warn(
        this.#fields({ err: String(err) }),
        `shard ${this.shardId}: cannot remove the file its engine read its key from`,
      );
    }
    this.#nextRestartAtMs = undefined;
  }

  #lastLines(): string {
    let lines: string[] = [];
    try {
      // The engine's key goes to the control plane in no error, however the engine echoed it.
      lines = this.log
        .lastRunLines(this.#deps.settings.lastLogLines)
        .map((line) => redactSecret(line, this.launch.apiKey));
    } catch {
      // No log file: nothing to quote.
    }
    return lines.length === 0
      ? 'it wrote nothing to its log'
      : `last lines:\n${lines.map((line) => `  ${line}`).join('\n')}`;
  }

  /** An engine an earlier agent started is not our child: its end is seen by asking the process table. */
  #watchAdopted(record: ShardRecord, signal: AbortSignal): Promise<ProcessExit> {
    const { clock, table, settings } = this.#deps;
    return new Promise((resolve) => {
      void (async () => {
        while (!signal.aborted) {
          await clock.sleep(settings.adoptedPollIntervalMs, signal);
          if (signal.aborted) return;
          const identity = table.identity(record.pid);
          if (!identity || identity.startToken !== record.startToken) {
            resolve({ code: null, signal: null });
            return;
          }
        }
      })();
    });
  }

  #transition(to: ShardState, reason: string): void {
    const from = this.#state;
    if (!TRANSITIONS[from].includes(to)) {
      throw new IllegalStateError(`shard ${this.shardId} cannot go from ${from} to ${to} (${reason})`, {
        shardId: this.shardId,
        from,
        to,
      });
    }
    this.#state = to;
    const fields = this.#fields({ from, to, reason, restarts: this.#restarts });
    const message = `shard ${this.shardId}: ${from} → ${to}: ${reason}`;
    if (to === 'failed') this.#deps.logger.warn(fields, message);
    else this.#deps.logger.info(fields, message);
    this.#deps.onChange(this);
  }

  #fields(extra: Record<string, unknown>): Record<string, unknown> {
    return { shardId: this.shardId, replicaId: this.launch.replicaId, engine: this.launch.profile.engine, ...extra };
  }
}

/** The planned events as the gateway reaches them: ZeroMQ ports on the host the agent advertises. */
function kvEndpoint(planned: NonNullable<EngineLaunchPlan['kvEvents']>, host: string): KvEventsEndpoint {
  if (planned.kind !== 'zmq') return planned;
  return {
    kind: 'zmq',
    endpoint: `tcp://${hostPort(host, planned.port)}`,
    ...(planned.replayPort === undefined ? {} : { replayEndpoint: `tcp://${hostPort(host, planned.replayPort)}` }),
    ...(planned.topic === undefined ? {} : { topic: planned.topic }),
  };
}

function portOf(plan: EngineLaunchPlan | null): number | undefined {
  return plan && plan.readiness.kind !== 'none' ? plan.readiness.port : undefined;
}

/** The endpoint's scheme: that of the engine's last run (between runs, the next one is planned alike); https when it serves TLS. */
function schemeOf(plan: EngineLaunchPlan | undefined): 'http' | 'https' {
  return plan?.readiness.kind === 'http' && plan.readiness.tls ? 'https' : 'http';
}

function describeReadiness(plan: EngineLaunchPlan): string {
  const r = plan.readiness;
  if (r.kind === 'http') return `GET ${r.path}`;
  if (r.kind === 'tcp') return `TCP ${hostPort(r.host, r.port)}`;
  return 'the start (this rank has no probe)';
}

function asLlmgwError(err: unknown): LlmgwError {
  if (isLlmgwError(err)) return err;
  return new LlmgwError(
    'LLMGW_ENGINE_START_FAILED',
    `cannot start the engine: ${err instanceof Error ? err.message : String(err)}`,
    { cause: err },
  );
}
