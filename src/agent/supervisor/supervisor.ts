// The supervisor: the set of shards this node runs, converged on the set the
// control plane wants (level-triggered: start what is missing, stop what is
// no longer wanted, replace what changed, leave the rest alone), plus what
// outlives one agent: records of running engines, adopted by the next agent
// after checking each is still the process it started. Two ways to end:
// stop() makes every engine exit; detach() leaves them serving for the next
// agent.
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readdir, stat, unlink } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { IllegalStateError, LlmgwError, isLlmgwError } from '../../errors/index.js';
import { nearestName } from '../../units/index.js';
import { AGENT_DEFAULTS } from '../defaults/index.js';
import {
  adapterFor as defaultAdapterFor,
  engineBaseEnv,
  type EngineAdapter,
  type EngineName,
  type ShardLaunch,
} from '../engines/index.js';
import { systemClock, type SupervisorClock } from './clock.js';
import { PortAllocator, bindTest } from './port-allocator.js';
import { formatElapsedMs } from './elapsed.js';
import { cmdlineMatches, killProcessGroup, linuxProcessTable, type ProcessTable } from './process-table.js';
import { networkReadinessProber, type ReadinessProber } from './readiness.js';
import { RestartPolicy, type RestartPolicyOptions } from './restart-policy.js';
import {
  SHARD_ID_MARK,
  SHARD_PORT_MARK,
  STATE_DIR_MARK,
  Shard,
  type ShardLogger,
  type ShardSettings,
  type ShardStatus,
} from './shard.js';
import { ShardLog, redactSecret } from './shard-log.js';
import { SHARD_RECORD_VERSION, ShardRecords, fileNameFor, type ShardRecord } from './shard-records.js';
import { nodeSpawner, type Spawner } from './spawner.js';

export interface SupervisorOptions {
  /** One log file per shard is kept here (`<shard>.log`, rotated to `.1`). Created if absent. */
  logsDir: string;
  /** Records of running engines, for adoption by the next agent, live under `<stateDir>/shards`. Created if absent. */
  stateDir: string;
  /** Every transition is logged here, with its reason. */
  logger: ShardLogger;
  /** The adapter for an engine name. Absent: the engines module's adapterFor with no options (sim and builtin then fail: they need llmgwBin). */
  adapterFor?: (engine: string) => EngineAdapter;
  /** Absent: real processes (child_process.spawn in a new session). */
  spawner?: Spawner;
  /** Absent: this Linux machine's /proc. */
  processTable?: ProcessTable;
  /** Absent: HTTP and TCP over the network. */
  prober?: ReadinessProber;
  /** Absent: the system clock and real timers. */
  clock?: SupervisorClock;
  /** Engine ports come from firstPort..lastPort, inclusive. Absent: AGENT_DEFAULTS' (20000-20999). */
  firstPort?: number;
  lastPort?: number;
  /** Whether a port is free on a host. Absent: bind it and let go. */
  isPortFree?: (host: string, port: number) => Promise<boolean>;
  /**
   * Start timeouts per engine, overriding the adapters' defaults (sim and
   * builtin 60 s, llamacpp 5 min, vllm and sglang 15 min). A launch's own
   * startTimeoutMs wins over both.
   */
  startTimeoutMs?: Partial<Record<EngineName, number>>;
  /** After SIGTERM, how long the group may take to exit before SIGKILL. Absent: 10000. 0: SIGKILL at once. */
  stopGraceMs?: number;
  /** After SIGKILL, how long to wait for the group to be gone before reporting it stuck. Absent: 5000. */
  killWaitMs?: number;
  restartPolicy?: RestartPolicyOptions;
  /** First wait between readiness probes; each wait is 1.5 times the last, up to readinessPollMaxMs. Absent: 100 and 2000. */
  readinessPollInitialMs?: number;
  readinessPollMaxMs?: number;
  /** One probe's timeout; the last probe may end this much past the start timeout. Absent: 2000. */
  probeTimeoutMs?: number;
  /** How often an adopted engine (not this agent's child, so no exit event) is checked to be alive. Absent: 1000. */
  adoptedPollIntervalMs?: number;
  /** How often a ready engine is probed again to catch a hang. Absent: AGENT_DEFAULTS' (10 s). 0: never. */
  livenessIntervalMs?: number;
  /** Failed liveness probes in a row after which a ready engine is stopped and restarted. Absent: AGENT_DEFAULTS' (3). */
  livenessFailures?: number;
  /** A shard's log is rotated above this size. Absent: 10 MiB. */
  logFileMaxBytes?: number;
  /** Log files kept per shard, the live one included. Absent: 2 (so at most about 2 × logFileMaxBytes). */
  logFilesKept?: number;
  /** How often logs are checked for rotation and retention. Absent: 10000. */
  logCheckIntervalMs?: number;
  /**
   * The log of a shard this supervisor no longer runs is kept for a post-mortem
   * this long after its last write, then removed, so a node that runs
   * thousands of replicas over months does not fill its disk with logs.
   * Absent: 7 days. 0: kept forever.
   */
  stoppedLogRetentionMs?: number;
  /** Engine log lines quoted in a failure. Absent: 8. */
  lastLogLines?: number;
  /**
   * The environment engines start from, its plan's variables merged over;
   * only the names engineBaseEnv allows are kept. Absent: this process's environment.
   */
  baseEnv?: Readonly<Record<string, string | undefined>>;
  /** The host put in endpoints, as the control plane reaches this node. Absent: the bind host (loopback for a wildcard bind). */
  advertiseHost?: string;
  /** Called with a shard's status after every change (for a prompt heartbeat). Absent: nobody is told. */
  onChange?: (status: ShardStatus) => void;
}

