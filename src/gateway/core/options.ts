// The router's options in three stages: as a caller writes them (the
// option fields of RouterDeps, every one optional), ROUTER_DEFAULTS, the one
// table of what an absent option means, and the readonly RouterOptions that
// compileRouterOptions() makes of them once, at construction. Kept apart
// from router.ts so that the control plane's configuration takes its
// defaults for the same settings (timeouts, max_held_per_key) from this
// table instead of repeating them.
import { LlmgwError } from '../../errors/index.js';
import { MAX_TIMER_MS } from '../../units/index.js';

/** Every router default, in the unit its name carries. */
export const ROUTER_DEFAULTS = Object.freeze({
  /** From sending a request upstream to the engine's response headers. */
  headersTimeoutMs: 300_000,
  /** Longest silence in a body: the client's request, and the engine's answer between chunks. */
  idleBodyTimeoutMs: 60_000,
  /** Whole request, holds and retries included. */
  totalTimeoutMs: 600_000,
  /** Longest hold for a model with no ready replica while one starts. */
  coldStartTimeoutMs: 120_000,
  bodyLimitBytes: 8 * 2 ** 20,
  /** OpenAI's own limit for an audio file. */
  uploadLimitBytes: 25 * 2 ** 20,
  maxN: 16,
  maxTokens: 1_000_000,
  maxAttempts: 4,
  attemptsPerModel: 2,
  retryBackoffMs: 20,
  prefixChars: 256,
  loadFactor: 1.25,
  loadStaleMs: 4_000,
  /** prefix-cache routing: uncached prompt tokens weighed as one request of load (prefix-cache/score.ts). */
  cacheTokensPerRequest: 512,
  /** prefix-cache routing: (replica, block) entries the index keeps at most (docs/prefix-cache.md gives the bytes). */
  cacheMaxBlocks: 1_000_000,
  /** prefix-cache routing: prompts kept tokenised (as chain hashes, a few KB each). */
  tokenCacheEntries: 4096,
  /** prefix-cache routing: longest wait for an engine's /tokenize, in the background. */
  tokenizeTimeoutMs: 2_000,
  coldPollMs: 100,
  sweepIntervalMs: 30_000,
  maxHeldPerKey: 32,
  defaultReserveTokens: 1024,
});

export interface RouterTimeouts {
  /** From sending a request upstream to the engine's response headers (a non-streamed answer's headers come with the whole answer). Default 300 000. */
  headersTimeoutMs: number;
  /** Longest silence in a body: the client's request body, and the engine's answer between chunks. Default 60 000. */
  idleBodyTimeoutMs: number;
  /** Whole request, holds and retries included; then 504 (or an SSE error event once streaming). Default 600 000. */
  totalTimeoutMs: number;
  /** Longest hold for a model with no ready replica while one starts. Default 120 000. */
  coldStartTimeoutMs: number;
}

/** The router's settings as a caller writes them; absent = ROUTER_DEFAULTS (or the default named). */
export interface RouterSettings {
  /** Epoch ms; absent = Date.now. Key expiry, rate limits, last-used and cold-start deadlines read it. */
  now?: () => number;
  /** Uniform in [0, 1); absent = Math.random. Tests pass a seeded one. */
  random?: () => number;
  timeouts?: Partial<RouterTimeouts>;
  /** Largest request body; absent = 8 MiB. Enforced on chunked bodies too. */
  bodyLimitBytes?: number;
  /** Largest multipart upload (/v1/audio/transcriptions), read whole to find its model; absent = 25 MiB. */
  uploadLimitBytes?: number;
  /** Largest `n`; absent = 16. */
  maxN?: number;
  /** Largest max_tokens / max_completion_tokens; absent = 1 000 000. */
  maxTokens?: number;
  /** Upstream attempts per request over all replicas and fallbacks; absent = 4. */
  maxAttempts?: number;
  /** Replicas tried per model before moving to the next fallback; absent = 2. */
  attemptsPerModel?: number;
  /** First retry's backoff; doubles per attempt, ×(0.5..1.5) jitter, capped at 500 ms. Absent = 20. */
  retryBackoffMs?: number;
  /** Characters of prompt hashed for `routing: prefix`; absent = 256. */
  prefixChars?: number;
  /** CHWBL's bound: a replica takes a prefix while under loadFactor × mean load; absent = 1.25. */
  loadFactor?: number;
  /** `routing: prefix-cache`: uncached prompt tokens weighed as one request of load; absent = 512; 0 = the cache is not weighed. */
  cacheTokensPerRequest?: number;
  /** `routing: prefix-cache`: (replica, block) entries the index keeps at most; absent = 1 000 000. */
  cacheMaxBlocks?: number;
  /** `routing: prefix-cache`: prompts kept tokenised; absent = 4096. */
  tokenCacheEntries?: number;
  /** `routing: prefix-cache`: longest wait for an engine to tokenise a prompt (never on a request's path); absent = 2000. */
  tokenizeTimeoutMs?: number;
  /**
   * An engine load sample older than this no longer counts, ms: the replica
   * is then chosen by the router's own in-flight count. Absent = 4000, four
   * of the agent's default scrape intervals (a busy engine's sample is
   * refreshed at least every two). 0 = samples are never used.
   */
  loadStaleMs?: number;
  /** How often a held request re-reads `ready()`; absent = 100. */
  coldPollMs?: number;
  /** Web origins whose pages may call these endpoints from a browser (CORS); '*' = any; absent or empty = none. */
  corsOrigins?: readonly string[];
  /** How often pools of replicas that are gone are closed; absent = 30 000; 0 = never (call sweep()). */
  sweepIntervalMs?: number;
  /**
   * Most requests of one key held at once for models with no ready replica
   * (`max_held_per_key`); the next is refused with 429. Absent = 32. Requests
   * without a key (api_keys off, loopback only) are not limited.
   */
  maxHeldPerKey?: number;
  /**
   * Completion tokens a request reserves against its key's token limit when
   * it sets neither max_tokens nor max_completion_tokens and its model
   * declares no limits.max_tokens. Absent = 1024.
   */
  defaultReserveTokens?: number;
  /**
   * PEM CA that https endpoints (agents with --engine-tls) are verified
   * against, and only it (`engine_ca`). Absent or null = the system's CAs.
   * Plain http endpoints are unaffected.
   */
  engineCa?: Buffer | null;
}

