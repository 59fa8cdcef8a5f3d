// `llmgw gateway`: the client listener as a process of its own, reading what
// it routes from the store its control plane writes (src/control/gateway-process.ts),
// one or several per host. This file is the command and its flags; what it
// runs (one gateway, or a primary and its node:cluster workers) is
// gateway-run.ts, imported only when the command runs so that `--help` and
// every other llmgw command do not load the control plane for it.
import { Command, Option } from 'commander';
import type { ControlOptions } from '../control/index.js';
import { CONTROL_DEFAULTS } from '../control/config/defaults.js';

/** The control plane's keys a gateway reads, one line of help each; the rest of a shared config file is ignored. */
const GATEWAY_FLAG_HELP: Partial<Record<keyof ControlOptions, string>> = {
  store: "the control plane's store: sqlite:PATH or a postgres:// URL, as `llmgw control` has it",
  client_addr: 'client (inference) listener, host:port',
  catalog: "the control plane's YAML catalog file, if it has one (its models are not in the store)",
  api_keys: 'required or off (no API key asked; loopback client_addr only)',
  log_level: 'fatal, error, warn, info, debug, trace or silent',
  client_headers_timeout: 'how long a client may take for its TLS handshake, then its request headers',
  client_max_connections:
    'most connections each gateway process holds at once, lowered to fit the open-file limit; 0 = no cap',
  upstream_headers_timeout: 'from a request sent to an engine to its response headers',
  idle_body_timeout: 'the longest silence in a request or response body',
  request_timeout: 'a whole client request, holds and retries included',
  cold_start_timeout: 'how long a request waits for a model with no ready replica while one starts',
  max_held_per_key:
    'most requests of one API key waiting in one gateway process for models with no ready replica; then 429',
  prefix_cache_tokens_per_request:
    'prefix-cache routing: uncached prompt tokens weighed as one request of load; 0 = the cache is not weighed',
  prefix_cache_max_blocks: "prefix-cache routing: most (replica, block) entries each gateway process's index keeps",
  prefix_cache_prompts: 'prefix-cache routing: most prompts each gateway process keeps tokenised',
  prefix_cache_tokenize_timeout: "prefix-cache routing: longest wait for an engine's /tokenize (in the background)",
  cors_origins: 'web origins allowed to call the listener from a browser, comma-separated, or *',
  tls_cert: 'PEM certificate the listener serves TLS with; absent = plain HTTP',
  tls_key: 'PEM private key for tls_cert',
  client_tls_cert: 'PEM certificate for the client listener, replacing tls_cert',
  client_tls_key: 'PEM private key for client_tls_cert',
  engine_ca: "PEM CA engines' certificates are signed by; absent = the system's CAs",
  client_hosts: 'host names the listener answers to besides its address and loopback, comma-separated',
  responses_ttl: 'how long a Responses API response is kept for previous_response_id',
  responses_max_per_key: 'most bytes of Responses API responses one key keeps; 0 = none',
  max_upload_size: 'largest upload the listener reads, an audio file for transcriptions',
  heap_growing_percent: "V8's heap growing percent for each gateway process; 0 = V8's own heuristic",
  otlp_endpoint: 'OpenTelemetry collector for traces over OTLP/HTTP; absent = OTEL_EXPORTER_OTLP_ENDPOINT, else none',
  trace_sample_ratio: "share of new traces kept, 0..1; a client's traceparent decides for its own",
  trace_content: 'true records prompts and whole answers on spans (never otherwise)',
  gpu_prices:
    "the control plane's gpu_prices: set, this process meters the GPU-priced tokens it serves (its prices go unused: the leader prices GPU-hours)",
};

export function gatewayCommand(): Command {
  const command = new Command('gateway')
    .description(
      'run the client listener alone, routing by what the control plane writes to the store (several per host with --workers)',
    )
    .addOption(
      new Option(
        '--config <file>',
        "YAML configuration file (the control plane's; keys a gateway has no use for are ignored)",
      ),
    );
  // Defaults printed from the control plane's table, as `llmgw control --help` prints them: one place each is written.
  const defaults: Readonly<Record<string, string | number | boolean>> = CONTROL_DEFAULTS;
  for (const [key, help] of Object.entries(GATEWAY_FLAG_HELP)) {
    const text = key in defaults ? `${help} (default: ${defaults[key]})` : help;
    command.addOption(new Option(`--${key.replaceAll('_', '-')} <value>`, text));
  }
  command
    .addOption(
      new Option(
        '--workers <n>',
        'gateway processes to run on the one client_addr port (node:cluster; each takes connections in turn, a dead one is restarted); 0 or absent = 1, in this process',
      ),
    )
    .addOption(
      new Option(
        '--metrics-addr <host:port>',
        "serve Prometheus /metrics here, every worker's summed; no token is asked, so bind it where only the scraper reaches (absent = no metrics)",
      ),
    )
    .action(async (opts: Record<string, string | undefined>) => {
      const { runGateway } = await import('./gateway-run.js');
      await runGateway(opts, configFlags(opts));
    });
  return command;
}

/** The control plane's keys given as flags, by their config names (commander reads `--client-addr` as `clientAddr`). */
function configFlags(opts: Record<string, string | undefined>): Record<string, string> {
  const flags: Record<string, string> = {};
  for (const key of Object.keys(GATEWAY_FLAG_HELP)) {
    const camel = key.replace(/_([a-z])/g, (_m, c: string) => c.toUpperCase());
    const value = opts[camel];
    if (value !== undefined) flags[key] = value;
  }
  return flags;
}