export interface CompiledSupervisorOptions {
  readonly logsDir: string;
  readonly stateDir: string;
  readonly logger: ShardLogger;
  readonly adapterFor: (engine: string) => EngineAdapter;
  readonly spawner: Spawner;
  readonly processTable: ProcessTable;
  readonly prober: ReadinessProber;
  readonly clock: SupervisorClock;
  readonly firstPort: number;
  readonly lastPort: number;
  readonly isPortFree: (host: string, port: number) => Promise<boolean>;
  readonly startTimeoutMs: Readonly<Partial<Record<EngineName, number>>>;
  readonly restartPolicy: RestartPolicy;
  readonly logFileMaxBytes: number;
  readonly logFilesKept: number;
  readonly logCheckIntervalMs: number;
  /** 0 = kept forever. */
  readonly stoppedLogRetentionMs: number;
  readonly shard: ShardSettings;
  readonly onChange: ((status: ShardStatus) => void) | undefined;
}

const OPTION_KEYS = [
  'logsDir',
  'stateDir',
  'logger',
  'adapterFor',
  'spawner',
  'processTable',
  'prober',
  'clock',
  'firstPort',
  'lastPort',
  'isPortFree',
  'startTimeoutMs',
  'stopGraceMs',
  'killWaitMs',
  'restartPolicy',
  'readinessPollInitialMs',
  'readinessPollMaxMs',
  'probeTimeoutMs',
  'adoptedPollIntervalMs',
  'livenessIntervalMs',
  'livenessFailures',
  'logFileMaxBytes',
  'logFilesKept',
  'logCheckIntervalMs',
  'stoppedLogRetentionMs',
  'lastLogLines',
  'baseEnv',
  'advertiseHost',
  'onChange',
] as const;

