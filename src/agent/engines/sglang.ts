// SGLang (`python3 -m sglang.launch_server`). Several nodes run the same
// command with only --node-rank differing; tensor parallel spans all of
// them (--tp-size = GPUs per shard × shards) and they meet at rank 0's
// fabric address (--dist-init-addr). Ranks ≥ 1 serve only a dummy /health on
// --port, which is what readiness asks; requests go to rank 0.
import { apiKeyArgs, checkSingleNode, checkedPeers, gpuEnv, hostPort, httpReadiness, isMultiNode, launchError, mergeEnv, tlsArgs } from './launch-parts.js';
import type { CompiledEngineAdapterOptions, EngineAdapter, EngineLaunchPlan, ShardLaunch } from './shard-launch.js';

/**
 * The rendezvous port when rank 0's peer entry names none. SGLang has no
 * default for --dist-init-addr; this is the port its documentation uses.
 */
export const SGLANG_DEFAULT_DIST_INIT_PORT = 50000;

export function sglangAdapter(options: CompiledEngineAdapterOptions): EngineAdapter {
  return {
    engine: 'sglang',
    // Load, then a warmup request that SGLang itself allows 600 s; multi-node adds rendezvous.
    defaultStartTimeoutMs: 15 * 60_000,
    usesPort: () => true,
    plan: (launch) => planSglang(options, launch),
  };
}

function planSglang(options: CompiledEngineAdapterOptions, launch: ShardLaunch): EngineLaunchPlan {
  const { gpus, shards } = launch.profile;
  if (gpus > 0 && launch.gpuIndices.length !== gpus) {
    throw launchError('sglang', launch, `the profile runs on ${gpus} GPUs per shard but ${launch.gpuIndices.length} were given (${launch.gpuIndices.join(',') || 'none'})`);
  }
  const multiNode = isMultiNode(launch);
  const argv = [
    options.pythonExecutable, '-m', 'sglang.launch_server',
    '--model-path', launch.weightsPath,
    // SGLang takes one served name; aliases are resolved by the router.
    '--served-model-name', launch.model.name,
    '--host', launch.host,
    '--port', String(launch.port),
    '--tp-size', String(Math.max(1, gpus) * (multiNode ? shards : 1)),
    '--enable-metrics',
  ];
  if (multiNode) {
    const head = checkedPeers('sglang', launch)[0]!;
    argv.push('--nnodes', String(shards), '--node-rank', String(launch.rank), '--dist-init-addr', hostPort(head.address, head.port ?? SGLANG_DEFAULT_DIST_INIT_PORT));
  } else {
    checkSingleNode('sglang', launch);
  }
  // Ranks ≥ 1 serve only a dummy /health, which SGLang leaves open anyway; whether that
  // server would take TLS is unconfirmed, so it stays plain http and is probed so.
  if (launch.rank === 0) argv.push(...apiKeyArgs(launch), ...tlsArgs('sglang', options));
  return {
    argv: [...argv, ...launch.profile.args],
    env: mergeEnv('sglang', options, gpuEnv(launch), launch),
    readiness: httpReadiness(options, launch.host, launch.port, launch.rank === 0),
    servesApi: launch.rank === 0,
  };
}
