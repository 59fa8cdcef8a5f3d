// A model definition: the schema an operator writes (YAML in the catalog file,
// JSON through the admin API) and the compiled form the rest of the control
// plane reads. The written form keeps the seed's snake_case field names; the
// compiled form carries units in its names.
import { z } from 'zod';
import { durationSchema } from '../../validation/durations.js';
import { parseSource, unsafeProfileEnvNames, unsafeProfileEnvProblem } from '../../protocol/index.js';
import { labelSelectorProblem } from '../placement/index.js';
import { parseDurationMs } from '../../units/index.js';
import type { ModelCapacity } from '../../gateway/ports/index.js';
import { endpointsOfEngines, SERVED_ENDPOINTS, type ServedEndpoint } from './endpoints.js';
import type { RemoteEndpoint } from './remote.js';
import {
  compileRemote,
  isLocalProfile,
  remoteEndpoints,
  REMOTE_ENGINE,
  RemoteSchema,
  remoteProblems,
  SpillSchema,
  withoutSecret,
} from './remote.js';
import type { SpillPolicy } from '../../gateway/ports/index.js';
import {
  compileTraffic,
  ShadowSchema,
  SplitBySchema,
  SplitSchema,
  trafficProblems,
  type CompiledTraffic,
} from './traffic.js';

export const ENGINES = ['vllm', 'llamacpp', 'sglang', 'builtin', 'sim'] as const;
export type EngineName = (typeof ENGINES)[number];

/** Engines that run on CPU unless told otherwise: their profiles default to `gpus: 0`. */
const CPU_FIRST_ENGINES: ReadonlySet<string> = new Set(['builtin', 'sim']);

const NAME_RE = /^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$/;
const nameSchema = z
  .string()
  .regex(NAME_RE, 'want 1-128 letters, digits, ".", "_", ":", "/" or "-", starting with a letter or digit');

/** A duration the scaler reads as a span of time (never a timer). */
const duration = durationSchema({ like: '90s or 5m', maxMs: Infinity });

export const ProfileSchema = z.strictObject({
  /** Shown in views and explain; absent = the engine's name (with a suffix if that repeats). */
  name: nameSchema.optional(),
  engine: z.enum([...ENGINES, REMOTE_ENGINE], { error: `want one of ${[...ENGINES, REMOTE_ENGINE].join(', ')}` }),
  /** For engine: remote only: where the model is served and how it is reached (remote.ts). */
  remote: RemoteSchema.optional(),
  /** GPUs per shard; 0 = a CPU profile. Absent = 0 for builtin and sim, 1 otherwise. */
  gpus: z.number().int().min(0).max(64).optional(),
  /** Nodes per replica; > 1 needs the nodes to share a fabric. */
  shards: z.number().int().min(1).max(64).default(1),
  /** Allowed GPU classes such as "h100-80gb"; absent or empty = any class. */
  gpu_classes: z.array(z.string().min(1)).default([]),
  /** GPU memory needed on each GPU, GiB; absent = no requirement beyond a free GPU. */
  gpu_memory_gb: z.number().positive().optional(),
  /** RAM needed on the node, GiB (CPU profiles); absent = unknown, not checked. */
  memory_gb: z.number().positive().optional(),
  /** Size of the weights on disk, GiB; absent = unknown: the disk check is skipped and explain says so. */
  disk_gb: z.number().positive().optional(),
  /** A label selector over node labels, e.g. `pool=a100` or `zone in (a,b)`; absent = every node. */
  pool: z.string().min(1).optional(),
  args: z.array(z.string()).default([]),
  env: z
    .record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'want an environment variable name'), z.string())
    .default({}),
});

export const ScalingSchema = z.strictObject({
  /** Replicas kept however idle; 0 = the model may have none, and one is started when a request for it arrives (needs max ≥ 1). */
  min: z.number().int().min(0).max(10_000).default(1),
  /** Absent = min (a fixed number of replicas: no scaling on demand). */
  max: z.number().int().min(0).max(10_000).optional(),
  /** A replica with nothing in flight for this long is drained and stopped (down to min); absent = never for idleness. */
  idle_timeout: duration.optional(),
  /** In-flight plus held requests per replica above which the model scales up (to ceil(demand / target)). */
  target_inflight: z.number().int().min(1).max(100_000).default(8),
  /** How long demand must stay above target before replicas are added; absent = 30s. Short bursts inside it add nothing. */
  window: duration.optional(),
  /** After a scale-up, no replica is stopped for idleness for this long; absent = 5m. */
  cooldown: duration.optional(),
  /**
   * Replicas demand from batch lines (src/control/batches) may scale the model up to; absent = what already runs
   * (batch lines use idle places but never start a replica). At most max.
   */
  batch_max_replicas: z.number().int().min(0).max(10_000).optional(),
});

