// The control plane's configuration: one schema, four sources. Each key can be
// set in the YAML file (`client_addr`), the environment (`LLMGW_CLIENT_ADDR`)
// or a flag (`--client-addr`); flags beat the environment, which beats the
// file, which beats the defaults. Validation happens once, here, so that a
// wrong value stops start-up with a sentence naming the key, instead of
// surfacing later as a listener bound to the wrong place.
import { constants } from 'node:buffer';
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { isLlmgwError, LlmgwError, ValidationError } from '../../errors/index.js';
import { isLoopbackHost } from '../../net/index.js';
import { readCa, readServerTls, type ServerTls } from '../../tls/index.js';
import { formatBytes, parseDurationMs, parseSizeBytes } from '../../units/index.js';
import { durationSchema } from '../../validation/durations.js';
import { readSecretFile } from '../../validation/flags.js';
import { parseOptions } from '../../validation/options.js';
import { CONTROL_DEFAULTS, MAX_CONNECTIONS_DEFAULTS } from './defaults.js';
import { BATCH_OPTIONS, compileBatches, type BatchSettings } from './batches.js';
import { BUDGET_OPTIONS, compileBudgets, type BudgetSettings } from './budgets.js';
import { tracesUrl } from '../../tracing/index.js';
import { compileOidc, OIDC_OPTIONS, type OidcConfig } from './oidc.js';
import { compileGpuPrices, GPU_PRICES_OPTIONS } from './gpu-prices.js';
import type { GpuPrices } from '../budgets/gpu-cost.js';
import { compilePrefixCache, PREFIX_CACHE_OPTIONS, type PrefixCacheSettings } from './prefix-cache.js';

export { CONTROL_DEFAULTS, MAX_CONNECTIONS_DEFAULTS };

/** A duration that becomes a timer (at most 24d); see durationSchema. */
const duration = durationSchema({ like: '500ms, 15s or 5m' });
/** A timer's duration where 0 would end every request at once or spin a loop. */
const positiveDuration = durationSchema({ like: '500ms, 15s or 5m', aboveZero: true });

const size = z.string().refine((v) => typeof parseSizeBytes(v) === 'number', {
  message: 'want a size, like 64m or 1g (binary units; a bare number is bytes)',
});

const address = z.string().refine((v) => parseAddress(v) !== null, {
  message: 'want host:port, like 127.0.0.1:8080 or [::1]:8080 (port 0 picks a free one)',
});

const connectionCap = z.union([
  z.number().int().min(0).max(1e9),
  z.string().regex(/^\d{1,9}$/, 'want a whole number of connections, 0 for no cap'),
]);

/**
 * The options as an operator writes them (file, env or flags). Absent keys
 * take CONTROL_DEFAULTS, or, where it has none, what their comment says.
 */
