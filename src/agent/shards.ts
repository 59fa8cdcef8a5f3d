// The agent's shard runner: turns the control plane's assignments into
// running engines. For each assigned shard it first makes the weights local
// (fetch into the cache, or a file:// path used in place), then hands the
// launch to the supervisor. It is level-triggered like the protocol: every
// heartbeat answer is the whole wanted set, and shards that leave it stop.
// Kept apart from the Agent class so the heartbeat loop stays about talking
// to the control plane, and this stays about this machine.
import { parseSource, type ShardAssignment, type ShardStatus as WireShardStatus } from '../protocol/index.js';
import type { WeightCache } from './cache/index.js';
import type { ShardLaunch } from './engines/index.js';
import { displaySource, type Fetcher } from './fetch/index.js';
import type { ShardRunner } from './agent.js';
import type { Supervisor } from './supervisor/index.js';
import type { ShardTracing } from './tracing/index.js';

/**
 * Failures in a row this agent restarts an engine in place before it stops
 * telling the control plane a restart is coming: past it the replica counts
 * as failed and is placed again (perhaps elsewhere) with the control plane's
 * backoff.
 */
export const IN_PLACE_RESTARTS = 3;

export interface ShardRunnerOptions {
  fetcher: Fetcher;
  cache: WeightCache;
  supervisor: Supervisor;
  /** Address engines bind: 127.0.0.1 for a single machine, 0.0.0.0 or the fabric address for a fleet. */
  engineHost: string;
  /** A failed fetch is tried again after this long, ms. */
  fetchRetryMs?: number;
  now?: () => number;
  /** A ready shard's engine load at the last scrape, for its status; absent = load is not reported. */
  load?: (shardId: string) => WireShardStatus['load'];
  /** Called when something changed that the control plane should hear before the next heartbeat. */
  onChange?: () => void;
  /** Traces each fetch (src/agent/tracing); absent = none is traced. */
  tracing?: ShardTracing;
  logger: { info(o: object, m: string): void; warn(o: object, m: string): void };
}

/** A file:// source used where it lies: its path on this node and the source as written. */
export interface InPlaceWeights {
  readonly path: string;
  readonly source: string;
}

type WeightsState =
  | { state: 'fetching'; startedMs: number }
  | { state: 'ready'; path: string }
  | { state: 'failed'; error: string; retryAtMs: number };

export class AgentShardRunner implements ShardRunner {
  private wanted: readonly ShardAssignment[] = [];
  /** Per source (the raw string): whether its weights are on disk. Shared by every shard of that source. */
  private readonly weights = new Map<string, WeightsState>();
  private readonly now: () => number;

  constructor(private readonly options: ShardRunnerOptions) {
    this.now = options.now ?? Date.now;
  }

  /**
   * The file:// weights wanted shards use in place, by path with the source
   * as the catalog wrote it: on this disk though perhaps in no cache or
   * model directory the probe lists, so the weights report names them and
   * placement knows this node holds them.
   */
  inPlace(): InPlaceWeights[] {
    const out = new Map<string, InPlaceWeights>();
    for (const shard of this.wanted) {
      const w = this.weights.get(shard.source);
      if (w?.state !== 'ready' || out.has(w.path)) continue;
      const parsed = parseSource(shard.source, { allowHttp: true });
      if (typeof parsed !== 'string' && parsed.scheme === 'file')
        out.set(w.path, { path: w.path, source: shard.source });
    }
    return [...out.values()];
  }

  async desired(shards: readonly ShardAssignment[]): Promise<void> {
    this.wanted = shards;
    for (const shard of shards) this.ensureWeights(shard.source);
    await this.converge();
  }

  /** Starts what has its weights, stops what is no longer wanted. Never throws: a bad launch is the shard's error. */
  private async converge(): Promise<void> {
    const launches: ShardLaunch[] = [];
    // Wanted, weights not (yet) on disk: an engine already running it is kept, not stopped while they are checked.
    const pending: string[] = [];
    for (const shard of this.wanted) {
      const w = this.weights.get(shard.source);
      if (w?.state !== 'ready') {
        pending.push(shard.shard_id);
        continue;
      }
      launches.push(toLaunch(shard, w.path, this.options.engineHost));
    }
    try {
      await this.options.supervisor.desired(launches, { pending });
    } catch (err) {
      this.options.logger.warn({ err: (err as Error).message }, 'supervisor refused the wanted shards');
    }
  }

