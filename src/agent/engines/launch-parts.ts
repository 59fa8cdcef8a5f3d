// Pieces every adapter builds the same way: GPU visibility, the environment
// merge, where to probe a wildcard bind, and the checks on a multi-node
// shard's peers. Shared so that five adapters cannot disagree on them.
import { createHash } from 'node:crypto';
import type { ENGINE_API_KEY_ENV } from '../../engine/api-key.js';
import { LlmgwError } from '../../errors/index.js';
import { isWildcardHost } from '../../net/index.js';
import { unsafeProfileEnvNames, unsafeProfileEnvProblem } from '../../protocol/index.js';
import type {
  CompiledEngineAdapterOptions,
  EngineName,
  PlannedKvEvents,
  Readiness,
  ShardLaunch,
  ShardPeer,
} from './shard-launch.js';

/** Where to connect to reach an engine bound to `host`: a wildcard bind answers on loopback. */
export function probeHost(host: string): string {
  if (host === '' || host === '0.0.0.0') return '127.0.0.1';
  return isWildcardHost(host) ? '::1' : host;
}

/** `host:port`, with an IPv6 address in brackets as URLs and --rpc lists want it. */
export function hostPort(host: string, port: number): string {
  return host.includes(':') && !host.startsWith('[') ? `[${host}]:${port}` : `${host}:${port}`;
}

/**
 * CUDA_VISIBLE_DEVICES for the shard's GPUs. An empty list sets it to "" on
 * purpose: a CPU shard must not take a GPU another shard was given.
 */
export function gpuEnv(launch: ShardLaunch): Record<string, string> {
  return { CUDA_VISIBLE_DEVICES: launch.gpuIndices.join(',') };
}

/**
 * llmgw's variables with the profile's merged over them (the operator's value
 * wins). A loader or interpreter hook in the profile is refused here, on the
 * node, whatever the control plane let through: a tampered or misconfigured
 * control plane must not be able to run code in an engine, unless this
 * agent's own operator allowed it (--allow-unsafe-profile-env).
 */
export function mergeEnv(
  engine: EngineName,
  options: Pick<CompiledEngineAdapterOptions, 'allowUnsafeProfileEnv'>,
  own: Record<string, string>,
  launch: ShardLaunch,
): Record<string, string> {
  if (!options.allowUnsafeProfileEnv) {
    const unsafe = unsafeProfileEnvNames(launch.profile.env);
    if (unsafe.length > 0) {
      throw launchError(
        engine,
        launch,
        `refused the profile's env: ${unsafe.map((name) => unsafeProfileEnvProblem(name, 'start the agent with --allow-unsafe-profile-env')).join('; ')}`,
      );
    }
  }
  return { ...own, ...launch.profile.env };
}

/**
 * The secret in the variable an engine reads its key from (vLLM:
 * VLLM_API_KEY, llama-server: LLAMA_API_KEY, ENGINES.md; sim and builtin:
 * LLMGW_ENGINE_API_KEY), else nothing. Never --api-key: a command line is
 * world-readable (/proc/PID/cmdline, ps), a process's environment only by
 * its own user and root. Merged after the profile's env, so a profile cannot
 * replace the key the router sends. Given only to a process that serves the
 * API.
 */
export function apiKeyEnv(
  launch: ShardLaunch,
  variable: 'VLLM_API_KEY' | 'LLAMA_API_KEY' | typeof ENGINE_API_KEY_ENV,
): Record<string, string> {
  return launch.apiKey === undefined || launch.apiKey === '' ? {} : { [variable]: launch.apiKey };
}

/** A shard id as a file name: as it is when plain, else a short hash, so no id names a path outside the directory. */
export function shardFileName(shardId: string): string {
  return /^[A-Za-z0-9][A-Za-z0-9._-]{0,100}$/.test(shardId)
    ? shardId
    : `shard-${createHash('sha256').update(shardId).digest('hex').slice(0, 16)}`;
}

/** Each engine's own names for its TLS certificate and key flags. */
const TLS_FLAGS: Readonly<Record<EngineName, readonly [string, string]>> = {
  vllm: ['--ssl-certfile', '--ssl-keyfile'],
  // SGLang's ServerArgs has ssl_certfile/ssl_keyfile (sgl-project/sglang:python/sglang/srt/server_args.py, "SSL/TLS"); first release unconfirmed (?).
  sglang: ['--ssl-certfile', '--ssl-keyfile'],
  llamacpp: ['--ssl-cert-file', '--ssl-key-file'],
  sim: ['--tls-cert', '--tls-key'],
  builtin: ['--tls-cert', '--tls-key'],
};

/**
 * The engine's certificate and key flags when the agent runs engines over
 * TLS (--engine-tls), else nothing. Given only to a process that serves the
 * API, as the API key is.
 */
