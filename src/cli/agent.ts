// `llmgw agent`: probe this machine (or a declared one with --simulate), join
// the control plane, report, and run what it is assigned. SIGINT/SIGTERM stop
// the agent; engines it started keep running and are found again next start.
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import { z } from 'zod';
import { Agent, AGENT_DEFAULTS, compileAgentOptions } from '../agent/index.js';
import { WeightCache } from '../agent/cache/index.js';
import { adapterFor } from '../agent/engines/index.js';
import { Fetcher } from '../agent/fetch/index.js';
import { NodeProber, rpcServerOnPath } from '../agent/probe/index.js';
import { AgentShardRunner } from '../agent/shards.js';
import { LoadScraper } from '../agent/load/index.js';
import { Supervisor, networkReadinessProber } from '../agent/supervisor/index.js';
import { ShardTracing } from '../agent/tracing/index.js';
import { startTracing, tracesUrl, type Tracing } from '../tracing/index.js';
import { advertisedHost } from '../agent/address/index.js';
import { LlmgwError } from '../errors/index.js';
import { type ZodTypeProvider } from '../http/index.js';
import { childLogger } from '../log/index.js';
import { isPlainHttpOffLoopback, readCa } from '../tls/index.js';
import { timerFlagMs } from '../validation/durations.js';
import { JOIN_TOKEN_FLAG, readTokenFile, tokenFlagWarning } from './token-flags.js';

/** `llmgw agent`'s flags as commander gives them; absent = AGENT_DEFAULTS (or the default named). */
export interface AgentFlags {
  control: string;
  /** Shown to every user by ps: `llmgw agent` warns; prefer joinTokenFile or LLMGW_JOIN_TOKEN. */
  joinToken?: string;
  /** A file holding the join token (first line). */
  joinTokenFile?: string;
  nodeId?: string;
  labels?: string;
  stateDir?: string;
  /** Absent: <stateDir>/cache. */
  cacheDir?: string;
  /** Absent: none. */
  modelDir?: string[];
  mgmtAddr?: string;
  simulate?: string;
  /** Absent: none. */
  fabric?: string[];
  heartbeatInterval?: string;
  /** A duration; absent: derived from the stale window the control plane announces. */
  controlDeadline?: string;
  logLevel?: string;
  engineHost?: string;
  /** FIRST-LAST, like 20000-20999. */
  portRange?: string;
  /** A duration ("10s"); "0" turns the liveness probe off. */
  livenessInterval?: string;
  /** A whole number, 1 or more. */
  livenessFailures?: string;
  /** How often ready engines' metrics are read for the router, a duration ("1s"); "0" = never. */
  loadInterval?: string;
  /** Test-only: accept http:// weight sources. */
  allowHttpSources?: boolean;
  /** PEM CA file to verify the control plane with (or LLMGW_CA); absent = the system's CAs. */
  ca?: string;
  insecureHttp?: boolean;
  /** The management API's certificate and key; absent = plain HTTP. */
  tlsCert?: string;
  tlsKey?: string;
  /** Engines serve https with --tls-cert/--tls-key; absent = plain http. */
  engineTls?: boolean;
  /** Start engines whose profile env sets a loader or interpreter hook (LD_PRELOAD, NODE_OPTIONS, …); absent = refuse them. */
  allowUnsafeProfileEnv?: boolean;
  /** The address the control plane reaches this node's engines and management API at; absent = --engine-host, or for a wildcard this machine's address toward the control plane. */
  advertiseHost?: string;
  /** OpenTelemetry collector for the agent's traces (OTLP/HTTP); absent = OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT, else none. */
  otlpEndpoint?: string;
}

/** The installed `llmgw` entry point, for engines llmgw runs itself (sim, builtin). */
const LLMGW_BIN = fileURLToPath(new URL('../../bin/llmgw.js', import.meta.url));

export function parseLabels(text: string | undefined): Record<string, string> {
  const labels: Record<string, string> = {};
  if (!text) return labels;
  for (const pair of text.split(',')) {
    const trimmed = pair.trim();
    if (!trimmed) continue;
    const eq = trimmed.indexOf('=');
    if (eq <= 0)
      throw new LlmgwError(
        'LLMGW_CONFIG_INVALID',
        `--labels: "${trimmed}" is not key=value; write --labels pool=a100,zone=eu`,
      );
    labels[trimmed.slice(0, eq)] = trimmed.slice(eq + 1);
  }
  return labels;
}