export function compileSupervisorOptions(options: SupervisorOptions): CompiledSupervisorOptions {
  const problems: string[] = [];
  for (const key of Object.keys(options)) {
    if ((OPTION_KEYS as readonly string[]).includes(key)) continue;
    const near = nearestName(key, OPTION_KEYS);
    problems.push(`supervisor option "${key}" is unknown${near ? `; did you mean "${near}"?` : ''}`);
  }
  for (const key of ['logsDir', 'stateDir'] as const) {
    if (typeof options[key] !== 'string' || options[key].trim() === '')
      problems.push(`supervisor option ${key} must name a directory`);
  }
  if (typeof options.logger !== 'object' || options.logger === null)
    problems.push('supervisor option logger is required: every transition is logged');
  const ms = (key: string, value: number | undefined, fallback: number, min = 0): number => {
    const n = value ?? fallback;
    if (!Number.isFinite(n) || n < min) {
      problems.push(
        `supervisor option ${key} must be a number of milliseconds, ${min} or more; got ${JSON.stringify(value)}`,
      );
      return fallback;
    }
    return n;
  };
  const count = (key: string, value: number | undefined, fallback: number, min: number): number => {
    const n = value ?? fallback;
    if (!Number.isInteger(n) || n < min) {
      problems.push(`supervisor option ${key} must be a whole number, ${min} or more; got ${JSON.stringify(value)}`);
      return fallback;
    }
    return n;
  };
  const startTimeoutMs: Partial<Record<EngineName, number>> = {};
  for (const [engine, value] of Object.entries(options.startTimeoutMs ?? {})) {
    startTimeoutMs[engine as EngineName] = ms(`startTimeoutMs.${engine}`, value, 60_000, 1);
  }
  // Only what the allowlist names: the agent's own secrets (join token, HF token) must never reach model code.
  const baseEnv = engineBaseEnv(options.baseEnv ?? process.env);
  // Which agent started an engine, readable from the engine's own environment (see adopt()).
  if (typeof options.stateDir === 'string') baseEnv[STATE_DIR_MARK] = resolve(options.stateDir);

  let restartPolicy: RestartPolicy | undefined;
  try {
    restartPolicy = new RestartPolicy(options.restartPolicy);
  } catch (err) {
    problems.push(err instanceof Error ? err.message : String(err));
  }
  const compiled: CompiledSupervisorOptions = {
    logsDir: options.logsDir,
    stateDir: options.stateDir,
    logger: options.logger,
    adapterFor: options.adapterFor ?? ((engine) => defaultAdapterFor(engine)),
    spawner: options.spawner ?? nodeSpawner(),
    processTable: options.processTable ?? linuxProcessTable(),
    prober: options.prober ?? networkReadinessProber(),
    clock: options.clock ?? systemClock(),
    firstPort: count('firstPort', options.firstPort, AGENT_DEFAULTS.firstPort, 1),
    lastPort: count('lastPort', options.lastPort, AGENT_DEFAULTS.lastPort, 1),
    isPortFree: options.isPortFree ?? bindTest,
    startTimeoutMs,
    restartPolicy: restartPolicy ?? new RestartPolicy(),
    logFileMaxBytes: count('logFileMaxBytes', options.logFileMaxBytes, 10 * 1024 * 1024, 1024),
    logFilesKept: count('logFilesKept', options.logFilesKept, 2, 1),
    logCheckIntervalMs: ms('logCheckIntervalMs', options.logCheckIntervalMs, 10_000, 1),
    stoppedLogRetentionMs: ms('stoppedLogRetentionMs', options.stoppedLogRetentionMs, 7 * 24 * 3_600_000),
    shard: {
      stopGraceMs: ms('stopGraceMs', options.stopGraceMs, 10_000),
      killWaitMs: ms('killWaitMs', options.killWaitMs, 5_000),
      readinessPollInitialMs: ms('readinessPollInitialMs', options.readinessPollInitialMs, 100, 1),
      readinessPollMaxMs: ms('readinessPollMaxMs', options.readinessPollMaxMs, 2_000, 1),
      probeTimeoutMs: ms('probeTimeoutMs', options.probeTimeoutMs, 2_000, 1),
      adoptedPollIntervalMs: ms('adoptedPollIntervalMs', options.adoptedPollIntervalMs, 1_000, 1),
      livenessIntervalMs: ms('livenessIntervalMs', options.livenessIntervalMs, AGENT_DEFAULTS.livenessIntervalMs),
      livenessFailures: count('livenessFailures', options.livenessFailures, AGENT_DEFAULTS.livenessFailures, 1),
      lastLogLines: count('lastLogLines', options.lastLogLines, 8, 0),
      baseEnv,
      advertiseHost: options.advertiseHost,
    },
    onChange: options.onChange,
  };
  if (problems.length > 0) throw new LlmgwError('LLMGW_CONFIG_INVALID', problems.join('; '));
  return compiled;
}