/** `scaling.window` when absent: long enough that a burst does not start replicas that would be idle by the time they are ready. */
export const DEFAULT_SCALING_WINDOW_MS = 30_000;
/** `scaling.cooldown` when absent: a scale-up is not undone by idleness within it (new replicas are idle until traffic spreads to them). */
export const DEFAULT_SCALING_COOLDOWN_MS = 5 * 60_000;

export const ModelSchema = z.strictObject({
  name: nameSchema,
  aliases: z.array(nameSchema).default([]),
  /** Where the weights come from; absent only for an engine: remote model, which runs nothing here. */
  source: z.string().min(1).optional(),
  scaling: ScalingSchema.default({ min: 1, target_inflight: 8 }),
  /** Models to try, in order, when this one cannot serve. */
  fallbacks: z.array(nameSchema).default([]),
  /** In order of preference; placement tries each in turn. */
  profiles: z.array(ProfileSchema).min(1, 'a model needs at least one profile'),
  /**
   * How the router picks a replica: least-load (by the engines' reported
   * queues, running requests and KV use, and the router's own sends),
   * prefix affinity on top of that for engines with a prefix cache,
   * least-inflight (the router's own in-flight count only, the choice
   * before engines were read), or prefix-cache (the default: by what each
   * engine's KV events say it holds, weighed against least-load's score;
   * exactly least-load for a model whose engines publish nothing).
   */
  routing: z.enum(['least-load', 'prefix', 'least-inflight', 'prefix-cache']).default('prefix-cache'),
  /** While no replica is ready, serve the first fallback at once instead of holding the request. */
  fallback_while_cold: z.boolean().default(false),
  /** Where requests go when the model's own replicas cannot take them in time (remote.ts); absent = nowhere. */
  spill: SpillSchema.optional(),
  /** Each request for this model goes to one of these by weight (a canary; traffic.ts); absent = its own replicas serve it. */
  split: SplitSchema.optional(),
  /** What keeps a caller on one side of the split: request (absent), key or user. */
  split_by: SplitBySchema.optional(),
  /** A share of its requests copied to a candidate, answers compared and discarded; absent = none copied. */
  shadow: ShadowSchema.optional(),
  /**
   * The engine endpoints the model serves (chat, embeddings, rerank, …); the router refuses the rest with a 400
   * naming these. Absent = what its profiles' engines can serve (ENGINE_ENDPOINTS).
   */
  endpoints: z
    .array(z.enum(SERVED_ENDPOINTS, { error: `want one of ${SERVED_ENDPOINTS.join(', ')}` }))
    .min(
      1,
      `a model serves at least one endpoint (${SERVED_ENDPOINTS.join(', ')}); leave endpoints out for what its engines serve`,
    )
    .optional(),
  /**
   * US dollars per million tokens, for what usage costs and money budgets
   * (src/control/budgets); absent = derived from the GPU-hours its replicas
   * hold at the control plane's gpu_prices, or no price where none is set.
   */
  price: z
    .strictObject({
      input_per_million: z.number().min(0).max(1_000_000),
      output_per_million: z.number().min(0).max(1_000_000),
    })
    .optional(),
  /** What the router refuses before an engine sees it; each absent = only the router's own caps apply. */
  limits: z
    .strictObject({
      /** The model's context window in tokens (vLLM's --max-model-len): a prompt plus max_tokens must fit. */
      context_tokens: z.number().int().min(1).max(100_000_000).optional(),
      /** Largest max_tokens a request may ask for. */
      max_tokens: z.number().int().min(1).max(100_000_000).optional(),
      /** Largest n (choices per request). */
      max_n: z.number().int().min(1).max(10_000).optional(),
    })
    .default({}),
  /**
   * What one replica serves at once before the gateway queues requests by
   * priority and fair share across teams instead of sending them on; absent =
   * never queued (the engines' own queues take what comes).
   */
  capacity: z
    .strictObject({
      /** Requests in flight per ready replica, from this gateway; the engine's --max-num-seqs is a good start. */
      per_replica: z.number().int().min(1).max(100_000),
      /** How long a request may wait for a place before a 503; absent = 30s. */
      queue_timeout: durationSchema({ like: '30s or 2m' }).optional(),
      /** Requests one team may have waiting for the model before the next is refused with a 429; absent = 256. */
      queue_per_team: z.number().int().min(1).max(1_000_000).optional(),
    })
    .optional(),
});

/** `capacity.queue_timeout` when absent. */
export const DEFAULT_QUEUE_TIMEOUT_MS = 30_000;
/** `capacity.queue_per_team` when absent. */
export const DEFAULT_QUEUE_PER_TEAM = 256;

