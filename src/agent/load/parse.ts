// Reading an engine's load out of its Prometheus text: the few gauges the
// router needs (running, waiting, KV-cache use) under each engine's names,
// and nothing else. A hand-written reader rather than a Prometheus parser
// library (prom-client only writes the format): a vLLM scrape is tens of
// kilobytes of histograms, and this looks only at lines that start with a
// wanted name, so a scrape a second per engine costs next to nothing.
//
// Several series of one name (vLLM's `engine` label under data parallel,
// SGLang's `tp_rank`) are combined: series that differ only in a tensor or
// pipeline rank are one scheduler seen from several ranks (the largest
// counts), other series are separate schedulers (their counts add up). KV
// use is the fullest series': the request waits for the cache it lands on.
//
// The prefix cache's hit rate comes two ways: vLLM counts queried and hit
// tokens since it started (two counters: the rate is their growth between
// two scrapes, see intervalHitRate), SGLang reports a rate (a gauge, taken
// as is). llama.cpp reports neither: absent, not zero.

/** One engine's load as its metrics said it. */
export interface EngineLoad {
  readonly running: number;
  readonly waiting: number;
  /** 0..1; undefined = the engine reports no KV-cache gauge (llama.cpp since it dropped kv_cache_usage_ratio). */
  readonly kvUsage?: number;
  /** The prefix cache's counters since the engine started (vLLM); undefined = not reported. */
  readonly cacheCounters?: CacheCounters;
  /** The prefix cache's hit rate, 0..1, as the engine computed it (SGLang's gauge); undefined = not reported. */
  readonly cacheHitRate?: number;
}

/** Prompt tokens looked up in the prefix cache and, of those, found there; both only grow until a restart. */
export interface CacheCounters {
  readonly queries: number;
  readonly hits: number;
}

interface Family {
  readonly running: readonly string[];
  readonly waiting: readonly string[];
  /** In order of preference: a newer name before the one it replaced. */
  readonly kv: readonly string[];
  /** Prefix-cache counters (queried tokens, hit tokens); empty = the engine has none. */
  readonly cacheQueries: readonly string[];
  readonly cacheHits: readonly string[];
  /** A prefix-cache hit-rate gauge; empty = none. */
  readonly cacheRate: readonly string[];
}

/** Each engine's names, as ENGINES.md lists them; builtin and sim serve vLLM's or llama.cpp's. */
const FAMILIES: readonly Family[] = [
  {
    running: ['vllm:num_requests_running'],
    waiting: ['vllm:num_requests_waiting'],
    kv: ['vllm:kv_cache_usage_perc', 'vllm:gpu_cache_usage_perc'],
    // vLLM V1 before 0.10 named them gpu_prefix_cache_*.
    cacheQueries: ['vllm:prefix_cache_queries_total', 'vllm:gpu_prefix_cache_queries_total'],
    cacheHits: ['vllm:prefix_cache_hits_total', 'vllm:gpu_prefix_cache_hits_total'],
    cacheRate: [],
  },
  {
    running: ['llamacpp:requests_processing'],
    waiting: ['llamacpp:requests_deferred'],
    kv: ['llamacpp:kv_cache_usage_ratio'],
    cacheQueries: [],
    cacheHits: [],
    cacheRate: [],
  },
  // Some SGLang exporters write `sglang_` for `sglang:`.
  {
    running: ['sglang:num_running_reqs', 'sglang_num_running_reqs'],
    waiting: ['sglang:num_queue_reqs', 'sglang_num_queue_reqs'],
    kv: ['sglang:token_usage', 'sglang_token_usage'],
    cacheQueries: [],
    cacheHits: [],
    cacheRate: ['sglang:cache_hit_rate', 'sglang_cache_hit_rate'],
  },
];

const WANTED = new Set(
  FAMILIES.flatMap((f) => [...f.running, ...f.waiting, ...f.kv, ...f.cacheQueries, ...f.cacheHits, ...f.cacheRate]),
);

/** Labels that name a rank of one scheduler rather than a scheduler of its own. */
const RANK_LABEL = /(?:^|,)\s*(?:tp_rank|pp_rank|moe_ep_rank)="[^"]*"/g;

/**
 * The load in `text`, or null when it carries none of the known running
 * gauges (metrics off, an engine that names them otherwise). A gauge that is
 * not a finite number (NaN, garbage) is skipped, as if absent.
 */
