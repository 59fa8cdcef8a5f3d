// SGLang (`python3 -m sglang.launch_server`). Several nodes run the same
// command with only --node-rank differing; tensor parallel spans all of
// them (--tp-size = GPUs per shard × shards) and they meet at rank 0's
// fabric address (--dist-init-addr). Ranks ≥ 1 serve only a dummy /health on
// --port, which is what readiness asks; requests go to rank 0.
//
// The API key: SGLang reads it from no variable (ServerArgs.api_key has no
// environment binding), only from --api-key or from the YAML file named by
// --config, whose keys are its flags (server_args_config_parser.py merges
// the file into argv inside the process, so the key never reaches
// /proc/PID/cmdline). The supervisor writes that file 0600 under the agent's
// secrets directory. A SGLang too old to know --config refuses to start
// ("unrecognized arguments"), which the supervisor reports: it never serves
// without its key. First release with --config unconfirmed (?).
import { join } from 'node:path';
import {
  checkSingleNode,
  checkedPeers,
  gpuEnv,
  hostPort,
  httpReadiness,
  isMultiNode,
  launchError,
  mergeEnv,
  shardFileName,
  tlsArgs,
  zmqKvEventsArgs,
  zmqKvEventsPorts,
} from './launch-parts.js';
import type {
  CompiledEngineAdapterOptions,
  EngineAdapter,
  EngineFile,
  EngineLaunchPlan,
  ShardLaunch,
} from './shard-launch.js';

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
    kvEventsPorts: zmqKvEventsPorts,
    plan: (launch) => planSglang(options, launch),
  };
}

function planSglang(options: CompiledEngineAdapterOptions, launch: ShardLaunch): EngineLaunchPlan {
  const { gpus, shards } = launch.profile;
  if (gpus > 0 && launch.gpuIndices.length !== gpus) {
    throw launchError(
      'sglang',
      launch,
      `the profile runs on ${gpus} GPUs per shard but ${launch.gpuIndices.length} were given (${launch.gpuIndices.join(',') || 'none'})`,
    );
  }
  const multiNode = isMultiNode(launch);
  const argv = [
    options.pythonExecutable,
    '-m',
    'sglang.launch_server',
    '--model-path',
    launch.weightsPath,
    // SGLang takes one served name; aliases are resolved by the router.
    '--served-model-name',
    launch.model.name,
    '--host',
    launch.host,
    '--port',
    String(launch.port),
    '--tp-size',
    String(Math.max(1, gpus) * (multiNode ? shards : 1)),
    '--enable-metrics',
  ];
  if (multiNode) {
    const head = checkedPeers('sglang', launch)[0]!;
    argv.push(
      '--nnodes',
      String(shards),
      '--node-rank',
      String(launch.rank),
      '--dist-init-addr',
      hostPort(head.address, head.port ?? SGLANG_DEFAULT_DIST_INIT_PORT),
    );
  } else {
    checkSingleNode('sglang', launch);
  }
  // Ranks ≥ 1 serve only a dummy /health, which SGLang leaves open anyway; whether that
  // server would take TLS is unconfirmed, so it stays plain http and is probed so.
  const keyFile = launch.rank === 0 ? sglangKeyFile(options, launch) : null;
  if (keyFile) argv.push('--config', keyFile.path);
  if (launch.rank === 0) argv.push(...tlsArgs('sglang', options));
  const kv = zmqKvEventsArgs('sglang', launch);
  if (kv) argv.push(...kv.args);
  return {
    argv: [...argv, ...launch.profile.args],
    env: mergeEnv('sglang', options, gpuEnv(launch), launch),
    readiness: httpReadiness(options, launch.host, launch.port, launch.rank === 0),
    servesApi: launch.rank === 0,
    ...(keyFile ? { files: [keyFile] } : {}),
    ...(kv ? { kvEvents: kv.kvEvents } : {}),
  };
}

/** The --config file that gives SGLang the replica's key, or null when the replica has none. */
function sglangKeyFile(options: CompiledEngineAdapterOptions, launch: ShardLaunch): EngineFile | null {
  const key = launch.apiKey;
  if (key === undefined || key === '') return null;
  if (options.secretsDir === null) {
    throw launchError(
      'sglang',
      launch,
      'the replica has an API key, which SGLang reads only from its command line (visible to every user in ps) or a --config file, and this agent has no secrets directory to write that file in',
    );
  }
  if (launch.profile.args.some((arg) => arg === '--config' || arg.startsWith('--config='))) {
    throw launchError(
      'sglang',
      launch,
      "the profile's args pass --config, but llmgw gives SGLang its API key in a --config file of its own and SGLang takes one; put those settings in the profile's args instead",
    );
  }
  // SGLang turns the file back into `--api-key VALUE`, and argparse reads a value that starts with `-` as a missing one.
  if (key.startsWith('-')) {
    throw launchError(
      'sglang',
      launch,
      'the replica\'s secret starts with "-", which SGLang cannot read from its --config file; remove the replica so the control plane makes a new one with a prefixed secret',
    );
  }
  // JSON is YAML: one double-quoted scalar, whatever the secret holds. The .yaml suffix is one SGLang asks for.
  return {
    path: join(options.secretsDir, `${shardFileName(launch.shardId)}.sglang.yaml`),
    text: `api-key: ${JSON.stringify(key)}\n`,
  };
}