/** What adopt() found in the state directory. */
export interface AdoptionReport {
  /** Engines that were still running as recorded: now supervised, not restarted. */
  readonly adopted: readonly ShardStatus[];
  /** Records removed, and why; their processes, where alive, were left alone. */
  readonly discarded: readonly {
    readonly shardId: string | null;
    readonly pid: number | null;
    readonly reason: string;
  }[];
  /**
   * Engines this state directory's agent started whose records are gone (the
   * directory was deleted or restored from elsewhere), found by the marks in
   * their environment. Each is adopted if its shard is still wanted with the
   * same launch, and stopped otherwise, before anything is started in its
   * place: it may hold GPUs.
   */
  readonly unrecorded: readonly { readonly shardId: string; readonly pid: number }[];
}

/** An engine found by its marks, with no record. */
interface Unrecorded {
  readonly shardId: string;
  readonly pid: number;
  readonly pgid: number;
  readonly startToken: string;
  readonly cmdline: readonly string[];
  readonly port: number | null;
}

/** 'open' until stop() or detach(); then nothing more is started, and misuse is an IllegalStateError. */
type SupervisorPhase = 'open' | 'stopping' | 'detached' | 'stopped';

export class Supervisor {
  readonly options: CompiledSupervisorOptions;
  readonly #ports: PortAllocator;
  readonly #records: ShardRecords;
  readonly #shards = new Map<string, Shard>();
  #wanted = new Map<string, { launch: ShardLaunch; specHash: string }>();
  /** Shard ids wanted but not launchable yet (see desired()): kept if running, not started. */
  #pending = new Set<string>();
  #phase: SupervisorPhase = 'open';
  /** adopt() may run once, and only before the first desired(): afterwards a record could describe an engine we started ourselves. */
  #adoptable = true;
  /** Engines found by their marks without a record, by shard id, until a desired() that lists each (or drops it) decides. */
  readonly #unrecorded = new Map<string, Unrecorded>();
  readonly #maintenance = new AbortController();