export function parseEngineLoad(text: string): EngineLoad | null {
  // name -> series key (labels without ranks) -> largest value among the ranks
  const seen = new Map<string, Map<string, number>>();
  let start = 0;
  while (start < text.length) {
    let end = text.indexOf('\n', start);
    if (end < 0) end = text.length;
    const line = text.charCodeAt(start) === 35 /* # */ ? '' : text.slice(start, end);
    start = end + 1;
    if (line.length === 0) continue;
    const nameEnd = nameEndOf(line);
    const name = line.slice(0, nameEnd);
    if (!WANTED.has(name)) continue;
    let labels = '';
    let rest = nameEnd;
    if (line.charCodeAt(nameEnd) === 123 /* { */) {
      const close = line.indexOf('}', nameEnd);
      if (close < 0) continue;
      labels = line.slice(nameEnd + 1, close).replace(RANK_LABEL, '');
      rest = close + 1;
    }
    // "value" or "value timestamp"
    const field = line.slice(rest).trim().split(/\s+/)[0];
    const value = field ? Number(field) : NaN;
    if (!Number.isFinite(value)) continue;
    let series = seen.get(name);
    if (!series) seen.set(name, (series = new Map()));
    series.set(labels, Math.max(series.get(labels) ?? -Infinity, value));
  }
  for (const family of FAMILIES) {
    const running = sumOf(seen, family.running);
    if (running === undefined) continue;
    const waiting = sumOf(seen, family.waiting) ?? 0;
    const kv = maxOf(seen, family.kv);
    const queries = sumOf(seen, family.cacheQueries);
    const hits = sumOf(seen, family.cacheHits);
    const rate = meanOf(seen, family.cacheRate);
    return {
      running: Math.max(0, running),
      waiting: Math.max(0, waiting),
      ...(kv === undefined ? {} : { kvUsage: clamp01(kv) }),
      ...(queries === undefined || hits === undefined
        ? {}
        : { cacheCounters: { queries: Math.max(0, queries), hits: Math.max(0, hits) } }),
      ...(rate === undefined ? {} : { cacheHitRate: clamp01(rate) }),
    };
  }
  return null;
}

/**
 * The hit rate over the interval from the scrape that read `before` to the
 * one that read `now`: hit tokens over queried tokens, both as grown in
 * between. No `before` (the first scrape) counts from zero, i.e. since the
 * engine started; so does a counter that went down (the engine restarted,
 * and counts from zero again). Undefined = no tokens were queried in the
 * interval (an idle engine: the caller keeps the rate it had).
 */
export function intervalHitRate(before: CacheCounters | undefined, now: CacheCounters): number | undefined {
  const reset = before === undefined || now.queries < before.queries || now.hits < before.hits;
  const queries = reset ? now.queries : now.queries - before.queries;
  const hits = reset ? now.hits : now.hits - before.hits;
  if (!(queries > 0)) return undefined;
  return clamp01(hits / queries);
}

function clamp01(v: number): number {
  return Math.min(1, Math.max(0, v));
}

/** Where a sample line's metric name ends: at its labels or the space before its value. */
function nameEndOf(line: string): number {
  for (let i = 0; i < line.length; i++) {
    const c = line.charCodeAt(i);
    if (c === 123 || c === 32 || c === 9) return i;
  }
  return line.length;
}

/** The first of `names` present, summed over its series; undefined = none present. */
function sumOf(seen: ReadonlyMap<string, ReadonlyMap<string, number>>, names: readonly string[]): number | undefined {
  for (const name of names) {
    const series = seen.get(name);
    if (!series) continue;
    let total = 0;
    for (const v of series.values()) total += v;
    return total;
  }
  return undefined;
}

/** The first of `names` present, its largest series; undefined = none present. */
function maxOf(seen: ReadonlyMap<string, ReadonlyMap<string, number>>, names: readonly string[]): number | undefined {
  for (const name of names) {
    const series = seen.get(name);
    if (!series) continue;
    return Math.max(...series.values());
  }
  return undefined;
}

/**
 * The first of `names` present, averaged over its series; undefined = none
 * present. A rate per scheduler: data-parallel schedulers' rates average
 * (unweighted, since the gauge does not say how many tokens each saw).
 */
function meanOf(seen: ReadonlyMap<string, ReadonlyMap<string, number>>, names: readonly string[]): number | undefined {
  for (const name of names) {
    const series = seen.get(name);
    if (!series || series.size === 0) continue;
    let total = 0;
    for (const v of series.values()) total += v;
    return total / series.size;
  }
  return undefined;
}
