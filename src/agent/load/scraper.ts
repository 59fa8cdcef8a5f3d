// The agent's load scraper: each ready engine's /metrics, read every
// interval, reduced to the few numbers the router chooses by (parse.ts),
// and held for the heartbeat to carry. Its own part because it runs on its
// own clock (a second, against the heartbeat's several) and must never make
// a heartbeat wait: the heartbeat reads what the last round found.
//
// A round reads every engine at once, each with a short timeout, and the
// next round starts an interval after this one began, or when it ends if it
// ran longer: rounds never overlap, so a hung engine costs one timeout a
// round, not a pile of open requests. When a round finds a load that
// differs from what the control plane last heard (see `differs`), it calls
// onChange, and the agent sends a heartbeat now rather than at the end of
// its long-poll: a sample is worth something only while it is fresh.
//
// The prefix cache's hit rate rides along but is never news by itself: it
// is for people (`ctl replicas`, the dashboard), not the router's choice.
// From vLLM's counters it is the rate over the last interval that queried
// anything, kept through idle intervals.
import { request, type Dispatcher } from 'undici';
import type { ShardLoad } from '../../protocol/index.js';
import { engineDispatcher } from '../../tls/index.js';
import { intervalHitRate, parseEngineLoad, type CacheCounters, type EngineLoad } from './parse.js';
import { AGENT_DEFAULTS } from '../defaults/index.js';

/** One engine to read: a ready shard that serves the API. */
export interface ScrapeTarget {
  readonly shardId: string;
  readonly endpoint: string;
  /** Sent as a bearer: llama.cpp asks its --api-key of /metrics too. Absent = none. */
  readonly apiKey?: string;
}

export interface LoadScraperOptions {
  /** The engines to read now; called at the start of each round. */
  readonly targets: () => readonly ScrapeTarget[];
  /** Reads one engine's metrics text; absent = GET <endpoint>/metrics over HTTP(S). Injected by tests. */
  readonly fetchText?: (target: ScrapeTarget, timeoutMs: number) => Promise<string>;
  /** The CA an https engine's certificate chains to (the agent's --ca); absent or null = the system's. */
  readonly ca?: Buffer | null;
  /** The node certificate the agent gave its engines (--engine-tls): accepted on any address, loopback included, which it does not name. Absent = names are checked. */
  readonly engineCert?: Buffer | null;
  /** Between round starts, ms; absent = AGENT_DEFAULTS.loadIntervalMs (1 s). */
  readonly intervalMs?: number;
  /** Per engine per round, ms; absent = half the interval. */
  readonly timeoutMs?: number;
  /** Monotonic ms; absent = performance.now. */
  readonly now?: () => number;
  /** A round found a load the control plane should hear now. */
  readonly onChange?: () => void;
  readonly logger?: { debug(o: object, m: string): void };
}

/** Metrics bigger than this are not read to the end: a vLLM scrape is tens of KiB. */
const MAX_METRICS_BYTES = 4 << 20;

/** KV use above this is pressure the router penalises: crossing it is news even when the counts held still. */
export const KV_PRESSURE = 0.9;

interface Held {
  /** Null: the last read failed or the text had no known gauges (reported as absent). */
  readonly load: EngineLoad | null;
  /** Monotonic ms of the read. */
  readonly atMs: number;
  /** 0..1; undefined = the engine reports no hit rate, or has queried nothing yet. */
  readonly cacheHitRate?: number;
}

/** A shard's prefix-cache counters at its last read that had them, and the rate they gave. */
interface CacheSeen {
  readonly counters: CacheCounters;
  readonly rate: number | undefined;
}

export class LoadScraper {
  private readonly held = new Map<string, Held>();
  private readonly cache = new Map<string, CacheSeen>();
  /** What the last heartbeat carried per shard, and when: the base `differs` compares against. */
  private readonly sent = new Map<string, { load: EngineLoad | null; atMs: number }>();
  private readonly intervalMs: number;
  private readonly timeoutMs: number;
  private readonly now: () => number;
  private readonly fetchText: (target: ScrapeTarget, timeoutMs: number) => Promise<string>;
  private readonly dispatcher: Dispatcher | null;
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private stopped = false;

  constructor(private readonly options: LoadScraperOptions) {
    this.intervalMs = options.intervalMs ?? AGENT_DEFAULTS.loadIntervalMs;
    this.timeoutMs = options.timeoutMs ?? Math.max(100, Math.floor(this.intervalMs / 2));
    this.now = options.now ?? (() => performance.now());
    this.dispatcher = options.fetchText ? null : engineDispatcher(options.ca ?? null, options.engineCert ?? null);
    this.fetchText = options.fetchText ?? ((t, ms) => this.httpText(t, ms));
  }

  start(): void {
    if (this.timer || this.stopped) return;
    const tick = () => {
      const started = this.now();
      this.running = this.round().finally(() => {
        this.running = null;
        if (this.stopped) return;
        this.timer = setTimeout(tick, Math.max(0, this.intervalMs - (this.now() - started)));
        this.timer.unref();
      });
    };
    tick();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.running;
    await this.dispatcher?.close();
  }

