// The control plane's defaults, apart from the schema that applies them
// (index.ts) so that the command line can print them in --help without
// loading the configuration's parsers, TLS and tracing into every llmgw
// process it starts.
import { ROUTER_DEFAULTS } from '../../gateway/core/options.js';
import { formatDurationMs } from '../../units/index.js';
import { RESPONSE_STORE_DEFAULTS } from '../responses/limits.js';
import { BATCH_DEFAULTS } from './batches.js';
import { BUDGET_DEFAULTS } from './budgets.js';
import { OIDC_DEFAULTS } from './oidc.js';
import { PREFIX_CACHE_DEFAULTS } from './prefix-cache.js';

/**
 * Every default of the control plane's configuration, in the words an
 * operator writes (the schema in index.ts and `llmgw control --help` read them
 * here; nothing else repeats them). The router's settings come from its own
 * table, ROUTER_DEFAULTS, and the Responses API store's from
 * RESPONSE_STORE_DEFAULTS, so the parts cannot disagree. A key missing here
 * has no value when absent; its schema entry says what absence means.
 */
export const CONTROL_DEFAULTS = Object.freeze({
  /** Loopback: only this machine reaches the client listener until an operator says otherwise. */
  client_addr: '127.0.0.1:8080',
  /** Loopback: with no admin token, loopback is the only place the admin listener may be. */
  admin_addr: '127.0.0.1:8081',
  agent_addr: '127.0.0.1:8082',
  /** Embedded SQLite under the working directory; `none` keeps nothing across restarts. */
  store: 'sqlite:./.llmgw/llmgw.db',
  /** False: with no admin token configured, `llmgw control` makes one. */
  insecure_no_admin_token: false,
  /** auto: a node with the join token takes placements at once. */
  join_approval: 'auto',
  /** required: every client request carries an API key. */
  api_keys: 'required',
  log_level: 'info',
  node_stale_after: '15s',
  node_lost_after: '60s',
  reconcile_interval: '5s',
  client_headers_timeout: '30s',
  /**
   * Most connections each listener holds at once; 0 would mean no cap. The
   * agent listener holds one long-polled heartbeat per node: room for a
   * 10,000-node fleet twice over, as while it reconnects after a restart.
   * When their sum does not fit the process's open-file limit, the control
   * plane lowers the ones not set explicitly at start
   * (src/http/connections.ts) and says so.
   */
  client_max_connections: 4096,
  admin_max_connections: 1024,
  agent_max_connections: 20_480,
  upstream_headers_timeout: formatDurationMs(ROUTER_DEFAULTS.headersTimeoutMs),
  idle_body_timeout: formatDurationMs(ROUTER_DEFAULTS.idleBodyTimeoutMs),
  request_timeout: formatDurationMs(ROUTER_DEFAULTS.totalTimeoutMs),
  cold_start_timeout: formatDurationMs(ROUTER_DEFAULTS.coldStartTimeoutMs),
  max_held_per_key: ROUTER_DEFAULTS.maxHeldPerKey,
  ...PREFIX_CACHE_DEFAULTS,
  ...BATCH_DEFAULTS,
  ...BUDGET_DEFAULTS,
  /** False: a profile env with a loader or interpreter hook is refused. */
  allow_unsafe_profile_env: false,
  /** False: /metrics asks for the admin token. */
  metrics_public: false,
  ...OIDC_DEFAULTS,
  responses_ttl: durationText(RESPONSE_STORE_DEFAULTS.ttlMs),
  /** 0 would keep none. */
  responses_max_per_key: sizeText(RESPONSE_STORE_DEFAULTS.maxBytesPerKey),
  max_upload_size: sizeText(ROUTER_DEFAULTS.uploadLimitBytes),
  /** 0: V8's own heuristic. */
  heap_growing_percent: 0,
  /** Every new trace kept (when tracing is on at all: otlp_endpoint or OTEL_EXPORTER_OTLP_*). */
  trace_sample_ratio: 1,
  /** False: prompts and answers never reach a span. */
  trace_content: false,
  /** How often each remote endpoint and peer llmgw in the catalog is probed (docs/remote-endpoints.md). */
  remote_probe_interval: '10s',
} as const);

/** The listeners' connection caps by default, by listener (CONTROL_DEFAULTS' `*_max_connections`). */
export const MAX_CONNECTIONS_DEFAULTS = Object.freeze({
  client: CONTROL_DEFAULTS.client_max_connections,
  admin: CONTROL_DEFAULTS.admin_max_connections,
  agent: CONTROL_DEFAULTS.agent_max_connections,
});

/** A duration as an operator writes it, in whole days where it is some ("30d"), else as formatDurationMs writes it. */
function durationText(ms: number): string {
  return ms > 0 && ms % 86_400_000 === 0 ? `${ms / 86_400_000}d` : formatDurationMs(ms);
}

/** A size as an operator writes it ("64m"): the largest binary unit that divides it, bytes when none does. */
function sizeText(bytes: number): string {
  for (const [unit, factor] of [
    ['t', 2 ** 40],
    ['g', 2 ** 30],
    ['m', 2 ** 20],
    ['k', 2 ** 10],
  ] as const) {
    if (bytes > 0 && bytes % factor === 0) return `${bytes / factor}${unit}`;
  }
  return String(bytes);
}