  /** Builds a supervisor over compiled options; create() is the usual way in, as it also makes the directories. */
  constructor(options: CompiledSupervisorOptions) {
    this.options = options;
    this.#ports = new PortAllocator({
      firstPort: options.firstPort,
      lastPort: options.lastPort,
      isFree: options.isPortFree,
    });
    this.#records = new ShardRecords(options.stateDir);
  }

  static async create(options: SupervisorOptions): Promise<Supervisor> {
    const compiled = compileSupervisorOptions(options);
    await mkdir(compiled.logsDir, { recursive: true, mode: 0o750 });
    await mkdir(compiled.stateDir, { recursive: true, mode: 0o700 });
    const supervisor = new Supervisor(compiled);
    supervisor.#records.ensureDir();
    void supervisor.#rotateLogsForever();
    return supervisor;
  }

  /**
   * Takes over the engines an earlier agent left running: each record whose
   * pid is alive with the recorded start token and command line becomes a
   * supervised shard (probed again, not restarted). Records of processes that
   * are gone, or whose pid now belongs to another process, are removed, and
   * such a process is never signalled. Call once, before the first desired().
   */
  adopt(): AdoptionReport {
    this.#assertOpen('adopt');
    if (!this.#adoptable)
      throw new IllegalStateError(
        "adopt() runs once, before the first desired(): later, a record could be one of this agent's own engines",
      );
    this.#adoptable = false;
    const adopted: ShardStatus[] = [];
    const discarded: { shardId: string | null; pid: number | null; reason: string }[] = [];
    const { logger } = this.options;
    for (const entry of this.#records.list()) {
      if ('problem' in entry) {
        discarded.push({ shardId: null, pid: null, reason: `${entry.file}: ${entry.problem}` });
        this.#records.removeFile(entry.file);
        continue;
      }
      const { record } = entry;
      const reason = this.#adoptionProblem(record);
      if (reason !== null) {
        discarded.push({ shardId: record.shardId, pid: record.pid, reason });
        logger.warn(
          { shardId: record.shardId, pid: record.pid, reason },
          `shard ${record.shardId}: not adopted: ${reason}`,
        );
        this.#records.removeFile(entry.file);
        continue;
      }
      const shard = this.#newShard(record.launch, record.specHash);
      this.#shards.set(record.shardId, shard);
      shard.adopt(record);
      adopted.push(shard.status());
    }
    const unrecorded = this.#findUnrecorded(new Set(adopted.map((s) => s.pid)));
    return { adopted, discarded, unrecorded: unrecorded.map((u) => ({ shardId: u.shardId, pid: u.pid })) };
  }

  /**
   * Engines marked as started from this state directory that no record
   * describes. Without this, an agent whose state directory was lost would
   * start every wanted shard a second time beside the engine still running
   * it: two engines on one GPU, the second failing out of memory, or both
   * serving at half speed.
   */
  #findUnrecorded(known: ReadonlySet<number | undefined>): Unrecorded[] {
    const { processTable, logger } = this.options;
    const ours = this.options.shard.baseEnv[STATE_DIR_MARK];
    const found: Unrecorded[] = [];
    for (const p of processTable.marked?.(STATE_DIR_MARK) ?? []) {
      const shardId = p.env[SHARD_ID_MARK];
      if (p.env[STATE_DIR_MARK] !== ours || shardId === undefined || known.has(p.pid) || p.pid === process.pid)
        continue;
      const identity = processTable.identity(p.pid);
      if (!identity || this.#shards.has(shardId) || this.#unrecorded.has(shardId)) continue;
      const port = Number(p.env[SHARD_PORT_MARK]);
      const u: Unrecorded = {
        shardId,
        pid: p.pid,
        pgid: p.pgid,
        startToken: identity.startToken,
        cmdline: identity.cmdline,
        port: Number.isInteger(port) && port > 0 ? port : null,
      };
      this.#unrecorded.set(shardId, u);
      found.push(u);
      logger.warn(
        { shardId, pid: p.pid },
        `shard ${shardId}: found engine pid ${p.pid} started from this state directory with no record of it (was the directory deleted?); it is adopted if the control plane still wants it, and stopped otherwise`,
      );
    }
    return found;
  }

  /** A record for an unrecorded engine, if it runs exactly what `launch` would start (same adapter plan at its port). */
  #recordFor(u: Unrecorded, launch: ShardLaunch, specHash: string): ShardRecord | null {
    let plan;
    try {
      plan = this.options
        .adapterFor(launch.profile.engine)
        .plan(u.port === null ? launch : { ...launch, port: u.port });
    } catch {
      return null;
    }
    if (!cmdlineMatches(plan.argv, u.cmdline)) return null;
    return {
      version: SHARD_RECORD_VERSION,
      shardId: u.shardId,
      pid: u.pid,
      pgid: u.pgid,
      startToken: u.startToken,
      port: u.port,
      argv: plan.argv,
      startedAt: new Date(this.options.clock.now()).toISOString(),
      specHash,
      // Unknown: the count went with the record.
      restarts: 0,
      launch,
      plan,
    };
  }

  /** Ends an unrecorded engine's group (SIGTERM, SIGKILL after the grace period) and resolves once it is gone or stuck. */
  async #stopUnrecorded(u: Unrecorded, reason: string): Promise<void> {
    const { processTable: table, clock, logger } = this.options;
    const { stopGraceMs, killWaitMs } = this.options.shard;
    const identity = table.identity(u.pid);
    // Only the very process that was found: a pid reused since is someone else's.
    if (!identity || identity.startToken !== u.startToken) return;
    logger.warn(
      { shardId: u.shardId, pid: u.pid, reason },
      `shard ${u.shardId}: stopping unrecorded engine pid ${u.pid}: ${reason}`,
    );
    if (!(await killProcessGroup(u.pgid, { table, clock, stopGraceMs, killWaitMs }))) {
      logger.error(
        { shardId: u.shardId, pgid: u.pgid },
        `shard ${u.shardId}: process group ${u.pgid} is still alive after SIGKILL; it may hold a GPU until the node is rebooted`,
      );
    }
  }

  #adoptionProblem(record: ShardRecord): string | null {
    if (this.#shards.has(record.shardId)) return 'a second record for the same shard';
    const identity = this.options.processTable.identity(record.pid);
    if (!identity) return `pid ${record.pid} is no longer running`;
    if (identity.startToken !== record.startToken) {
      return `pid ${record.pid} is alive but started at another time (start token ${identity.startToken}, recorded ${record.startToken}): the pid was reused by another process, which is left alone`;
    }
    if (!cmdlineMatches(record.argv, identity.cmdline)) {
      return `pid ${record.pid} is alive but runs another command line (${identity.cmdline.join(' ').slice(0, 200)}), which is left alone`;
    }
    return null;
  }

  /**
   * Converges on `shards`: starts those not running, stops those no longer
   * listed, and replaces one whose launch changed (same shardId, another
   * argv or env). Resolves once every start of this pass has spawned its
   * engine or failed, not when engines are ready: watch status().
   *
   * `pending` names shards that are wanted but cannot be launched yet (their
   * weights are still being checked or fetched): one already running, or
   * found running by adopt(), is left alone rather than stopped for not
   * being listed. Without it, an agent that restarts would stop every engine
   * it had just adopted on its first heartbeat, while it re-checks weights.
   */
  desired(shards: readonly ShardLaunch[], options: { readonly pending?: readonly string[] } = {}): Promise<void> {
    this.#assertOpen('desired');
    this.#pending = new Set(options.pending ?? []);
    this.#adoptable = false;
    const wanted = new Map<string, { launch: ShardLaunch; specHash: string }>();
    for (const launch of shards) {
      if (wanted.has(launch.shardId)) {
        throw new LlmgwError(
          'LLMGW_BAD_REQUEST',
          `shard ${launch.shardId} is listed twice in the wanted set; each shard id must be unique`,
          { context: { shardId: launch.shardId } },
        );
      }
      wanted.set(launch.shardId, { launch, specHash: this.#specHash(launch) });
    }
    this.#wanted = wanted;
    return this.#converge();
  }

  /** Every shard this supervisor holds, by shard id. Stopped shards are gone from it. */
  status(): ShardStatus[] {
    return [...this.#shards.values()].map((shard) => shard.status()).sort((a, b) => a.shardId.localeCompare(b.shardId));
  }

  /**
   * Ready engines that serve the API, where to read their metrics, and the
   * key their /metrics may ask (llama.cpp guards it with --api-key): what
   * the load scraper (src/agent/load) reads each second.
   */
  metricsTargets(): { shardId: string; replicaId: string; engine: string; endpoint: string; apiKey?: string }[] {
    const out: { shardId: string; replicaId: string; engine: string; endpoint: string; apiKey?: string }[] = [];
    for (const shard of this.#shards.values()) {
      const s = shard.status();
      if (s.state !== 'ready' || s.endpoint === undefined) continue;
      out.push({
        shardId: s.shardId,
        replicaId: s.replicaId,
        engine: s.engine,
        endpoint: s.endpoint,
        ...(shard.launch.apiKey === undefined ? {} : { apiKey: shard.launch.apiKey }),
      });
    }
    return out;
  }

  /** The last `lines` lines of a shard's log, its rotated file included; also after the shard stopped. Throws LLMGW_NOT_FOUND when it has no log. */
  tailLog(shardId: string, lines: number): string[] {
    const count = Math.max(0, Math.min(10_000, Math.floor(lines)));
    const shard = this.#shards.get(shardId);
    const log = shard?.log ?? this.#logFor(shardId);
    if (!existsSync(log.path)) {
      throw new LlmgwError('LLMGW_NOT_FOUND', `shard ${shardId} has no log on this node`, { context: { shardId } });
    }
    // Engines echo their --api-key at start; the key of a shard still held here is cut from what ctl logs shows.
    const secret = shard?.launch.apiKey;
    return log.tail(count).map((line) => redactSecret(line, secret));
  }

  /** Every engine exits (SIGTERM, then SIGKILL after the grace period) and supervision ends. Resolves when none is left. */
  async stop(): Promise<void> {
    if (this.#phase === 'stopping' || this.#phase === 'stopped') return;
    this.#assertOpen('stop');
    this.#phase = 'stopping';
    this.#maintenance.abort();
    this.#wanted = new Map();
    await Promise.all([...this.#shards.values()].map((shard) => shard.stop('the supervisor is stopping')));
    this.#phase = 'stopped';
  }

  /**
   * Supervision ends and every engine keeps running, its record kept for the
   * next agent's adopt(): for an agent that exits or upgrades while its
   * engines serve.
   */
  detach(): void {
    this.#assertOpen('detach');
    this.#phase = 'detached';
    this.#maintenance.abort();
    for (const shard of this.#shards.values()) shard.detach();
    this.options.logger.info(
      { shards: this.#shards.size },
      `supervisor detached: ${this.#shards.size} engine(s) keep running for the next agent`,
    );
  }

  async #converge(): Promise<void> {
    if (this.#phase !== 'open') return;
    for (const [id, shard] of this.#shards) {
      const want = this.#wanted.get(id);
      if (shard.state === 'stopping' || shard.state === 'stopped') continue;
      if (!want) {
        if (!this.#pending.has(id)) void shard.stop('no longer wanted');
      } else if (want.specHash !== shard.specHash)
        void shard.stop('its launch changed; it starts again with the new one');
    }
    // Unrecorded engines are decided once, by the first wanted set that lists their launch or drops them: adopted when they run the wanted launch, stopped before anything replaces them otherwise.
    for (const u of [...this.#unrecorded.values()]) {
      const want = this.#wanted.get(u.shardId);
      // Still wanted, its launch not known yet: decided by a later pass.
      if (!want && this.#pending.has(u.shardId)) continue;
      this.#unrecorded.delete(u.shardId);
      const record = want && !this.#shards.has(u.shardId) ? this.#recordFor(u, want.launch, want.specHash) : null;
      if (want && record) {
        const shard = this.#newShard(want.launch, want.specHash);
        this.#shards.set(u.shardId, shard);
        shard.adopt(record);
        this.#records.write(record);
        this.options.logger.info(
          { shardId: u.shardId, pid: u.pid },
          `shard ${u.shardId}: adopted unrecorded engine pid ${u.pid}; its record is written again`,
        );
      } else {
        await this.#stopUnrecorded(
          u,
          want ? 'it runs another launch than the one wanted' : 'the control plane no longer wants it',
        );
        if (this.#phase !== 'open') return;
      }
    }
    const starts: Promise<void>[] = [];
    for (const [id, want] of this.#wanted) {
      if (this.#shards.has(id)) continue; // Running as wanted, or on its way out; its replacement follows the stop.
      const shard = this.#newShard(want.launch, want.specHash);
      this.#shards.set(id, shard);
      starts.push(shard.start());
    }
    await Promise.all(starts);
  }

  #newShard(launch: ShardLaunch, specHash: string): Shard {
    let adapter: EngineAdapter | null = null;
    let setupError: LlmgwError | undefined;
    try {
      adapter = this.options.adapterFor(launch.profile.engine);
    } catch (err) {
      setupError = isLlmgwError(err) ? err : new LlmgwError('LLMGW_ENGINE_UNKNOWN', String(err));
    }
    const startTimeoutMs =
      launch.startTimeoutMs ??
      (this.options.startTimeoutMs as Record<string, number | undefined>)[launch.profile.engine] ??
      adapter?.defaultStartTimeoutMs ??
      60_000;
    return new Shard(
      {
        launch,
        adapter,
        ...(setupError ? { setupError } : {}),
        specHash,
        startTimeoutMs,
        log: this.#logFor(launch.shardId),
      },
      {
        clock: this.options.clock,
        spawner: this.options.spawner,
        table: this.options.processTable,
        prober: this.options.prober,
        logger: this.options.logger,
        policy: this.options.restartPolicy,
        ports: this.#ports,
        records: this.#records,
        settings: this.options.shard,
        onChange: (shard) => this.options.onChange?.(shard.status()),
        onStopped: (shard) => {
          if (this.#shards.get(shard.shardId) === shard) this.#shards.delete(shard.shardId);
          // A replacement (changed launch) or a shard wanted again starts now that the old one is gone.
          void this.#converge();
        },
      },
    );
  }

  #logFor(shardId: string): ShardLog {
    return new ShardLog(join(this.options.logsDir, `${fileNameFor(shardId)}.log`), {
      maxBytes: this.options.logFileMaxBytes,
      filesKept: this.options.logFilesKept,
    });
  }

  /**
   * What identifies a launch: the argv and environment its adapter builds,
   * with the port as asked (0 = any), so an engine keeps running across
   * agent restarts until what it would be started with really changes.
   */
  #specHash(launch: ShardLaunch): string {
    let basis: unknown;
    try {
      const plan = this.options.adapterFor(launch.profile.engine).plan(launch);
      basis = {
        engine: launch.profile.engine,
        argv: plan.argv,
        env: Object.entries(plan.env).sort(([a], [b]) => a.localeCompare(b)),
        // Only when there are any, so the hash of an engine that reads no file stays what it was.
        ...(plan.files?.length ? { files: plan.files } : {}),
      };
    } catch {
      // A launch that cannot be planned fails when started; hash what it asked for.
      basis = { unplannable: launch };
    }
    return createHash('sha256').update(JSON.stringify(basis)).digest('hex');
  }

  async #rotateLogsForever(): Promise<void> {
    const signal = this.#maintenance.signal;
    while (!signal.aborted) {
      await this.options.clock.sleep(this.options.logCheckIntervalMs, signal);
      if (signal.aborted) return;
      for (const shard of this.#shards.values()) {
        try {
          if (await shard.log.rotateIfNeeded())
            this.options.logger.info({ shardId: shard.shardId }, `shard ${shard.shardId}: log rotated`);
        } catch (err) {
          this.options.logger.warn(
            { shardId: shard.shardId, err: String(err) },
            `shard ${shard.shardId}: cannot rotate its log`,
          );
        }
      }
      await this.#removeOldLogs();
    }
  }

  /** Removes logs of shards no longer held here once they are older than the retention. */
  async #removeOldLogs(): Promise<void> {
    const retentionMs = this.options.stoppedLogRetentionMs;
    if (retentionMs === 0) return;
    const held = new Set([...this.#shards.keys()].map((id) => fileNameFor(id)));
    let names: string[];
    try {
      names = await readdir(this.options.logsDir);
    } catch {
      return;
    }
    for (const name of names) {
      const base = /^(.+)\.log(?:\.\d+)?$/.exec(name)?.[1];
      if (base === undefined || held.has(base)) continue;
      const path = join(this.options.logsDir, name);
      try {
        if (this.options.clock.now() - (await stat(path)).mtimeMs < retentionMs) continue;
        await unlink(path);
        this.options.logger.info(
          { file: path },
          `removed ${name}: its shard has not run here for ${formatElapsedMs(retentionMs)}`,
        );
      } catch {
        // Gone already, or not ours to remove: the next pass looks again.
      }
    }
  }

  #assertOpen(verb: string): void {
    if (this.#phase !== 'open')
      throw new IllegalStateError(
        `${verb}() after the supervisor was ${this.#phase === 'detached' ? 'detached' : 'stopped'}`,
        { phase: this.#phase },
      );
  }
}
