// vLLM (`vllm serve`). One node: tensor parallel over the shard's GPUs. Several
// nodes: vLLM's own multiprocessing backend, not Ray (no Ray cluster to run
// beside it): every node runs `vllm serve` with --nnodes/--node-rank and the
// head's fabric address, tensor parallel inside a node and pipeline parallel
// across nodes (world = TP × PP), and ranks ≥ 1 run --headless with no API.
//
// Versions (ENGINES.md): multi-node with the mp backend (--nnodes, --node-rank,
// --master-addr, --master-port; PR #23691) first shipped around vLLM v0.11.1,
// unconfirmed; --headless around v0.9. An older vLLM refuses these flags at
// start, which the supervisor reports with the engine's last log lines.
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
  zmqKvEventsArgs,
  zmqKvEventsPorts,
} from './launch-parts.js';
import type { CompiledEngineAdapterOptions, EngineAdapter, EngineLaunchPlan, ShardLaunch } from './shard-launch.js';

/** vLLM's --master-port default, used when rank 0's peer entry names no port. */
export const VLLM_DEFAULT_MASTER_PORT = 29501;

/** The agent's collector speaks OTLP over HTTP: vLLM's exporter is told so (it picks gRPC by default). */
function otlpProtocolEnv(options: CompiledEngineAdapterOptions): Record<string, string> {
  return options.otlpTracesEndpoint ? { OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/protobuf' } : {};
}

export function vllmAdapter(options: CompiledEngineAdapterOptions): EngineAdapter {
  return {
    engine: 'vllm',
    // Load, memory profiling and CUDA graph capture; multi-node adds NCCL rendezvous.
    defaultStartTimeoutMs: 15 * 60_000,
    usesPort: (launch) => launch.rank === 0,
    kvEventsPorts: zmqKvEventsPorts,
    plan: (launch) => planVllm(options, launch),
  };
}

function planVllm(options: CompiledEngineAdapterOptions, launch: ShardLaunch): EngineLaunchPlan {
  const { gpus } = launch.profile;
  if (gpus > 0 && launch.gpuIndices.length !== gpus) {
    throw launchError(
      'vllm',
      launch,
      `the profile runs on ${gpus} GPUs per shard but ${launch.gpuIndices.length} were given (${launch.gpuIndices.join(',') || 'none'})`,
    );
  }
  // A CPU build of vLLM still wants a tensor-parallel size of at least 1.
  const parallel = ['--tensor-parallel-size', String(Math.max(1, gpus))];
  const serve = [options.vllmExecutable, 'serve', launch.weightsPath];
  const api = [
    '--served-model-name',
    launch.model.name,
    ...launch.model.aliases,
    '--host',
    launch.host,
    '--port',
    String(launch.port),
    ...tlsArgs('vllm', options),
    // vLLM's own spans, parented on the traceparent each request carries; its exporter speaks gRPC unless told otherwise.
    ...(options.otlpTracesEndpoint ? ['--otlp-traces-endpoint', options.otlpTracesEndpoint] : []),
  ];
  // The replica's secret as VLLM_API_KEY, not --api-key: out of the world-readable command line.
  const key = apiKeyEnv(launch, 'VLLM_API_KEY');
  const httpReady = httpReadiness(options, launch.host, launch.port);
  // Before the profile's args, which an operator may use to override anything; only rank 0 has ports for it.
  const kv = zmqKvEventsArgs('vllm', launch);
  const events = kv === null ? {} : { kvEvents: kv.kvEvents };

  if (!isMultiNode(launch)) {
    checkSingleNode('vllm', launch);
    return {
      argv: [...serve, ...api, ...parallel, ...(kv?.args ?? []), ...launch.profile.args],
      env: { ...mergeEnv('vllm', options, gpuEnv(launch), launch), ...key, ...otlpProtocolEnv(options) },
      readiness: httpReady,
      servesApi: true,
      ...events,
    };
  }

  const peers = checkedPeers('vllm', launch);
  const head = peers[0]!;
  const self = peers[launch.rank]!;
  const cluster = [
    '--pipeline-parallel-size',
    String(launch.profile.shards),
    // mp is named outright: some releases picked Ray by default for multi-node.
    '--distributed-executor-backend',
    'mp',
    '--nnodes',
    String(launch.profile.shards),
    '--node-rank',
    String(launch.rank),
    '--master-addr',
    head.address,
    '--master-port',
    String(head.port ?? VLLM_DEFAULT_MASTER_PORT),
  ];
  // On a machine with several NICs vLLM may pick the wrong one; the fabric address is the right one (ENGINES.md, pitfalls).
  const env = mergeEnv('vllm', options, { ...gpuEnv(launch), VLLM_HOST_IP: self.address }, launch);
  if (launch.rank === 0) {
    return {
      argv: [...serve, ...api, ...parallel, ...cluster, ...(kv?.args ?? []), ...launch.profile.args],
      env: { ...env, ...key, ...otlpProtocolEnv(options) },
      readiness: httpReady,
      servesApi: true,
      ...events,
    };
  }
  return {
    argv: [...serve, ...parallel, ...cluster, '--headless', ...launch.profile.args],
    env,
    readiness: { kind: 'none' },
    servesApi: false,
  };
}