  /** One round: reads every target, forgets shards no longer ready, and tells onChange when it found news. */
  async round(): Promise<void> {
    const targets = this.options.targets();
    const live = new Set(targets.map((t) => t.shardId));
    for (const id of this.held.keys()) if (!live.has(id)) this.held.delete(id);
    for (const id of this.sent.keys()) if (!live.has(id)) this.sent.delete(id);
    for (const id of this.cache.keys()) if (!live.has(id)) this.cache.delete(id);
    const results = await Promise.all(
      targets.map(async (t): Promise<[string, EngineLoad | null]> => {
        try {
          return [t.shardId, parseEngineLoad(await this.fetchText(t, this.timeoutMs))];
        } catch (err) {
          this.options.logger?.debug(
            { shard: t.shardId, err: (err as Error).message },
            "could not read the engine's metrics",
          );
          return [t.shardId, null];
        }
      }),
    );
    const at = this.now();
    let news = false;
    for (const [shardId, load] of results) {
      const cacheHitRate = this.hitRate(shardId, load);
      this.held.set(shardId, { load, atMs: at, ...(cacheHitRate === undefined ? {} : { cacheHitRate }) });
      const sent = this.sent.get(shardId);
      if (differs(sent?.load, load, sent === undefined ? Infinity : at - sent.atMs, this.intervalMs)) news = true;
    }
    if (news && !this.stopped) this.options.onChange?.();
  }

  /**
   * The wire form of a shard's last sample, for a heartbeat about to be
   * sent (which is recorded as what the control plane heard); undefined =
   * not scraped, or no load read at the last try.
   */
  take(shardId: string): ShardLoad | undefined {
    const h = this.held.get(shardId);
    if (!h) return undefined;
    const now = this.now();
    this.sent.set(shardId, { load: h.load, atMs: now });
    if (h.load === null) return undefined;
    return {
      running: h.load.running,
      waiting: h.load.waiting,
      ...(h.load.kvUsage === undefined ? {} : { kv_usage: h.load.kvUsage }),
      ...(h.cacheHitRate === undefined ? {} : { cache_hit_rate: h.cacheHitRate }),
      age_ms: Math.max(0, Math.round(now - h.atMs)),
    };
  }

  /**
   * The hit rate to report for a shard's new read: the engine's gauge as
   * is, or its counters' growth since the last read that had them (the
   * previous rate when nothing was queried since). A failed read keeps the
   * counters, so the next one measures over the longer interval.
   */
  private hitRate(shardId: string, load: EngineLoad | null): number | undefined {
    if (load === null) return undefined;
    if (load.cacheCounters === undefined) {
      this.cache.delete(shardId);
      return load.cacheHitRate;
    }
    const before = this.cache.get(shardId);
    const rate = intervalHitRate(before?.counters, load.cacheCounters) ?? before?.rate;
    this.cache.set(shardId, { counters: load.cacheCounters, rate });
    return rate;
  }

  private async httpText(target: ScrapeTarget, timeoutMs: number): Promise<string> {
    const res = await request(`${target.endpoint.replace(/\/+$/, '')}/metrics`, {
      method: 'GET',
      headers: target.apiKey === undefined ? {} : { authorization: `Bearer ${target.apiKey}` },
      signal: AbortSignal.timeout(timeoutMs),
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
      ...(this.dispatcher ? { dispatcher: this.dispatcher } : {}),
    });
    if (res.statusCode !== 200) {
      await res.body.dump();
      throw new Error(`GET /metrics answered ${res.statusCode}`);
    }
    const length = Number(res.headers['content-length'] ?? 0);
    if (length > MAX_METRICS_BYTES) {
      await res.body.dump();
      throw new Error(`GET /metrics sent ${length} bytes, more than the ${MAX_METRICS_BYTES} read`);
    }
    return res.body.text();
  }
}

/**
 * Whether a sample is news to the control plane, which last heard `sent`
 * `sinceSentMs` ago: it appeared or went away, a count moved, KV use moved
 * by a twentieth or crossed KV_PRESSURE, or the engine is busy and the
 * control plane's copy is two intervals old (a busy engine's sample must
 * stay fresh to be used; an idle one going stale costs nothing, since the
 * router then counts its own in-flight requests, which are none either).
 */
export function differs(
  sent: EngineLoad | null | undefined,
  now: EngineLoad | null,
  sinceSentMs: number,
  intervalMs: number,
): boolean {
  if (sent === undefined) return now !== null;
  if (sent === null || now === null) return sent !== now;
  if (sent.running !== now.running || sent.waiting !== now.waiting) return true;
  if ((sent.kvUsage === undefined) !== (now.kvUsage === undefined)) return true;
  if (sent.kvUsage !== undefined && now.kvUsage !== undefined) {
    if (Math.abs(sent.kvUsage - now.kvUsage) >= 0.05) return true;
    if (sent.kvUsage > KV_PRESSURE !== now.kvUsage > KV_PRESSURE) return true;
  }
  return now.running + now.waiting > 0 && sinceSentMs >= 2 * intervalMs;
}