export type ModelDefinition = z.input<typeof ModelSchema>;

export interface Profile {
  readonly name: string;
  readonly engine: EngineName;
  readonly gpus: number;
  readonly shards: number;
  readonly gpuClasses: readonly string[];
  readonly gpuMemoryGiB: number | null;
  readonly memoryGiB: number | null;
  readonly diskGiB: number | null;
  readonly pool: string | null;
  readonly args: readonly string[];
  readonly env: Readonly<Record<string, string>>;
}

export interface Model extends CompiledTraffic {
  readonly name: string;
  readonly aliases: readonly string[];
  readonly source: string;
  readonly scaling: {
    readonly min: number;
    readonly max: number;
    /** Null = idleness alone never stops a replica. */
    readonly idleTimeoutMs: number | null;
    readonly targetInflight: number;
    /** How long demand stays above target before a scale-up; never 0 unless written `0s`. */
    readonly windowMs: number;
    /** No scale-down for idleness this long after a scale-up. */
    readonly cooldownMs: number;
    /** Replicas batch demand may scale up to; absent = what already runs (batch lines never start one). */
    readonly batchMaxReplicas?: number;
  };
  readonly fallbacks: readonly string[];
  /** The profiles llmgw runs, in order; empty for an engine: remote model. */
  readonly profiles: readonly Profile[];
  /** An engine: remote model's endpoint (remote.ts); absent = a model llmgw runs. */
  readonly remote?: RemoteEndpoint;
  /** Where its requests spill when its replicas are full or cold (remote.ts); absent = never. */
  readonly spill?: SpillPolicy;
  readonly routing: 'least-load' | 'prefix' | 'least-inflight' | 'prefix-cache';
  readonly fallbackWhileCold: boolean;
  /** The engine endpoints the router lets through to it (see endpoints.ts), declared or from its engines. */
  readonly endpoints: readonly ServedEndpoint[];
  /** Null = not declared: only the router's own caps apply. */
  readonly limits: {
    readonly contextTokens: number | null;
    readonly maxTokens: number | null;
    readonly maxN: number | null;
  };
  /** Absent = never queued by the gateway. */
  readonly capacity?: ModelCapacity;
  /** Where the definition came from: the catalog file cannot be changed through the API. */
  readonly origin: 'file' | 'store';
  /** The definition as written, with defaults filled: what the store keeps and the API returns. */
  readonly definition: z.output<typeof ModelSchema>;
}

/** Problems of one definition on its own (not against other models), as sentences. */
export interface DefinitionChecks {
  /** Accept http:// sources (tests on loopback only). */
  allowHttp?: boolean;
  /** Accept loader and interpreter hooks (LD_PRELOAD, NODE_OPTIONS, …) in a profile's env; absent = refused. */
  allowUnsafeProfileEnv?: boolean;
}

/** How the control plane's operator turns the profile env check off, for the refusal's last words. */
export const ALLOW_UNSAFE_PROFILE_ENV_SWITCH = 'start the control plane with allow_unsafe_profile_env: true';

export function definitionProblems(def: z.output<typeof ModelSchema>, options: DefinitionChecks = {}): string[] {
  const problems: string[] = [];
  const source = def.source === undefined ? null : parseSource(def.source, options);
  if (typeof source === 'string') problems.push(`source: ${source}`);
  problems.push(...remoteProblems(def));
  const max = def.scaling.max ?? def.scaling.min;
  if (def.scaling.min > max) problems.push(`scaling: min (${def.scaling.min}) is greater than max (${max})`);
  const batchMax = def.scaling.batch_max_replicas;
  if (batchMax !== undefined && batchMax > max)
    problems.push(
      `scaling: batch_max_replicas (${batchMax}) is greater than max (${max}); raise scaling.max or lower batch_max_replicas`,
    );
  const seen = new Set<string>();
  for (const alias of def.aliases) {
    if (alias === def.name) problems.push(`aliases: "${alias}" is the model's own name`);
    else if (seen.has(alias)) problems.push(`aliases: "${alias}" is listed twice`);
    seen.add(alias);
  }
  const profileNames = new Set<string>();
  def.profiles.forEach((p, i) => {
    if (p.name && profileNames.has(p.name))
      problems.push(`profiles[${i}].name: "${p.name}" is used by an earlier profile`);
    if (p.name) profileNames.add(p.name);
    const gpus = p.gpus ?? (CPU_FIRST_ENGINES.has(p.engine) ? 0 : 1);
    if (gpus === 0 && (p.gpu_classes.length > 0 || p.gpu_memory_gb !== undefined)) {
      problems.push(`profiles[${i}]: gpu_classes and gpu_memory_gb need gpus of at least 1 (this is a CPU profile)`);
    }
    const selectorProblem = p.pool === undefined ? null : labelSelectorProblem(p.pool);
    if (selectorProblem) problems.push(`profiles[${i}].pool: ${selectorProblem}`);
    if (p.shards > 1 && p.engine === 'builtin')
      problems.push(`profiles[${i}]: the builtin engine runs on one node; set shards to 1`);
    if (!options.allowUnsafeProfileEnv) {
      for (const name of unsafeProfileEnvNames(p.env))
        problems.push(`profiles[${i}].env.${name}: ${unsafeProfileEnvProblem(name, ALLOW_UNSAFE_PROFILE_ENV_SWITCH)}`);
    }
  });
  if (def.endpoints) {
    const twice = def.endpoints.filter((e, i) => def.endpoints!.indexOf(e) !== i);
    if (twice.length) problems.push(`endpoints: ${[...new Set(twice)].join(', ')} listed twice`);
  }
  if (def.fallbacks.includes(def.name)) problems.push(`fallbacks: a model cannot fall back to itself`);
  problems.push(...trafficProblems(def));
  const { context_tokens: ctx, max_tokens: maxTokens } = def.limits;
  if (ctx !== undefined && maxTokens !== undefined && maxTokens >= ctx) {
    problems.push(`limits: max_tokens (${maxTokens}) leaves no room for a prompt in context_tokens (${ctx})`);
  }
  return problems;
}

