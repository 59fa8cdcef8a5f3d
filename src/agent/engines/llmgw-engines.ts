// The two engines that ship with llmgw, run as `node bin/llmgw.js engine
// sim|builtin …` so that each is its own process (a crash or a hung model
// takes down one engine, never the agent) and the supervisor treats them as
// it treats vLLM. Together because both run through the same executable.
import { ENGINE_API_KEY_ENV } from '../../engine/api-key.js';
import { LlmgwError } from '../../errors/index.js';
import { findGgufFile } from './gguf-file.js';
import {
  apiKeyEnv,
  checkSingleNode,
  checkedPeers,
  gpuEnv,
  httpReadiness,
  isMultiNode,
  launchError,
  mergeEnv,
  tlsArgs,
} from './launch-parts.js';
import type {
  CompiledEngineAdapterOptions,
  EngineAdapter,
  EngineLaunchPlan,
  EngineName,
  ShardLaunch,
} from './shard-launch.js';

function llmgwCommand(options: CompiledEngineAdapterOptions, engine: EngineName): [string, string] {
  if (options.llmgwBin === undefined || options.llmgwBin === '') {
    throw new LlmgwError(
      'LLMGW_CONFIG_INVALID',
      `the ${engine} engine runs as \`llmgw engine ${engine}\`; pass llmgwBin (bin/llmgw.js of this install) to the engine adapters`,
    );
  }
  return [options.nodePath, options.llmgwBin];
}

/**
 * The sim engine. Profile args are sim flags (`--ttft-ms 5`). A multi-node
 * profile runs a sim on every rank, so fleet simulation exercises the same
 * start, readiness and crash paths; only rank 0 takes requests.
 */
export function simAdapter(options: CompiledEngineAdapterOptions): EngineAdapter {
  const command = llmgwCommand(options, 'sim');
  return {
    engine: 'sim',
    defaultStartTimeoutMs: 60_000,
    usesPort: () => true,
    plan: (launch) => planSim(options, command, launch),
  };
}

function planSim(
  options: CompiledEngineAdapterOptions,
  command: [string, string],
  launch: ShardLaunch,
): EngineLaunchPlan {
  if (isMultiNode(launch)) checkedPeers('sim', launch);
  else checkSingleNode('sim', launch);
  const names = [launch.model.name, ...launch.model.aliases].flatMap((name) => ['--model', name]);
  return {
    argv: [
      ...command,
      'engine',
      'sim',
      '--host',
      launch.host,
      '--port',
      String(launch.port),
      ...names,
      ...tlsArgs('sim', options),
      ...launch.profile.args,
    ],
    // The sim uses no GPU, but records CUDA_VISIBLE_DEVICES, so fleet tests can check which GPUs a shard was given.
    // The replica's secret as LLMGW_ENGINE_API_KEY, out of the world-readable command line. Every rank's
    // sim answers /v1/*, so every rank asks it, though requests go to rank 0 only.
    env: { ...mergeEnv('sim', options, gpuEnv(launch), launch), ...apiKeyEnv(launch, ENGINE_API_KEY_ENV) },
    readiness: httpReadiness(options, launch.host, launch.port),
    servesApi: launch.rank === 0,
    // A sim given a simulated KV cache (--kv-cache-blocks N) streams what it holds on GET /kv-events.
    ...(launch.rank === 0 && simKvCacheOn(launch.profile.args)
      ? { kvEvents: { kind: 'http', path: '/kv-events' } as const }
      : {}),
  };
}

/** True when the sim flags turn its simulated KV cache on (the last --kv-cache-blocks wins, as the sim reads it). */
function simKvCacheOn(args: readonly string[]): boolean {
  let blocks = 0;
  args.forEach((arg, i) => {
    if (arg === '--kv-cache-blocks') blocks = Number(args[i + 1]);
    else if (arg.startsWith('--kv-cache-blocks=')) blocks = Number(arg.slice('--kv-cache-blocks='.length));
  });
  return Number.isFinite(blocks) && blocks > 0;
}

/** The builtin CPU engine over one GGUF file. One node only: it has no way to meet peers. */
export function builtinAdapter(options: CompiledEngineAdapterOptions): EngineAdapter {
  const command = llmgwCommand(options, 'builtin');
  return {
    engine: 'builtin',
    defaultStartTimeoutMs: 60_000,
    usesPort: () => true,
    plan: (launch) => planBuiltin(options, command, launch),
  };
}

function planBuiltin(
  options: CompiledEngineAdapterOptions,
  command: [string, string],
  launch: ShardLaunch,
): EngineLaunchPlan {
  if (isMultiNode(launch)) {
    throw launchError(
      'builtin',
      launch,
      `the builtin engine runs on one node; the profile asks for ${launch.profile.shards} shards`,
    );
  }
  checkSingleNode('builtin', launch);
  if (launch.threads !== undefined && (!Number.isInteger(launch.threads) || launch.threads < 1)) {
    throw launchError('builtin', launch, `threads must be a whole number of cores, 1 or more; got ${launch.threads}`);
  }
  const gguf = (options.resolveGguf ?? findGgufFile)(launch.weightsPath);
  const names = [launch.model.name, ...launch.model.aliases].flatMap((name) => ['--alias', name]);
  return {
    argv: [
      ...command,
      'engine',
      'builtin',
      '--model',
      gguf,
      '--host',
      launch.host,
      '--port',
      String(launch.port),
      ...names,
      ...(launch.threads === undefined ? [] : ['--threads', String(launch.threads)]),
      ...tlsArgs('builtin', options),
      ...launch.profile.args,
    ],
    // A CPU engine: an empty CUDA_VISIBLE_DEVICES keeps it off GPUs other shards hold.
    // The replica's secret as LLMGW_ENGINE_API_KEY, out of the world-readable command line.
    env: { ...mergeEnv('builtin', options, gpuEnv(launch), launch), ...apiKeyEnv(launch, ENGINE_API_KEY_ENV) },
    readiness: httpReadiness(options, launch.host, launch.port),
    servesApi: true,
    // Its sequences' cached prefixes, streamed on GET /kv-events whatever the flags: there is nothing to turn on.
    kvEvents: { kind: 'http', path: '/kv-events' },
  };
}