export function tlsArgs(engine: EngineName, options: Pick<CompiledEngineAdapterOptions, 'engineTls'>): string[] {
  if (!options.engineTls) return [];
  const [cert, key] = TLS_FLAGS[engine];
  return [cert, options.engineTls.certFile, key, options.engineTls.keyFile];
}

/** The readiness probe of a process serving HTTP on `host:port`: https when the agent runs engines over TLS. */
export function httpReadiness(
  options: Pick<CompiledEngineAdapterOptions, 'engineTls'>,
  host: string,
  port: number,
  tls = true,
): Readiness {
  return {
    kind: 'http',
    host: probeHost(host),
    port,
    path: '/health',
    ...(tls && options.engineTls ? { tls: true as const } : {}),
  };
}

/** True when the replica spans several nodes and this shard must meet its peers. */
export function isMultiNode(launch: ShardLaunch): boolean {
  return launch.profile.shards > 1;
}

export function launchError(engine: EngineName, launch: ShardLaunch, problem: string): LlmgwError {
  return new LlmgwError(
    'LLMGW_ENGINE_START_FAILED',
    `shard ${launch.shardId} (${engine}, profile ${launch.profile.name}): ${problem}`,
    {
      context: { shardId: launch.shardId, replicaId: launch.replicaId, engine, profile: launch.profile.name },
    },
  );
}

/**
 * The peers of a multi-node shard, checked: one per shard, ranks 0..n-1 in
 * order, this shard's rank among them. A gap would start an engine that waits
 * for a rank nobody runs until its rendezvous times out, minutes later.
 */
export function checkedPeers(engine: EngineName, launch: ShardLaunch): readonly ShardPeer[] {
  const { shards } = launch.profile;
  if (launch.peers.length !== shards) {
    throw launchError(
      engine,
      launch,
      `the profile runs ${shards} shards but ${launch.peers.length} peers were given; want one per shard, rank 0 first`,
    );
  }
  launch.peers.forEach((peer, index) => {
    if (peer.rank !== index)
      throw launchError(
        engine,
        launch,
        `peers must be ordered by rank 0..${shards - 1}; position ${index} holds rank ${peer.rank}`,
      );
    if (peer.address.trim() === '') throw launchError(engine, launch, `peer rank ${peer.rank} has no fabric address`);
  });
  if (!Number.isInteger(launch.rank) || launch.rank < 0 || launch.rank >= shards) {
    throw launchError(engine, launch, `rank ${launch.rank} is outside 0..${shards - 1}`);
  }
  return launch.peers;
}

/** The one-node shard's rank must be 0: a lone rank 1 would wait for a head that never comes. */
export function checkSingleNode(engine: EngineName, launch: ShardLaunch): void {
  if (launch.rank !== 0)
    throw launchError(engine, launch, `a one-shard profile runs rank 0 only, not rank ${launch.rank}`);
}

/** The topic vLLM and SGLang are told to publish KV events under. */
export const KV_EVENTS_TOPIC = 'kv-events';

/** True when the profile's args already configure KV events: the operator's config wins, and llmgw reads none. */
function ownKvEventsConfig(launch: ShardLaunch): boolean {
  return launch.profile.args.some((arg) => arg === '--kv-events-config' || arg.startsWith('--kv-events-config='));
}

/** vLLM and SGLang: two ports (PUB, replay) on the rank that schedules (0), none when the profile configures its own. */
export function zmqKvEventsPorts(launch: ShardLaunch): number {
  return launch.rank === 0 && !ownKvEventsConfig(launch) ? 2 : 0;
}

/**
 * `--kv-events-config` for vLLM or SGLang on the ports the supervisor gave,
 * and where the events will be. The endpoints are wildcards: both engines
 * bind a tcp endpoint only when it has `*` (otherwise they connect to it),
 * so the PUB socket listens on every interface; it carries prompts' token
 * ids, so the node's firewall should keep it to the gateways. vLLM also
 * needs enable_kv_cache_events; SGLang ignores the field.
 */
export function zmqKvEventsArgs(
  engine: 'vllm' | 'sglang',
  launch: ShardLaunch,
): { args: string[]; kvEvents: PlannedKvEvents } | null {
  const ports = launch.kvEventsPorts;
  if (ports === undefined || ports.length < 2 || ownKvEventsConfig(launch)) return null;
  const [port, replayPort] = ports as [number, number];
  const config = {
    ...(engine === 'vllm' ? { enable_kv_cache_events: true } : {}),
    publisher: 'zmq',
    endpoint: `tcp://*:${port}`,
    replay_endpoint: `tcp://*:${replayPort}`,
    topic: KV_EVENTS_TOPIC,
  };
  return {
    args: ['--kv-events-config', JSON.stringify(config)],
    kvEvents: { kind: 'zmq', port, replayPort, topic: KV_EVENTS_TOPIC },
  };
}