export function compileModel(def: z.output<typeof ModelSchema>, origin: Model['origin']): Model {
  const used = new Set<string>();
  const remote = compileRemote(def);
  const profiles = def.profiles.filter(isLocalProfile).map((p, i): Profile => {
    let name = p.name ?? p.engine;
    if (!p.name && used.has(name)) name = `${p.engine}-${i + 1}`;
    used.add(name);
    return {
      name,
      engine: p.engine as EngineName,
      gpus: p.gpus ?? (CPU_FIRST_ENGINES.has(p.engine) ? 0 : 1),
      shards: p.shards,
      gpuClasses: p.gpu_classes,
      gpuMemoryGiB: p.gpu_memory_gb ?? null,
      memoryGiB: p.memory_gb ?? null,
      diskGiB: p.disk_gb ?? null,
      pool: p.pool ?? null,
      args: p.args,
      env: p.env,
    };
  });
  const idle = def.scaling.idle_timeout === undefined ? null : (parseDurationMs(def.scaling.idle_timeout) as number);
  return Object.freeze({
    name: def.name,
    aliases: def.aliases,
    source: def.source ?? '',
    scaling: {
      // A remote model has no replica of llmgw's to want.
      min: remote.remote ? 0 : def.scaling.min,
      max: remote.remote ? 0 : (def.scaling.max ?? def.scaling.min),
      idleTimeoutMs: idle,
      targetInflight: def.scaling.target_inflight,
      windowMs:
        def.scaling.window === undefined ? DEFAULT_SCALING_WINDOW_MS : (parseDurationMs(def.scaling.window) as number),
      cooldownMs:
        def.scaling.cooldown === undefined
          ? DEFAULT_SCALING_COOLDOWN_MS
          : (parseDurationMs(def.scaling.cooldown) as number),
      ...(def.scaling.batch_max_replicas === undefined || remote.remote
        ? {}
        : { batchMaxReplicas: def.scaling.batch_max_replicas }),
    },
    fallbacks: def.fallbacks,
    ...compileTraffic(def),
    profiles,
    routing: def.routing,
    fallbackWhileCold: def.fallback_while_cold,
    endpoints: def.endpoints
      ? SERVED_ENDPOINTS.filter((e) => def.endpoints!.includes(e))
      : remote.remote
        ? remoteEndpoints(remote.remote.api)
        : endpointsOfEngines(profiles.map((p) => p.engine)),
    limits: {
      contextTokens: def.limits.context_tokens ?? null,
      maxTokens: def.limits.max_tokens ?? null,
      maxN: def.limits.max_n ?? null,
    },
    ...(def.capacity
      ? {
          capacity: {
            perReplica: def.capacity.per_replica,
            queueTimeoutMs:
              def.capacity.queue_timeout === undefined
                ? DEFAULT_QUEUE_TIMEOUT_MS
                : (parseDurationMs(def.capacity.queue_timeout) as number),
            queuePerTenant: def.capacity.queue_per_team ?? DEFAULT_QUEUE_PER_TEAM,
          },
        }
      : {}),
    ...remote,
    origin,
    // A remote's api_key is kept and shown as `set`: the definition is what the store, the audit log and the API hold.
    definition: withoutSecret(def),
  });
}