export interface StartedAgent {
  agent: Agent;
  supervisor: Supervisor;
  logger: pino.Logger;
  /** Its traces' provider, to flush at exit; null = tracing is off. */
  tracing: Tracing | null;
}

/** Builds and starts an agent with its cache, fetcher and supervisor; `llmgw agent` and `llmgw up` share it. */
export async function startAgent(flags: AgentFlags, parentLogger?: pino.Logger): Promise<StartedAgent> {
  const stateDir = resolve(flags.stateDir ?? AGENT_DEFAULTS.stateDir);
  const engineHost = flags.engineHost ?? AGENT_DEFAULTS.engineHost;
  if (flags.joinToken !== undefined && flags.joinTokenFile !== undefined) {
    throw new LlmgwError(
      'LLMGW_CONFIG_INVALID',
      '--join-token and --join-token-file are both given; keep --join-token-file',
    );
  }
  const joinToken =
    flags.joinToken ??
    (flags.joinTokenFile === undefined ? undefined : readTokenFile('--join-token-file', flags.joinTokenFile)) ??
    process.env.LLMGW_JOIN_TOKEN;
  const config = compileAgentOptions({
    control: flags.control
      .split(',')
      .map((u) => u.trim())
      .filter(Boolean),
    ...(joinToken ? { joinToken } : {}),
    ...(flags.nodeId ? { nodeId: flags.nodeId } : {}),
    labels: parseLabels(flags.labels),
    stateDir,
    ...(flags.mgmtAddr ? { mgmtAddr: flags.mgmtAddr } : {}),
    ...(flags.heartbeatInterval ? { heartbeatInterval: flags.heartbeatInterval } : {}),
    ...(flags.controlDeadline ? { controlDeadline: flags.controlDeadline } : {}),
    ...((flags.ca ?? process.env.LLMGW_CA) ? { ca: flags.ca ?? process.env.LLMGW_CA } : {}),
    insecureHttp: flags.insecureHttp === true,
    ...(flags.tlsCert ? { tlsCert: flags.tlsCert } : {}),
    ...(flags.tlsKey ? { tlsKey: flags.tlsKey } : {}),
    engineTls: flags.engineTls === true,
  });
  const logger = parentLogger
    ? childLogger(parentLogger, 'agent', { node: config.nodeId })
    : pino({ level: flags.logLevel ?? AGENT_DEFAULTS.logLevel, base: { part: 'agent', node: config.nodeId } });
  const clear = config.controlUrls.filter(isPlainHttpOffLoopback);
  if (clear.length)
    logger.warn(
      { control: clear },
      "--insecure-http: the join token and this node's credential cross the network in clear",
    );
  const cacheDir = resolve(flags.cacheDir ?? `${stateDir}/cache`);
  // The runner is made below; until then no engine uses anything in place.
  let runner: AgentShardRunner | null = null;
  const prober = new NodeProber(
    {
      cacheDir,
      modelDirs: (flags.modelDir ?? []).map((d) => resolve(d)),
      fabrics: flags.fabric ?? [],
      ...(flags.simulate ? { simulate: flags.simulate, simulateSeed: config.nodeId } : {}),
    },
    { inPlace: () => runner?.inPlace() ?? [] },
  );
  const ports = portRange(flags.portRange);
  // A wildcard is where engines bind, not where anyone reaches them: endpoints name the advertised address instead.
  const advertise = await advertisedHost({
    engineHost,
    ...(flags.advertiseHost ? { advertiseHost: flags.advertiseHost } : {}),
    controlUrls: config.controlUrls,
  });
  if (advertise === null)
    logger.warn(
      { control: config.controlUrls[0] },
      "no route to the control plane to learn this node's address from; engine endpoints name loopback (set --advertise-host)",
    );
  const engineAddressing = {
    ...(advertise === null ? {} : { engine_host: advertise }),
    port_range: ports,
  };
  const livenessIntervalMs =
    flags.livenessInterval === undefined
      ? AGENT_DEFAULTS.livenessIntervalMs
      : flags.livenessInterval === '0'
        ? 0
        : timerFlagMs('--liveness-interval', flags.livenessInterval);
  const livenessFailures =
    flags.livenessFailures === undefined ? AGENT_DEFAULTS.livenessFailures : Number(flags.livenessFailures);
  if (!Number.isInteger(livenessFailures) || livenessFailures < 1) {
    throw new LlmgwError(
      'LLMGW_CONFIG_INVALID',
      `--liveness-failures: want a whole number, 1 or more; got "${flags.livenessFailures}"`,
    );
  }
  // Engines serve the node certificate (--engine-tls); the agent accepts exactly it on loopback, which it does not name.
  const engineCert = config.engineTls ? readCa(config.engineTls.certFile, '--tls-cert') : null;
  const cache = await WeightCache.create({ cacheDir });
  await cache.emptyTrash().catch(() => {});
  const fetcher = new Fetcher({
    cache,
    ...(process.env.HF_TOKEN ? { hfToken: process.env.HF_TOKEN } : {}),
    ...(process.env.HF_ENDPOINT ? { hubUrl: process.env.HF_ENDPOINT } : {}),
    allowHttp: flags.allowHttpSources === true,
  });
  let agent: Agent | null = null;
  // Shard lifecycles as spans, when a collector is named (docs/tracing.md); with none, no SDK object is made.
  const traceUrl = tracesUrl(flags.otlpEndpoint, process.env);
  const tracing =
    traceUrl === null
      ? null
      : await startTracing({ url: traceUrl, sampleRatio: 1, serviceName: 'llmgw-agent', instance: config.nodeId });
  const shardTracing = tracing ? new ShardTracing(tracing.tracer, config.nodeId) : null;
  let traced: Supervisor | null = null;
  const supervisor = await Supervisor.create({
    logsDir: join(stateDir, 'logs'),
    stateDir,
    logger: childLogger(logger, 'supervisor'),
    ...(advertise === null ? {} : { advertiseHost: advertise }),
    adapterFor: (engine) =>
      adapterFor(engine, {
        llmgwBin: LLMGW_BIN,
        // Where SGLang's key file goes: under the agent's own 0700 state directory, never on a command line.
        secretsDir: join(stateDir, 'engine-secrets'),
        allowUnsafeProfileEnv: flags.allowUnsafeProfileEnv === true,
        ...(config.engineTls ? { engineTls: config.engineTls } : {}),
        // Looked up at each launch, as the probe looks each heartbeat: llama.cpp renamed it (ggml-rpc-server).
        ...(engine === 'llamacpp' ? { rpcServerExecutable: rpcServerOnPath(process.env.PATH ?? '') } : {}),
        ...(traceUrl === null ? {} : { otlpTracesEndpoint: traceUrl }),
      }),
    // The node's CA signed the certificate engines serve under --engine-tls; the probes verify it.
    prober: networkReadinessProber({ ca: config.ca, engineCert }),
    firstPort: ports.first,
    lastPort: ports.last,
    livenessIntervalMs,
    livenessFailures,
    // A shard's state changing (ready, failed) is news the control plane should hear now.
    onChange: () => {
      agent?.poke();
      if (traced) shardTracing?.observe(traced.status());
    },
  });
  traced = supervisor;
  const adoption = supervisor.adopt();
  if (adoption.adopted.length || adoption.discarded.length || adoption.unrecorded.length) {
    logger.info(
      {
        adopted: adoption.adopted.map((s) => s.shardId),
        discarded: adoption.discarded,
        unrecorded: adoption.unrecorded,
      },
      'found engines from an earlier agent',
    );
  }
  const loadIntervalMs =
    flags.loadInterval === undefined
      ? AGENT_DEFAULTS.loadIntervalMs
      : flags.loadInterval === '0'
        ? 0
        : timerFlagMs('--load-interval', flags.loadInterval);
  // A load that changed is news the router should have now, not at the end of the long-poll.
  const scraper =
    loadIntervalMs > 0
      ? new LoadScraper({
          targets: () => supervisor.metricsTargets(),
          ca: config.ca,
          engineCert,
          intervalMs: loadIntervalMs,
          onChange: () => agent?.poke(),
          logger: childLogger(logger, 'load'),
        })
      : null;
  runner = new AgentShardRunner({
    fetcher,
    cache,
    supervisor,
    engineHost,
    logger,
    onChange: () => agent?.poke(),
    ...(scraper ? { load: (shardId: string) => scraper.take(shardId) } : {}),
    ...(shardTracing ? { tracing: shardTracing } : {}),
  });
  agent = new Agent(config, {
    // Declared in every report: the control plane routes only to endpoints on this host and in this range.
    probe: async () => ({ ...(await prober.probe()), ...engineAddressing }),
    logger,
    runner,
    ...(advertise === null ? {} : { advertiseHost: advertise }),
    mgmtRoutes: (app) => registerMgmtRoutes(app, { cache, supervisor, runner }),
    ...(scraper ? { companions: [scraper] } : {}),
  });
  await agent.start();
  return { agent, supervisor, logger, tracing };
}

