// The sim engine's options: as a test or the CLI writes them, and the
// validated, defaulted, frozen form the server reads on every request. Kept
// apart so that a mistyped option ("ttftMS") stops start-up with a sentence
// naming the nearest valid one instead of silently running with a default.
import { z } from 'zod';
import { ValidationError } from '../../errors/index.js';
import { parseOptions } from '../../validation/options.js';

/** Which real engine the sim imitates in /metrics names and the /health body. */
export type SimFlavor = 'vllm' | 'llamacpp' | 'sglang';

/** What happens to a request beyond `maxConcurrency`: wait its turn, or 429 at once. */
export type SimOverflow = 'queue' | 'reject';

/** The options as a caller writes them. Every key is optional; absent takes the default named. */
export interface SimEngineOptions {
  /** Address to bind; absent = 127.0.0.1. */
  host?: string;
  /** TCP port; 0 or absent = the OS picks a free one (read it back from `SimEngine.port`). */
  port?: number;
  /** Served model names: the first is canonical (the metrics label), the rest aliases. Absent = ['sim']. */
  models?: string[];
  /** Time to first token in milliseconds, counted from admission; 0 = at once. */
  ttftMs?: number;
  /** Token rate per request after the first token; 0 = as fast as the socket takes them. */
  tokensPerSecond?: number;
  /** Requests generating at once; 0 = unlimited. Beyond it, `overflow` decides. */
  maxConcurrency?: number;
  /** Absent = 'queue' (vLLM's behaviour: requests wait, counted in num_requests_waiting). */
  overflow?: SimOverflow;
  /** Share of inference requests answered 500, 0..1, drawn from `seed` in arrival order; 0 = never. */
  errorRate?: number;
  /** Crash once this many inference requests have been answered (in a process: exit 1); 0 = never. */
  crashAfterRequests?: number;
  /** Accept connections and never answer anything, /health included. */
  hang?: boolean;
  /** Hang (as `hang`) once this many inference requests have been received; 0 = never. */
  hangAfterRequests?: number;
  /** /health answers 503 {"status":"loading"} for this long after listening, like llama.cpp; 0 = ready at once. */
  startupDelayMs?: number;
  /** Components per embedding vector; absent = 32. */
  embeddingDim?: number;
  /** Context length in tokens: a longer prompt is refused with 400, like vLLM; 0 or absent = no limit. */
  maxModelLen?: number;
  /** Seeds the generated text and the error draw; absent = 0. A request's own `seed` overrides it for text. */
  seed?: number;
  /** How long close() lets running requests finish before cutting them, in milliseconds; absent = 5000. */
  shutdownGraceMs?: number;
  /** Absent = 'vllm'. */
  flavor?: SimFlavor;
  /**
   * Requests to /v1/* must carry `Authorization: Bearer <apiKey>` or get 401
   * (/health and /metrics stay open, as in vLLM). Absent = no key asked.
   */
  apiKey?: string;
  /**
   * PEM certificate and key files: the engine serves https (as vLLM's
   * --ssl-certfile/--ssl-keyfile). Both or neither; absent = plain http.
   */
  tlsCert?: string;
  tlsKey?: string;
  /**
   * The monotonic clock, in milliseconds, that the startup delay is measured
   * on; absent = performance.now. Tests pass a fake one. Token pacing always
   * runs on real timers.
   */
  nowMs?: () => number;
  /**
   * Blocks of the simulated KV prefix cache (kv-cache.ts): a prompt's leading
   * blocks found there skip prefill time, and the cache publishes what it
   * holds (GET /kv-events, and ZeroMQ with kvEventsEndpoint). 0 or absent =
   * no cache: every prompt token is uncached and nothing is published.
   */
  kvCacheBlocks?: number;
  /** Tokens per cache block; absent = 16 (vLLM's default). */
  kvBlockSize?: number;
  /**
   * Prefill time per uncached prompt token in milliseconds, added to ttftMs;
   * 0 or absent = none (prompt length costs nothing, as before).
   */
  prefillMsPerToken?: number;
  /**
   * A ZeroMQ address to bind a PUB socket on and publish the cache's events
   * as vLLM does (tcp://127.0.0.1:* picks a port; read it back from
   * `SimEngine.kvEvents`). SGLang's payload when the flavor is sglang.
   * Absent = no ZeroMQ. Needs kvCacheBlocks.
   */
  kvEventsEndpoint?: string;
  /** A ZeroMQ address for vLLM's replay ROUTER socket; absent = no replay. */
  kvEventsReplayEndpoint?: string;
  /** The topic frame of every message; absent = '' (vLLM's default). */
  kvEventsTopic?: string;
}

const count = z.number().int().min(0);