export const ControlOptionsSchema = z.strictObject({
  client_addr: address.default(CONTROL_DEFAULTS.client_addr),
  admin_addr: address.default(CONTROL_DEFAULTS.admin_addr),
  agent_addr: address.default(CONTROL_DEFAULTS.agent_addr),
  /** `sqlite:PATH`, a `postgres://` URL, or `none` (catalog file only; writes answer 501). */
  store: z
    .string()
    .refine((v) => v === 'none' || v.startsWith('sqlite:') || /^postgres(ql)?:\/\//.test(v), {
      message: 'want sqlite:PATH, a postgres:// URL, or none',
    })
    .default(CONTROL_DEFAULTS.store),
  /** A YAML file of models loaded at start; absent = only models added through the API. */
  catalog: z.string().optional(),
  admin_token: z.string().min(16, 'the admin token must be at least 16 characters').optional(),
  admin_token_file: z.string().optional(),
  /**
   * True: `llmgw control` runs with no admin token when none is configured,
   * so every user of this machine is an admin over loopback. Absent = false:
   * it makes one (0600, in its data directory) and uses it. Ignored when a
   * token is configured.
   */
  insecure_no_admin_token: z
    .union([z.boolean(), z.enum(['true', 'false'], { message: 'want true or false' })])
    .default(CONTROL_DEFAULTS.insecure_no_admin_token),
  join_token: z.string().min(16, 'the join token must be at least 16 characters').optional(),
  join_token_file: z.string().optional(),
  /** `manual`: a node that joins afresh, or whose GPUs change, takes no placements until an admin approves it. */
  join_approval: z.enum(['auto', 'manual']).default(CONTROL_DEFAULTS.join_approval),
  /** `required`: every client request carries an API key. `off`: none is asked (allowed only on a loopback client_addr). */
  api_keys: z.enum(['required', 'off']).default(CONTROL_DEFAULTS.api_keys),
  log_level: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default(CONTROL_DEFAULTS.log_level),
  /** A node that has not reported for this long is stale: kept, but placed on no more. */
  node_stale_after: duration.default(CONTROL_DEFAULTS.node_stale_after),
  /** A node that has not reported for this long is lost: its shards are given up and replaced. */
  node_lost_after: duration.default(CONTROL_DEFAULTS.node_lost_after),
  /** How often the reconciler runs a pass when nothing notifies it sooner. */
  reconcile_interval: positiveDuration.default(CONTROL_DEFAULTS.reconcile_interval),
  /**
   * Most replicas the reconciler creates (or retries) in one pass, so that a
   * rack going dark does not start every replacement at once. Absent = 10%
   * of the fleet, at least 10.
   */
  max_creates_per_pass: z
    .union([z.number().int().min(1), z.string().regex(/^[1-9]\d*$/, 'want a whole number, 1 or more')])
    .optional(),
  /**
   * How long a client of any listener may take to finish its TLS handshake,
   * and then to send its request headers; a slower one is cut (slow-loris).
   */
  client_headers_timeout: duration.default(CONTROL_DEFAULTS.client_headers_timeout),
  /**
   * Most connections the client, admin and agent listener each hold at once
   * (see MAX_CONNECTIONS_DEFAULTS). At the cap, the oldest connection with
   * no request in flight is closed to make room; with every one busy, a new
   * one is refused. Both are counted in
   * llmgw_listener_connections_refused_total. 0 = no cap. Absent = the
   * default, lowered at start to fit the process's open-file limit.
   */
  client_max_connections: connectionCap.optional(),
  admin_max_connections: connectionCap.optional(),
  agent_max_connections: connectionCap.optional(),
  /** From a request sent to an engine until its response headers (a non-streamed answer's come with the whole answer). */
  upstream_headers_timeout: duration.default(CONTROL_DEFAULTS.upstream_headers_timeout),
  /** Longest silence in a body: the client's request, or the engine's answer between chunks. */
  idle_body_timeout: duration.default(CONTROL_DEFAULTS.idle_body_timeout),
  /** A whole client request, holds and retries included; then 504 (or an error event once streaming). */
  request_timeout: positiveDuration.default(CONTROL_DEFAULTS.request_timeout),
  /** Longest a request waits for a model with no ready replica while one starts. */
  cold_start_timeout: duration.default(CONTROL_DEFAULTS.cold_start_timeout),
  /**
   * Most requests of one API key waiting at once for models with no ready
   * replica; the next gets 429. Bounds what one key can hold open (sockets,
   * timers) while replicas start. At least 1.
   */
  max_held_per_key: z
    .union([z.number().int().min(1), z.string().regex(/^[1-9]\d*$/, 'want a whole number, 1 or more')])
    .default(CONTROL_DEFAULTS.max_held_per_key),
  /** Prefix-cache routing's weights and bounds (src/control/config/prefix-cache.ts, docs/prefix-cache.md). */
  ...PREFIX_CACHE_OPTIONS,
  /** Batches: where files live and their limits (src/control/config/batches.ts, docs/batches.md). */
  ...BATCH_OPTIONS,
  /** Budgets: how long a request waits for a dry lease's renewal (src/control/config/budgets.ts, docs/teams-and-budgets.md). */
  ...BUDGET_OPTIONS,
  /**
   * Web origins whose pages may call the client listener from a browser
   * (CORS), e.g. `https://chat.example.com`, or `*` for any; a list, or
   * comma-separated. Absent = none: browsers refuse cross-origin calls.
   */
  cors_origins: z.union([z.string(), z.array(z.string())]).optional(),
  /**
   * PEM certificate (chain) and private key every listener serves TLS with
   * (`llmgw tls init` writes control.pem and control-key.pem). Absent = plain
   * HTTP. One pair serves all three listeners; client_tls_cert/key replace it
   * on the client listener alone, e.g. with a public CA's certificate.
   */
  tls_cert: z.string().min(1).optional(),
  tls_key: z.string().min(1).optional(),
  client_tls_cert: z.string().min(1).optional(),
  client_tls_key: z.string().min(1).optional(),
  /**
   * PEM CA that agents' management certificates are signed by. Set: the
   * control plane calls `https://<mgmt_addr>` and trusts only this CA.
   * Absent = plain http to agents (they must then run without --tls-cert).
   */
  agent_ca: z.string().min(1).optional(),
  /**
   * PEM CA that engines' certificates are signed by (agents run with
   * --engine-tls). The router verifies https endpoints against it alone.
   * Absent = https endpoints are verified against the system's CAs, so an
   * engine serving a private CA's certificate cannot be routed to.
   */
  engine_ca: z.string().min(1).optional(),
  /**
   * Accept loader and interpreter hooks (LD_PRELOAD, NODE_OPTIONS,
   * PYTHONPATH, …) in a model profile's env. Off by default: with them,
   * whoever may add a model may run code on every node that runs it. Agents
   * check again and need --allow-unsafe-profile-env too.
   */
  allow_unsafe_profile_env: z
    .union([z.boolean(), z.enum(['true', 'false'], { message: 'want true or false' })])
    .default(CONTROL_DEFAULTS.allow_unsafe_profile_env),
  /**
   * Host names (no port) the admin listener answers to besides its own bound
   * address and, on loopback, localhost/127.0.0.1/::1; a list, or
   * comma-separated. Any other Host is refused with 421, which is what stops
   * a web page from reaching it through a DNS name rebound to this machine.
   * Absent = none added; on 0.0.0.0 or :: (where a token is required) any
   * Host is then accepted.
   */
  admin_hosts: z.union([z.string(), z.array(z.string())]).optional(),
  /** As admin_hosts, for the client listener; on 0.0.0.0 or :: with none set, any Host is accepted (keys are required there). */
  client_hosts: z.union([z.string(), z.array(z.string())]).optional(),
  /**
   * A file of 64 hex digits (mode 600): the key that seals remote endpoints'
   * API keys given through the admin API (docs/remote-endpoints.md). Absent =
   * such a key is refused (api_key_file still works); rotate with
   * `llmgw control rotate-secrets`.
   */
  secrets_key_file: z.string().min(1).optional(),
  /** How often remote endpoints and peers are probed; a failed probe takes one out of routing until one passes. */
  remote_probe_interval: positiveDuration.default(CONTROL_DEFAULTS.remote_probe_interval),
  /** True: /metrics on the admin listener answers without the admin token (for a scraper kept apart by the network). Absent = false. */
  metrics_public: z.union([z.boolean(), z.enum(['true', 'false'])]).default(CONTROL_DEFAULTS.metrics_public),
  /** Signing in to the dashboard and ctl through an OpenID Connect provider (src/control/config/oidc.ts, docs/people-and-sso.md). */
  ...OIDC_OPTIONS,
  /** US dollars per GPU-hour per GPU class, for models with no token price (src/control/config/gpu-prices.ts). */
  ...GPU_PRICES_OPTIONS,
  /** How long a Responses API response (store: true) is kept for previous_response_id and GET, from when it was made. */
  responses_ttl: durationSchema({ like: '1h or 30d', maxMs: Infinity }).default(CONTROL_DEFAULTS.responses_ttl),
  /**
   * The most one API key keeps of Responses API responses (their JSON);
   * past it the key's oldest go first. 0 = none is kept (previous_response_id
   * then finds nothing).
   */
  responses_max_per_key: size.default(CONTROL_DEFAULTS.responses_max_per_key),
  /**
   * The largest upload the client listener reads (an audio file for
   * /v1/audio/transcriptions); JSON bodies stay under 8 MiB. An upload is
   * held whole in one Buffer, so at most Node's largest (4 GiB on Node 20).
   */
  max_upload_size: z
    .string()
    .refine((v) => ((n) => typeof n === 'number' && n <= constants.MAX_LENGTH)(parseSizeBytes(v)), {
      message: `want a size up to ${formatBytes(constants.MAX_LENGTH)}, like 25m or 1g (an upload is held whole in one Buffer)`,
    })
    .default(CONTROL_DEFAULTS.max_upload_size),
  /**
   * How far past what is live V8 lets the old generation grow before it
   * collects it, in percent (V8's --heap-growing-percent), set by `llmgw
   * control` and `llmgw up` for their own process. At thousands of nodes
   * every long-polled heartbeat is held for seconds and promoted, and V8's
   * own heuristic lets that garbage reach about the live heap again before
   * a full collection; 50 kept a 10,000-node control plane near 400 MB
   * where V8's own let it reach 450-550, and costs the router's p99 under
   * heavy traffic (docs/heartbeats.md). 0 (the default) = V8's own
   * heuristic; a --heap-growing-percent given to node itself wins.
   */
  heap_growing_percent: z
    .union([
      z.number().int().min(0).max(1000),
      z.string().regex(/^(\d{1,3}|1000)$/, "want a whole number of percent from 0 to 1000, 0 for V8's own heuristic"),
    ])
    .default(CONTROL_DEFAULTS.heap_growing_percent),
  /**
   * Where OpenTelemetry traces go, over OTLP/HTTP (protobuf): a collector's
   * base URL (http://collector:4318; /v1/traces is appended) or its full
   * traces URL. Absent = OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or
   * OTEL_EXPORTER_OTLP_ENDPOINT when set, else no tracing (docs/tracing.md).
   */
  otlp_endpoint: z.string().url('want a URL, like http://127.0.0.1:4318').optional(),
  /** Share of new traces kept, 0..1; a request with a client's traceparent follows its caller's decision. */
  trace_sample_ratio: z
    .union([z.number().min(0).max(1), z.string().regex(/^(0(\.\d+)?|1(\.0+)?)$/, 'want a number from 0 to 1')])
    .default(CONTROL_DEFAULTS.trace_sample_ratio),
  /** True: prompts (gen_ai.input.messages) and whole answers are recorded on spans. Absent = false: never. */
  trace_content: z
    .union([z.boolean(), z.enum(['true', 'false'], { message: 'want true or false' })])
    .default(CONTROL_DEFAULTS.trace_content),
});

