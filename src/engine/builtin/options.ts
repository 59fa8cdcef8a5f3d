// What the builtin engine is told (model file, listener, names, CPU share,
// sequences, context) in the three stages every llmgw part uses: the options
// as a caller writes them, compileBuiltinEngineOptions() that checks them and
// fills defaults, and the readonly form the engine runs on.
import { availableParallelism } from 'node:os';
import { basename } from 'node:path';
import { z } from 'zod';
import { ValidationError } from '../../errors/index.js';
import { parseOptions } from '../../validation/options.js';
import { DEFAULT_STREAM_INTERVAL_MS } from './sse.js';

export interface BuiltinEngineOptions {
  /** Path of the GGUF file to serve. */
  modelPath: string;
  /** Listener address; absent means 127.0.0.1 (the agent proxies to it). */
  host?: string;
  /** Listener port; absent or 0 means any free port (read it back from the engine). */
  port?: number;
  /**
   * Model names requests may use and /v1/models lists, first one first;
   * absent or empty means the file's name without `.gguf`.
   */
  aliases?: readonly string[];
  /**
   * CPU threads for evaluation: the cores the agent gives this shard. Absent
   * means defaultThreads(): every core but one, capped at MAX_DEFAULT_THREADS;
   * never llama.cpp's own default, which oversubscribes small machines.
   */
  threads?: number;
  /**
   * Requests generated at once, each on its own sequence of one shared
   * context (decoded together in one batch). Absent means chosen from the
   * threads and the model's context: see sequenceLayout(). Requests beyond
   * it wait, up to `maxQueue`.
   */
  parallel?: number;
  /**
   * Requests that may wait for a free sequence; the next is refused with 429
   * LLMGW_ENGINE_BUSY and Retry-After. 0 means none wait: a request that
   * finds every sequence busy is refused at once. Absent means
   * DEFAULT_QUEUE_PER_SEQUENCE per sequence.
   */
  maxQueue?: number;
  /**
   * KV-cache cells in tokens, shared evenly by the `parallel` sequences (as
   * llama-server's --ctx-size is). Absent means the model's trained context,
   * capped at DEFAULT_SEQUENCE_CONTEXT_TOKENS, for each sequence.
   */
  contextTokens?: number;
  /**
   * Requests to /v1/* must carry `Authorization: Bearer <apiKey>` or get 401;
   * /health stays open for the agent's probe. Absent means no key is asked.
   */
  apiKey?: string;
  /** PEM certificate and key files: serve https (as llama-server's --ssl-cert-file/--ssl-key-file). Both or neither; absent means plain http. */
  tlsCert?: string;
  tlsKey?: string;
  /**
   * The engine writes its streams about once per this many ms in all: with k
   * streams at once each writes at most once per k intervals (up to 40 ms
   * apart, see StreamPacer), and tokens that come faster go out together
   * (vLLM's --stream-interval does the same by token count). 0 writes each
   * token as soon as it comes. Absent means DEFAULT_STREAM_INTERVAL_MS. The
   * first token is never held.
   */
  streamIntervalMs?: number;
  /** Where the engine writes its log lines; absent means stderr. */
  log?: (line: string) => void;
  /** Clock for `created` timestamps, in ms since the epoch; absent means Date.now. */
  nowMs?: () => number;
}

/** Without --threads, more than this many threads rarely helps one CPU engine. */
export const MAX_DEFAULT_THREADS = 16;
/**
 * Threads without --threads: every core but one, at least one. The engine's
 * own JavaScript (HTTP, JSON, the per-token callbacks node-llama-cpp waits
 * on) needs a core between tokens; with every core given to llama.cpp its
 * spinning threads and the main thread take turns, and on two cores a
 * stream ran at about 100 tokens/s with 2 threads against 850 with 1.
 */
export function defaultThreads(cores: number): number {
  return Math.max(1, Math.min(cores - 1, MAX_DEFAULT_THREADS));
}

/** Without --ctx-size, each sequence gets the model's context up to this many tokens. */
export const DEFAULT_SEQUENCE_CONTEXT_TOKENS = 4096;
/** A sequence smaller than this cannot hold a chat template and a reply. */
export const MIN_SEQUENCE_CONTEXT_TOKENS = 64;
/**
 * Without --parallel, at most this many sequences (llama-server's own
 * default slot count). On a CPU the batch's sequences share the threads,
 * so fewer threads than this get one sequence per thread.
 */
export const MAX_DEFAULT_PARALLEL = 4;
/** Without --max-queue, this many waiting requests per sequence before 429. */
export const DEFAULT_QUEUE_PER_SEQUENCE = 4;

export interface CompiledBuiltinEngineOptions {
  readonly modelPath: string;
  readonly host: string;
  readonly port: number;
  readonly modelNames: readonly string[];
  readonly threads: number;
  /** This machine's cores (available parallelism): with threads, what the default sequence count is drawn from. */
  readonly cores: number;
  /** Undefined: chosen once the model's context is known; see sequenceLayout(). */
  readonly parallel: number | undefined;
  /** Undefined: DEFAULT_QUEUE_PER_SEQUENCE per sequence; see sequenceLayout(). */
  readonly maxQueue: number | undefined;
  /** Absent until the model's metadata is read; see sequenceLayout(). */
  readonly contextTokens: number | undefined;
  /** Undefined: no key asked. */
  readonly apiKey: string | undefined;
  /** Undefined: plain http. Both are set or neither. */
  readonly tlsCert: string | undefined;
  readonly tlsKey: string | undefined;
  readonly streamIntervalMs: number;
  readonly log: (line: string) => void;
  readonly nowMs: () => number;
}