  /** Starts fetching a source unless it is on disk, on its way, or failed too recently. file:// is used in place. */
  private ensureWeights(source: string): void {
    const current = this.weights.get(source);
    if (current && (current.state !== 'failed' || this.now() < current.retryAtMs)) return;
    this.weights.set(source, { state: 'fetching', startedMs: this.now() });
    const traced = this.options.tracing?.fetchStarted(logSource(source));
    this.options.fetcher
      .fetch(source)
      .then(async (result) => {
        traced?.();
        this.weights.set(source, { state: 'ready', path: result.path });
        if (result.manifest) {
          const name = this.options.cache.nameFor(source);
          await this.options.cache.markUsed(name).catch(() => {});
        }
        this.options.logger.info({ source: logSource(source), path: result.path }, 'weights ready');
        await this.converge();
        this.options.onChange?.();
      })
      .catch((err: unknown) => {
        const error = err instanceof Error ? err.message : String(err);
        traced?.(error);
        this.weights.set(source, {
          state: 'failed',
          error,
          retryAtMs: this.now() + (this.options.fetchRetryMs ?? 30_000),
        });
        this.options.logger.warn({ source: logSource(source), err: error }, 'fetch failed');
        this.options.onChange?.();
      });
  }

  /** What the heartbeat reports: fetch progress for shards still waiting on weights, the supervisor's word for the rest. */
  status(): WireShardStatus[] {
    const running = new Map(this.options.supervisor.status().map((s) => [s.shardId, s]));
    const downloads = new Map(this.options.fetcher.downloads().map((d) => [d.cacheName, d]));
    const out: WireShardStatus[] = [];
    for (const shard of this.wanted) {
      const s = running.get(shard.shard_id);
      if (s) {
        const load = s.state === 'ready' ? this.options.load?.(s.shardId) : undefined;
        out.push({
          shard_id: s.shardId,
          replica_id: s.replicaId,
          state: s.state,
          ...(s.endpoint ? { endpoint: s.endpoint } : {}),
          ...(s.kvEvents ? { kv_events: s.kvEvents } : {}),
          ...(s.error ? { error: s.error.message } : {}),
          restarts: s.restarts,
          ...(load === undefined ? {} : { load }),
          // A crash or hang the supervisor restarts in place, until it looks like a crash loop: then the control plane places the replica again.
          ...(s.state === 'failed' && s.nextRestartAt !== undefined && s.failuresInARow <= IN_PLACE_RESTARTS
            ? { restarting: true }
            : {}),
        });
        continue;
      }
      const w = this.weights.get(shard.source);
      if (w?.state === 'failed') {
        out.push({ shard_id: shard.shard_id, replica_id: shard.replica_id, state: 'failed', error: w.error });
        continue;
      }
      let fetch: WireShardStatus['fetch'];
      try {
        const progress = downloads.get(this.options.cache.nameFor(shard.source))?.progress;
        if (progress) {
          fetch = {
            bytes_done: progress.bytesDone,
            ...(progress.totalBytes !== undefined ? { total_bytes: progress.totalBytes } : {}),
            ...(progress.bytesPerSecond !== undefined ? { bytes_per_second: progress.bytesPerSecond } : {}),
          };
        }
      } catch {
        // file:// sources have no cache name and no download.
      }
      out.push({
        shard_id: shard.shard_id,
        replica_id: shard.replica_id,
        state: 'fetching',
        ...(fetch ? { fetch } : {}),
      });
    }
    // Engines told to stop that have not exited yet still hold their GPUs' memory: reported as stopping until they are
    // gone, or the control plane would count the GPUs free and place another engine on them meanwhile.
    const wantedIds = new Set(this.wanted.map((w) => w.shard_id));
    for (const s of running.values()) {
      if (wantedIds.has(s.shardId) || s.state === 'stopped') continue;
      out.push({ shard_id: s.shardId, replica_id: s.replicaId, state: 'stopping', restarts: s.restarts });
    }
    return out;
  }

  /** Cache names of weights a wanted shard uses or is fetching: what collect must never remove. */
  inUse(name: string): string | null {
    for (const shard of this.wanted) {
      try {
        if (this.options.cache.nameFor(shard.source) === name) return `in use by replica ${shard.replica_id}`;
      } catch {
        // file:// has no cache name.
      }
    }
    return null;
  }
}

function toLaunch(shard: ShardAssignment, weightsPath: string, host: string): ShardLaunch {
  return {
    replicaId: shard.replica_id,
    shardId: shard.shard_id,
    model: { name: shard.model, aliases: shard.aliases },
    profile: {
      name: shard.profile.name,
      engine: shard.profile.engine,
      gpus: shard.profile.gpus,
      shards: shard.profile.shards,
      args: shard.profile.args,
      env: shard.profile.env,
    },
    weightsPath,
    gpuIndices: shard.gpu_indices,
    host,
    port: 0,
    rank: shard.rank,
    peers: shard.peers.filter((p) => p.address).map((p) => ({ rank: p.rank, address: p.address! })),
    ...(shard.engine_secret === undefined ? {} : { apiKey: shard.engine_secret }),
  };
}

/** A source fit for a log line: signed query strings and credentials left out. */
function logSource(source: string): string {
  const parsed = parseSource(source, { allowHttp: true });
  return typeof parsed === 'string' ? '(unparsable source)' : displaySource(parsed);
}