export type ControlOptions = z.input<typeof ControlOptionsSchema>;
export const CONTROL_OPTION_KEYS = Object.keys(ControlOptionsSchema.shape) as (keyof ControlOptions)[];

export interface ListenAddress {
  readonly host: string;
  readonly port: number;
}

/** The compiled form: validated, defaults filled, secrets read from files, units converted. */
export interface ControlConfig {
  readonly clientAddr: ListenAddress;
  readonly adminAddr: ListenAddress;
  readonly agentAddr: ListenAddress;
  readonly store: { kind: 'sqlite'; path: string } | { kind: 'postgres'; url: string } | { kind: 'none' };
  readonly catalogFile: string | null;
  /** Null: admin requests need no token (allowed only on a loopback admin address). */
  readonly adminToken: string | null;
  /** True: with no admin token configured, `llmgw control` makes none (insecure_no_admin_token). */
  readonly insecureNoAdminToken: boolean;
  /** Null: no agent can join (the agent listener answers 401 to every join). */
  readonly joinToken: string | null;
  /** manual: new nodes wait as pending until approved (ctl nodes approve), and a GPU change holds a node out again. */
  readonly joinApproval: 'auto' | 'manual';
  /** False: the client listener asks for no API key (only ever on loopback). */
  readonly apiKeysRequired: boolean;
  readonly logLevel: string;
  readonly nodeStaleAfterMs: number;
  readonly nodeLostAfterMs: number;
  readonly reconcileIntervalMs: number;
  /** Null: the reconciler's default (10% of the fleet, at least 10). */
  readonly maxCreatesPerPass: number | null;
  /** V8's --heap-growing-percent for the process that runs this control plane; 0 = V8's own heuristic. */
  readonly heapGrowingPercent: number;
  readonly clientHeadersTimeoutMs: number;
  /**
   * Most connections per listener (0 = no cap), and which were set by the
   * operator: only the others are lowered to fit the open-file limit.
   */
  readonly maxConnections: {
    readonly client: number;
    readonly admin: number;
    readonly agent: number;
    readonly set: readonly ('client' | 'admin' | 'agent')[];
  };
  /** Origins allowed to call the client listener from a browser; `*` = any; empty = none (no CORS headers). */
  readonly corsOrigins: readonly string[];
  /** Certificate and key per listener, read at start; null = that listener speaks plain HTTP. */
  readonly tls: {
    readonly client: ServerTls | null;
    readonly admin: ServerTls | null;
    readonly agent: ServerTls | null;
  };
  /** The CA agents' management APIs are verified with; null = they are called over plain http. */
  readonly agentCa: Buffer | null;
  /** The CA https engine endpoints are verified with; null = the system's CAs. */
  readonly engineCa: Buffer | null;
  /** Most requests of one key held for cold models at once (at least 1). */
  readonly maxHeldPerKey: number;
  /** Largest multipart upload on the client listener, bytes. */
  readonly uploadLimitBytes: number;
  /** True: profiles may set loader and interpreter hooks in their env (see allow_unsafe_profile_env). */
  readonly allowUnsafeProfileEnv: boolean;
  /** Host names the admin listener answers to beyond its own address and loopback names; empty = none added. */
  readonly adminHosts: readonly string[];
  /** Host names the client listener answers to beyond its own address and loopback names; empty = none added. */
  readonly clientHosts: readonly string[];
  /** True: /metrics needs no admin token. */
  readonly metricsPublic: boolean;
  /** US dollars per GPU-hour, by GPU class or a part of its name; empty = no GPU is priced. */
  readonly gpuPrices: GpuPrices;
  /** Single sign-on through an OpenID Connect provider; null = none (the admin token and people's tokens only). */
  readonly oidc: OidcConfig | null;
  /** Prefix-cache routing's settings, passed to the router as they are. */
  readonly prefixCache: PrefixCacheSettings;
  /** The Files and Batch APIs' settings (docs/batches.md). */
  readonly batches: BatchSettings;
  /** Budgets' settings (docs/teams-and-budgets.md). */
  readonly budgets: BudgetSettings;
  /** The key file sealing remote endpoints' API keys; null = none (such keys given through the API are refused). */
  readonly secretsKeyFile: string | null;
  /** How often each remote endpoint is probed, ms. */
  readonly remoteProbeIntervalMs: number;
  /** Responses API responses kept per key: how long, and how many bytes at most (0 = none kept). */
  readonly responses: { readonly ttlMs: number; readonly maxBytesPerKey: number };
  /** OpenTelemetry traces: where they go (null = off), the share kept, whether prompts and answers are recorded. */
  readonly tracing: { readonly url: string | null; readonly sampleRatio: number; readonly content: boolean };
  /** The router's timeouts, in ms. */
  readonly router: {
    readonly headersTimeoutMs: number;
    readonly idleBodyTimeoutMs: number;
    readonly totalTimeoutMs: number;
    readonly coldStartTimeoutMs: number;
  };
}