/** --port-range as FIRST-LAST; absent = AGENT_DEFAULTS' range. */
function portRange(text: string | undefined): { first: number; last: number } {
  if (text === undefined) return { first: AGENT_DEFAULTS.firstPort, last: AGENT_DEFAULTS.lastPort };
  const ports = /^(\d+)-(\d+)$/.exec(text);
  if (!ports)
    throw new LlmgwError(
      'LLMGW_CONFIG_INVALID',
      `--port-range: want FIRST-LAST, like ${AGENT_DEFAULTS.firstPort}-${AGENT_DEFAULTS.lastPort}; got "${text}"`,
    );
  return { first: Number(ports[1]), last: Number(ports[2]) };
}

export async function runAgent(flags: AgentFlags): Promise<void> {
  if (flags.joinToken !== undefined) process.stderr.write(`${tokenFlagWarning('llmgw agent', JOIN_TOKEN_FLAG)}\n`);
  const { agent, supervisor, logger, tracing } = await startAgent(flags);
  logger
    .child({}, { level: 'info' })
    .info({ mgmt: agent.mgmtUrl, control: agent.config.controlUrls }, 'llmgw agent running');
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'stopping');
    // Engines keep serving while the agent is away; the next agent adopts them.
    void agent.stop().then(async () => {
      supervisor.detach();
      await tracing?.shutdown();
      process.exit(0);
    });
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
}