/** The compiled settings: every default filled, read on the hot path without a `??`. */
export interface RouterOptions {
  readonly now: () => number;
  readonly random: () => number;
  readonly timeouts: Readonly<RouterTimeouts>;
  readonly bodyLimitBytes: number;
  readonly uploadLimitBytes: number;
  readonly maxN: number;
  readonly maxTokens: number;
  readonly maxAttempts: number;
  readonly attemptsPerModel: number;
  readonly retryBackoffMs: number;
  readonly prefixChars: number;
  readonly loadFactor: number;
  /** 0 = the cache is not weighed. */
  readonly cacheTokensPerRequest: number;
  readonly cacheMaxBlocks: number;
  readonly tokenCacheEntries: number;
  readonly tokenizeTimeoutMs: number;
  /** 0 = engine samples are never used. */
  readonly loadStaleMs: number;
  readonly coldPollMs: number;
  /** Empty = no CORS. */
  readonly corsOrigins: readonly string[];
  /** 0 = never. */
  readonly sweepIntervalMs: number;
  readonly maxHeldPerKey: number;
  readonly defaultReserveTokens: number;
  /** Null = the system's CAs. */
  readonly engineCa: Buffer | null;
}

/** The numeric settings, each checked to be a finite number, not negative. */
const NUMERIC = [
  'bodyLimitBytes',
  'uploadLimitBytes',
  'maxN',
  'maxTokens',
  'maxAttempts',
  'attemptsPerModel',
  'retryBackoffMs',
  'prefixChars',
  'loadFactor',
  'cacheTokensPerRequest',
  'cacheMaxBlocks',
  'tokenCacheEntries',
  'tokenizeTimeoutMs',
  'loadStaleMs',
  'coldPollMs',
  'sweepIntervalMs',
  'maxHeldPerKey',
  'defaultReserveTokens',
] as const;

/** Fills every absent setting from ROUTER_DEFAULTS; a negative or non-finite number is refused, naming the setting. */
export function compileRouterOptions(settings: RouterSettings): RouterOptions {
  const problems: string[] = [];
  const pick = (name: (typeof NUMERIC)[number] | keyof RouterTimeouts, value: number | undefined): number => {
    if (value === undefined) return ROUTER_DEFAULTS[name];
    if (!Number.isFinite(value) || value < 0) problems.push(`${name} is ${value}; want a number, 0 or more`);
    return value;
  };
  /** A timeout becomes a timer: past MAX_TIMER_MS Node fires it at once, which would end every request. */
  const timer = (name: keyof RouterTimeouts, value: number | undefined): number => {
    const ms = pick(name, value);
    if (ms > MAX_TIMER_MS) problems.push(`${name} is ${ms}; a timer waits at most ${MAX_TIMER_MS} ms (24 days)`);
    return ms;
  };
  const t = settings.timeouts ?? {};
  const timeouts = Object.freeze({
    headersTimeoutMs: timer('headersTimeoutMs', t.headersTimeoutMs),
    idleBodyTimeoutMs: timer('idleBodyTimeoutMs', t.idleBodyTimeoutMs),
    totalTimeoutMs: timer('totalTimeoutMs', t.totalTimeoutMs),
    coldStartTimeoutMs: timer('coldStartTimeoutMs', t.coldStartTimeoutMs),
  });
  const numbers = {} as Record<(typeof NUMERIC)[number], number>;
  for (const name of NUMERIC) numbers[name] = pick(name, settings[name]);
  if (problems.length)
    throw new LlmgwError('LLMGW_CONFIG_INVALID', `the router's options are not valid: ${problems.join('; ')}`);
  return Object.freeze({
    now: settings.now ?? Date.now,
    random: settings.random ?? Math.random,
    timeouts,
    ...numbers,
    corsOrigins: Object.freeze([...(settings.corsOrigins ?? [])]),
    engineCa: settings.engineCa ?? null,
  });
}