export function parseAddress(text: string): ListenAddress | null {
  const match = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]]+)):(\d{1,5})$/.exec(text.trim());
  if (!match) return null;
  const port = Number(match[3]);
  if (port > 65535) return null;
  return { host: (match[1] ?? match[2])!, port };
}

export function envName(key: string): string {
  return `LLMGW_${key.toUpperCase()}`;
}

export function flagName(key: string): string {
  return `--${key.replaceAll('_', '-')}`;
}

export interface ConfigSources {
  /** The YAML file's path, from --config; absent = no file. */
  file?: string;
  env?: NodeJS.ProcessEnv;
  /** Flag values keyed by option key (snake_case), only those given. */
  flags?: Partial<Record<string, string>>;
}

/** Reads and merges the sources, then validates and compiles. Throws ValidationError listing every problem. */
export function loadControlConfig(sources: ConfigSources): ControlConfig {
  const merged: Record<string, unknown> = {};
  if (sources.file) {
    let text: string;
    try {
      text = readFileSync(sources.file, 'utf8');
    } catch (err) {
      throw new LlmgwError(
        'LLMGW_CONFIG_INVALID',
        `cannot read the config file ${sources.file}: ${(err as Error).message}`,
      );
    }
    let doc: unknown;
    try {
      doc = parseYaml(text);
    } catch (err) {
      throw new LlmgwError(
        'LLMGW_CONFIG_INVALID',
        `the config file ${sources.file} is not valid YAML: ${(err as Error).message}`,
      );
    }
    if (doc !== null && doc !== undefined) {
      if (typeof doc !== 'object' || Array.isArray(doc)) {
        throw new LlmgwError(
          'LLMGW_CONFIG_INVALID',
          `the config file ${sources.file} must be a mapping of keys to values`,
        );
      }
      Object.assign(merged, doc);
    }
  }
  const env = sources.env ?? {};
  for (const key of CONTROL_OPTION_KEYS) {
    const value = env[envName(key)];
    if (value !== undefined && value !== '') merged[key] = value;
  }
  for (const [key, value] of Object.entries(sources.flags ?? {})) {
    if (value !== undefined) merged[key] = value;
  }
  return compileControlOptions(merged, env);
}