const SimEngineOptionsSchema = z.strictObject({
  host: z.string().min(1).default('127.0.0.1'),
  port: z.number().int().min(0).max(65535).default(0),
  models: z.array(z.string().min(1, 'a model name cannot be empty')).min(1, 'name at least one model').default(['sim']),
  ttftMs: z.number().min(0).default(0),
  tokensPerSecond: z.number().min(0).default(0),
  maxConcurrency: count.default(0),
  overflow: z.enum(['queue', 'reject']).default('queue'),
  errorRate: z.number().min(0).max(1).default(0),
  crashAfterRequests: count.default(0),
  hang: z.boolean().default(false),
  hangAfterRequests: count.default(0),
  startupDelayMs: z.number().min(0).default(0),
  embeddingDim: z.number().int().min(1).max(65536).default(32),
  maxModelLen: count.default(0),
  seed: z.number().int().default(0),
  shutdownGraceMs: z.number().min(0).default(5000),
  flavor: z.enum(['vllm', 'llamacpp', 'sglang']).default('vllm'),
  apiKey: z.string().min(1, 'an API key cannot be empty; leave it out for none').optional(),
  tlsCert: z.string().min(1).optional(),
  tlsKey: z.string().min(1).optional(),
  nowMs: z
    .custom<() => number>((v) => typeof v === 'function', { message: 'want a function returning milliseconds' })
    .optional(),
  kvCacheBlocks: count.default(0),
  kvBlockSize: z.number().int().min(1).max(4096).default(16),
  prefillMsPerToken: z.number().min(0).default(0),
  kvEventsEndpoint: z
    .string()
    .regex(/^(tcp|ipc|inproc):\/\/./, 'want a ZeroMQ address such as tcp://127.0.0.1:5557')
    .optional(),
  kvEventsReplayEndpoint: z
    .string()
    .regex(/^(tcp|ipc|inproc):\/\/./, 'want a ZeroMQ address such as tcp://127.0.0.1:5558')
    .optional(),
  kvEventsTopic: z.string().default(''),
});

/** The option keys, for callers (the CLI) that map their own names onto them. */
export const SIM_ENGINE_OPTION_KEYS = Object.keys(SimEngineOptionsSchema.shape) as (keyof SimEngineOptions)[];

/** The compiled form: validated, defaults filled, frozen. Zero keeps the meaning documented on the options. */
export interface SimEngineConfig {
  readonly host: string;
  readonly port: number;
  readonly models: readonly string[];
  readonly ttftMs: number;
  readonly tokensPerSecond: number;
  readonly maxConcurrency: number;
  readonly overflow: SimOverflow;
  readonly errorRate: number;
  readonly crashAfterRequests: number;
  readonly hang: boolean;
  readonly hangAfterRequests: number;
  readonly startupDelayMs: number;
  readonly embeddingDim: number;
  readonly maxModelLen: number;
  readonly seed: number;
  readonly shutdownGraceMs: number;
  readonly flavor: SimFlavor;
  /** Undefined = no key asked. */
  readonly apiKey: string | undefined;
  /** Undefined = plain http; both are set or neither. */
  readonly tlsCert: string | undefined;
  readonly tlsKey: string | undefined;
  readonly nowMs: () => number;
  /** 0 = no simulated cache. */
  readonly kvCacheBlocks: number;
  readonly kvBlockSize: number;
  readonly prefillMsPerToken: number;
  /** Undefined = no ZeroMQ publisher. */
  readonly kvEventsEndpoint: string | undefined;
  readonly kvEventsReplayEndpoint: string | undefined;
  readonly kvEventsTopic: string;
}

/** Validates and fills defaults. Throws ValidationError (LLMGW_CONFIG_INVALID) listing every problem. */
export function compileSimEngineOptions(options: SimEngineOptions = {}): SimEngineConfig {
  const o = parseOptions(SimEngineOptionsSchema, options, 'the sim engine options are not valid');
  const seen = new Set<string>();
  const problems: string[] = [];
  for (const name of o.models) {
    if (seen.has(name)) problems.push(`models: "${name}" is listed twice; name each model once`);
    seen.add(name);
  }
  if (o.hang && o.hangAfterRequests > 0) {
    problems.push('hang and hangAfterRequests are both set; hang already hangs from the first request, keep one');
  }
  if ((o.tlsCert === undefined) !== (o.tlsKey === undefined)) {
    problems.push(
      `${o.tlsCert === undefined ? 'tlsKey' : 'tlsCert'}: is set without ${o.tlsCert === undefined ? 'tlsCert' : 'tlsKey'}; serving TLS needs both the certificate and its key`,
    );
  }
  if (o.kvEventsEndpoint !== undefined && o.kvCacheBlocks === 0)
    problems.push('kvEventsEndpoint: publishes the simulated KV cache, which is off; set kvCacheBlocks too');
  if (o.kvEventsReplayEndpoint !== undefined && o.kvEventsEndpoint === undefined)
    problems.push('kvEventsReplayEndpoint: replays what kvEventsEndpoint publishes; set kvEventsEndpoint too');
  if (problems.length)
    throw new ValidationError('LLMGW_CONFIG_INVALID', problems, 'the sim engine options are not valid');
  return Object.freeze({
    host: o.host,
    port: o.port,
    models: Object.freeze([...o.models]),
    ttftMs: o.ttftMs,
    tokensPerSecond: o.tokensPerSecond,
    maxConcurrency: o.maxConcurrency,
    overflow: o.overflow,
    errorRate: o.errorRate,
    crashAfterRequests: o.crashAfterRequests,
    hang: o.hang,
    hangAfterRequests: o.hangAfterRequests,
    startupDelayMs: o.startupDelayMs,
    embeddingDim: o.embeddingDim,
    maxModelLen: o.maxModelLen,
    seed: o.seed,
    shutdownGraceMs: o.shutdownGraceMs,
    flavor: o.flavor,
    apiKey: o.apiKey,
    tlsCert: o.tlsCert,
    tlsKey: o.tlsKey,
    nowMs: o.nowMs ?? (() => performance.now()),
    kvCacheBlocks: o.kvCacheBlocks,
    kvBlockSize: o.kvBlockSize,
    prefillMsPerToken: o.prefillMsPerToken,
    kvEventsEndpoint: o.kvEventsEndpoint,
    kvEventsReplayEndpoint: o.kvEventsReplayEndpoint,
    kvEventsTopic: o.kvEventsTopic,
  });
}