const RemovePaths = z.looseObject({ paths: z.array(z.string()) });

/**
 * What the control plane sends to /mgmt/v1/weights/remove (src/control/weights):
 * full paths of cache entries; other fields are ignored. Any other body, absent
 * included, is answered with the one shape the route wants, in one sentence,
 * as it always has been, rather than a list of what is wrong with it.
 */
const WeightsRemoveBody = z.custom<z.output<typeof RemovePaths>>(
  (body) => RemovePaths.safeParse(body).success,
  'want {"paths": ["<cache dir>/<cache name>", ...]}',
);

/**
 * The management API's own routes: tail a shard's log, and remove cache
 * entries the control plane asks about. The node decides each removal itself
 * (the cache checks every path again); the answer is per path.
 */
export function registerMgmtRoutes(
  app: FastifyInstance,
  deps: {
    cache: Pick<WeightCache, 'remove'>;
    supervisor: Pick<Supervisor, 'tailLog'>;
    runner: Pick<AgentShardRunner, 'inUse'>;
  },
): void {
  app
    .withTypeProvider<ZodTypeProvider>()
    .get(
      '/mgmt/v1/shards/:id/log',
      { schema: { params: z.object({ id: z.string() }), querystring: z.object({ lines: z.string().optional() }) } },
      async (request, reply) => {
        const lines = Math.min(Math.max(Number(request.query.lines ?? 100) || 100, 1), 10_000);
        try {
          return { shard_id: request.params.id, lines: deps.supervisor.tailLog(request.params.id, lines) };
        } catch (err) {
          return reply.code(404).send({ error: (err as Error).message });
        }
      },
    );
  app
    .withTypeProvider<ZodTypeProvider>()
    .post('/mgmt/v1/weights/remove', { schema: { body: WeightsRemoveBody } }, async (request) => {
      const results = [];
      for (const path of request.body.paths) {
        const result = await deps.cache.remove(path, (name) => deps.runner.inUse(name));
        results.push(
          result.removed
            ? { path, removed: true, bytes_freed: result.bytesFreed }
            : { path, removed: false, check: result.check, reason: result.reason },
        );
      }
      return { results };
    });
}