const BuiltinEngineOptionsSchema = z.strictObject({
  modelPath: z.string().min(1, 'name the GGUF file to serve'),
  host: z.string().min(1).optional(),
  port: z.number().int().min(0).max(65535).optional(),
  aliases: z.array(z.string().min(1, 'an alias cannot be empty')).optional(),
  threads: z.number().int().min(1).max(1024).optional(),
  parallel: z.number().int().min(1).max(256).optional(),
  maxQueue: z.number().int().min(0).max(1_000_000).optional(),
  contextTokens: z
    .number()
    .int()
    .min(MIN_SEQUENCE_CONTEXT_TOKENS)
    .max(16 * 1024 * 1024)
    .optional(),
  apiKey: z.string().min(1, 'an API key cannot be empty; leave it out for none').optional(),
  tlsCert: z.string().min(1).optional(),
  tlsKey: z.string().min(1).optional(),
  streamIntervalMs: z
    .number()
    .int()
    .min(0)
    .max(1000, 'more than a second between writes would look like a stalled stream')
    .optional(),
  log: z.custom<(line: string) => void>((v) => typeof v === 'function', 'must be a function').optional(),
  nowMs: z.custom<() => number>((v) => typeof v === 'function', 'must be a function').optional(),
});

export function compileBuiltinEngineOptions(options: BuiltinEngineOptions): CompiledBuiltinEngineOptions {
  const o = parseOptions(BuiltinEngineOptionsSchema, options, 'builtin engine options');
  const parallel = o.parallel ?? 1;
  if (o.contextTokens !== undefined && o.contextTokens / parallel < MIN_SEQUENCE_CONTEXT_TOKENS) {
    throw new ValidationError(
      'LLMGW_CONFIG_INVALID',
      [
        `a context of ${o.contextTokens} tokens split over ${parallel} sequences leaves ${Math.floor(o.contextTokens / parallel)} each; ` +
          `give at least ${MIN_SEQUENCE_CONTEXT_TOKENS * parallel} tokens or fewer parallel sequences`,
      ],
      'builtin engine options',
    );
  }
  if ((o.tlsCert === undefined) !== (o.tlsKey === undefined)) {
    throw new ValidationError(
      'LLMGW_CONFIG_INVALID',
      [
        `${o.tlsCert === undefined ? '--tls-key' : '--tls-cert'} is set without ${o.tlsCert === undefined ? '--tls-cert' : '--tls-key'}; serving TLS needs both the certificate and its key`,
      ],
      'builtin engine options',
    );
  }
  const aliases =
    o.aliases && o.aliases.length > 0 ? [...new Set(o.aliases)] : [basename(o.modelPath).replace(/\.gguf$/i, '')];
  return Object.freeze({
    modelPath: o.modelPath,
    host: o.host ?? '127.0.0.1',
    port: o.port ?? 0,
    modelNames: Object.freeze(aliases),
    threads: o.threads ?? defaultThreads(availableParallelism()),
    cores: availableParallelism(),
    parallel: o.parallel,
    maxQueue: o.maxQueue,
    contextTokens: o.contextTokens,
    apiKey: o.apiKey,
    tlsCert: o.tlsCert,
    tlsKey: o.tlsKey,
    streamIntervalMs: o.streamIntervalMs ?? DEFAULT_STREAM_INTERVAL_MS,
    log: options.log ?? ((line: string) => void process.stderr.write(`${line}\n`)),
    nowMs: options.nowMs ?? Date.now,
  });
}

/** How the context is cut up, once the model's trained context is known. */
export interface SequenceLayout {
  /** Sequences, each serving one request at a time. */
  readonly parallel: number;
  /** Tokens each sequence holds: prompt and reply together. */
  readonly perSequence: number;
  /** Requests that may wait for a sequence before the next is refused. */
  readonly maxQueue: number;
}

/**
 * Sequences, their size and the queue. Each sequence wants the model's
 * trained context (capped at DEFAULT_SEQUENCE_CONTEXT_TOKENS). Without
 * --parallel: one per thread up to MAX_DEFAULT_PARALLEL and, when --ctx-size
 * is given, only as many as it holds at that size (at least one), so a
 * small --ctx-size is not cut into sequences too short for a chat.
 */
export function sequenceLayout(options: CompiledBuiltinEngineOptions, trainedContextTokens: number): SequenceLayout {
  const trained = trainedContextTokens > 0 ? trainedContextTokens : DEFAULT_SEQUENCE_CONTEXT_TOKENS;
  const wanted = Math.max(MIN_SEQUENCE_CONTEXT_TOKENS, Math.min(trained, DEFAULT_SEQUENCE_CONTEXT_TOKENS));
  let parallel = options.parallel;
  if (parallel === undefined) {
    // Cores, not threads alone: the default leaves a core for the engine's own JavaScript, and a batch of two sequences on one thread still beats two requests in turn.
    const byCores = Math.min(MAX_DEFAULT_PARALLEL, Math.max(options.threads, options.cores));
    parallel =
      options.contextTokens === undefined
        ? byCores
        : Math.max(1, Math.min(byCores, Math.floor(options.contextTokens / wanted)));
  }
  const perSequence = options.contextTokens === undefined ? wanted : Math.floor(options.contextTokens / parallel);
  return { parallel, perSequence, maxQueue: options.maxQueue ?? DEFAULT_QUEUE_PER_SEQUENCE * parallel };
}
