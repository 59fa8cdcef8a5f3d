// llama.cpp: `llama-server` on rank 0, and for a replica over several nodes,
// `rpc-server` on every other rank, which lends its GPUs to the head over the
// fabric (`--rpc host:port,…`). The profile's args are llama-server's and go
// only to rank 0. Only flags ENGINES.md confirms in every build
// are used: -m, --host, --port, --alias (one name: a comma list is recent
// builds only; the router resolves aliases), a numeric -ngl (works where
// `auto` is the default too), --metrics, --rpc. `--fit off` is left to the
// profile's args, because older builds refuse it. The API key goes in
// LLAMA_API_KEY, which common/arg.cpp binds to --api-key (set_env); a build
// old enough that its options read no variables would serve without a key.
import {
  apiKeyEnv,
  checkSingleNode,
  checkedPeers,
  gpuEnv,
  hostPort,
  httpReadiness,
  isMultiNode,
  launchError,
  mergeEnv,
  probeHost,
  tlsArgs,
} from './launch-parts.js';
import { findGgufFile } from './gguf-file.js';
import type {
  CompiledEngineAdapterOptions,
  EngineAdapter,
  EngineLaunchPlan,
  ShardLaunch,
  ShardPeer,
} from './shard-launch.js';

/** rpc-server's default port, used when a rank's peer entry names none. */
export const RPC_SERVER_DEFAULT_PORT = 50052;
/** -ngl high enough to offload every layer of any model. */
const ALL_LAYERS = '999';

export function llamacppAdapter(options: CompiledEngineAdapterOptions): EngineAdapter {
  return {
    engine: 'llamacpp',
    // mmap load and warmup are seconds to a minute; large models over RPC copy tensors first.
    defaultStartTimeoutMs: 5 * 60_000,
    // An rpc-server listens on its peer port, which rank 0 must already know.
    usesPort: (launch) => launch.rank === 0,
    plan: (launch) => planLlamacpp(options, launch),
  };
}

function planLlamacpp(options: CompiledEngineAdapterOptions, launch: ShardLaunch): EngineLaunchPlan {
  const { gpus } = launch.profile;
  if (gpus > 0 && launch.gpuIndices.length !== gpus) {
    throw launchError(
      'llamacpp',
      launch,
      `the profile runs on ${gpus} GPUs per shard but ${launch.gpuIndices.length} were given (${launch.gpuIndices.join(',') || 'none'})`,
    );
  }
  const multiNode = isMultiNode(launch);
  let peers: readonly ShardPeer[] = [];
  if (multiNode) peers = checkedPeers('llamacpp', launch);
  else checkSingleNode('llamacpp', launch);
  const env = mergeEnv('llamacpp', options, gpuEnv(launch), launch);

  if (launch.rank > 0) {
    const self = peers[launch.rank]!;
    const port = self.port ?? RPC_SERVER_DEFAULT_PORT;
    return {
      // None of the profile's args: they are llama-server's, which rpc-server
      // refuses ("unknown argument") or reads otherwise (-c is the context
      // size there and the tensor cache here).
      argv: [options.rpcServerExecutable, '-H', self.address, '-p', String(port)],
      env,
      // rpc-server speaks no HTTP; accepting a connection is all it can tell.
      readiness: { kind: 'tcp', host: probeHost(self.address), port },
      servesApi: false,
      // It accepts no connection while it serves the head's, so once ready a probe would only fill its queue.
      probeWhileReady: false,
    };
  }

  const gguf = (options.resolveGguf ?? findGgufFile)(launch.weightsPath);
  // With no GPU of its own, the head still offloads every layer when other ranks lend theirs.
  const layers = gpus > 0 || multiNode ? ALL_LAYERS : '0';
  const rpc = peers.slice(1).map((peer) => hostPort(peer.address, peer.port ?? RPC_SERVER_DEFAULT_PORT));
  return {
    argv: [
      options.llamaServerExecutable,
      '-m',
      gguf,
      '--host',
      launch.host,
      '--port',
      String(launch.port),
      '--alias',
      launch.model.name,
      '-ngl',
      layers,
      '--metrics',
      ...tlsArgs('llamacpp', options),
      ...(rpc.length > 0 ? ['--rpc', rpc.join(',')] : []),
      ...launch.profile.args,
    ],
    // The replica's secret as LLAMA_API_KEY, not --api-key: out of the world-readable command line.
    env: { ...env, ...apiKeyEnv(launch, 'LLAMA_API_KEY') },
    readiness: httpReadiness(options, launch.host, launch.port),
    servesApi: true,
    // llama-server publishes no KV events; its /slots (on unless --no-slots) shows each slot's cached prompt.
    ...(launch.profile.args.includes('--no-slots')
      ? {}
      : { kvEvents: { kind: 'slots', blockSize: LLAMACPP_SLOTS_BLOCK_SIZE } as const }),
  };
}

/**
 * Tokens per block when a llama.cpp slot's prompt is cut for the prefix
 * index. llama.cpp has no blocks (a slot reuses any common prefix); 16 is
 * vLLM's block size, fine enough that a shared prefix is seldom cut short.
 */
export const LLAMACPP_SLOTS_BLOCK_SIZE = 16;