/** `env`: where OTEL_EXPORTER_OTLP_ENDPOINT and OTEL_EXPORTER_OTLP_TRACES_ENDPOINT are read when otlp_endpoint is absent. */
export function compileControlOptions(input: unknown, env: NodeJS.ProcessEnv = {}): ControlConfig {
  const o = parseOptions(ControlOptionsSchema, input, 'the configuration is not valid');
  const problems: string[] = [];
  const adminToken = secret(o.admin_token, o.admin_token_file, 'admin_token', problems);
  const joinToken = secret(o.join_token, o.join_token_file, 'join_token', problems);
  const adminAddr = parseAddress(o.admin_addr)!;
  if (!adminToken && !isLoopbackHost(adminAddr.host)) {
    problems.push(
      `admin_addr ${o.admin_addr} is not a loopback address, so an admin token is required: set admin_token or admin_token_file`,
    );
  }
  const clientAddr = parseAddress(o.client_addr)!;
  if (o.api_keys === 'off' && !isLoopbackHost(clientAddr.host)) {
    problems.push(
      `api_keys is off but client_addr ${o.client_addr} is not a loopback address: anyone who can reach it could use every model; set api_keys to required`,
    );
  }
  const staleMs = parseDurationMs(o.node_stale_after) as number;
  const lostMs = parseDurationMs(o.node_lost_after) as number;
  if (lostMs <= staleMs)
    problems.push(
      `node_lost_after (${o.node_lost_after}) must be longer than node_stale_after (${o.node_stale_after})`,
    );
  const corsOrigins = (typeof o.cors_origins === 'string' ? o.cors_origins.split(',') : (o.cors_origins ?? []))
    .map((x) => x.trim())
    .filter(Boolean);
  for (const origin of corsOrigins) {
    if (origin !== '*' && !/^https?:\/\/[^/\s?#]+$/.test(origin)) {
      problems.push(
        `cors_origins: ${origin} is not an origin; want scheme://host[:port] like https://chat.example.com, or *`,
      );
    }
  }
  if (corsOrigins.includes('*') && o.api_keys === 'off') {
    problems.push(
      'cors_origins is * while api_keys is off: any web page open in a browser on this machine could use every model; name the origins, or require keys',
    );
  }
  const sharedTls = collected(problems, () =>
    readServerTls(o.tls_cert, o.tls_key, { cert: 'tls_cert', key: 'tls_key' }),
  );
  const clientTls =
    o.client_tls_cert || o.client_tls_key
      ? collected(problems, () =>
          readServerTls(o.client_tls_cert, o.client_tls_key, { cert: 'client_tls_cert', key: 'client_tls_key' }),
        )
      : sharedTls;
  const agentCa = o.agent_ca ? collected(problems, () => readCa(o.agent_ca!, 'agent_ca')) : null;
  const engineCa = o.engine_ca ? collected(problems, () => readCa(o.engine_ca!, 'engine_ca')) : null;
  const responsesTtlMs = parseDurationMs(o.responses_ttl) as number;
  if (responsesTtlMs <= 0)
    problems.push(
      `responses_ttl (${o.responses_ttl}) must be longer than 0; to keep no responses, set responses_max_per_key to 0`,
    );
  const adminHosts = hostList(o.admin_hosts, 'admin_hosts', problems);
  const oidc = compileOidc(o, (value, file, key) => secret(value, file, key, problems), problems);
  const gpuPrices = compileGpuPrices(o, problems);
  const clientHosts = hostList(o.client_hosts, 'client_hosts', problems);
  if (problems.length) throw new ValidationError('LLMGW_CONFIG_INVALID', problems, 'the configuration is not valid');
  return Object.freeze({
    clientAddr,
    adminAddr,
    agentAddr: parseAddress(o.agent_addr)!,
    store:
      o.store === 'none'
        ? { kind: 'none' as const }
        : o.store.startsWith('sqlite:')
          ? { kind: 'sqlite' as const, path: o.store.slice('sqlite:'.length) }
          : { kind: 'postgres' as const, url: o.store },
    catalogFile: o.catalog ?? null,
    adminToken,
    insecureNoAdminToken: o.insecure_no_admin_token === true || o.insecure_no_admin_token === 'true',
    joinToken,
    joinApproval: o.join_approval,
    apiKeysRequired: o.api_keys === 'required',
    logLevel: o.log_level,
    nodeStaleAfterMs: staleMs,
    nodeLostAfterMs: lostMs,
    reconcileIntervalMs: parseDurationMs(o.reconcile_interval) as number,
    maxCreatesPerPass: o.max_creates_per_pass === undefined ? null : Number(o.max_creates_per_pass),
    heapGrowingPercent: Number(o.heap_growing_percent),
    clientHeadersTimeoutMs: parseDurationMs(o.client_headers_timeout) as number,
    maxConnections: Object.freeze({
      client:
        o.client_max_connections === undefined ? MAX_CONNECTIONS_DEFAULTS.client : Number(o.client_max_connections),
      admin: o.admin_max_connections === undefined ? MAX_CONNECTIONS_DEFAULTS.admin : Number(o.admin_max_connections),
      agent: o.agent_max_connections === undefined ? MAX_CONNECTIONS_DEFAULTS.agent : Number(o.agent_max_connections),
      set: Object.freeze(
        (['client', 'admin', 'agent'] as const).filter((n) => o[`${n}_max_connections`] !== undefined),
      ),
    }),
    corsOrigins: Object.freeze(corsOrigins),
    tls: Object.freeze({ client: clientTls, admin: sharedTls, agent: sharedTls }),
    agentCa,
    engineCa,
    maxHeldPerKey: Number(o.max_held_per_key),
    uploadLimitBytes: parseSizeBytes(o.max_upload_size) as number,
    allowUnsafeProfileEnv: o.allow_unsafe_profile_env === true || o.allow_unsafe_profile_env === 'true',
    adminHosts: Object.freeze(adminHosts),
    clientHosts: Object.freeze(clientHosts),
    metricsPublic: o.metrics_public === true || o.metrics_public === 'true',
    oidc,
    gpuPrices,
    prefixCache: compilePrefixCache(o),
    batches: compileBatches(o, o.store.startsWith('sqlite:') ? o.store.slice('sqlite:'.length) : null),
    budgets: compileBudgets(o),
    secretsKeyFile: o.secrets_key_file ?? null,
    remoteProbeIntervalMs: parseDurationMs(o.remote_probe_interval) as number,
    responses: Object.freeze({
      ttlMs: responsesTtlMs,
      maxBytesPerKey: parseSizeBytes(o.responses_max_per_key) as number,
    }),
    tracing: Object.freeze({
      url: tracesUrl(o.otlp_endpoint, env),
      sampleRatio: Number(o.trace_sample_ratio),
      content: o.trace_content === true || o.trace_content === 'true',
    }),
    router: Object.freeze({
      headersTimeoutMs: parseDurationMs(o.upstream_headers_timeout) as number,
      idleBodyTimeoutMs: parseDurationMs(o.idle_body_timeout) as number,
      totalTimeoutMs: parseDurationMs(o.request_timeout) as number,
      coldStartTimeoutMs: parseDurationMs(o.cold_start_timeout) as number,
    }),
  });
}

/** Runs a read that throws a configuration error, adding its sentence to `problems` instead (null then). */
function collected<T>(problems: string[], read: () => T): T | null {
  try {
    return read();
  } catch (err) {
    if (!isLlmgwError(err)) throw err;
    problems.push(err.message);
    return null;
  }
}

/** A list of host names, as a YAML list or comma-separated; each a DNS name or an IP address, without a port. */
function hostList(value: string | string[] | undefined, key: string, problems: string[]): string[] {
  const names = (typeof value === 'string' ? value.split(',') : (value ?? []))
    .map((x) => x.trim().toLowerCase())
    .filter(Boolean);
  for (const name of names) {
    if (
      !/^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*\.?$/.test(name) &&
      isIP(name.replace(/^\[(.*)\]$/, '$1')) === 0
    ) {
      problems.push(
        `${key}: ${name} is not a host name; want a DNS name or an IP address without a port, like gateway.example.com or 10.0.0.5`,
      );
    }
  }
  return names.map((n) => n.replace(/^\[(.*)\]$/, '$1'));
}

function secret(value: string | undefined, file: string | undefined, key: string, problems: string[]): string | null {
  if (value && file) {
    problems.push(`${key} and ${key}_file are both set; keep one`);
    return null;
  }
  if (value) return value;
  if (!file) return null;
  const read = readSecretFile(file);
  if ('problem' in read) {
    problems.push(`${key}_file ${file} ${read.problem}`);
    return null;
  }
  if (read.text.length < 16) {
    problems.push(`${key}_file ${file} holds fewer than 16 characters; a token must be at least 16`);
    return null;
  }
  return read.text;
}
