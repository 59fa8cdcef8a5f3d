// The `llmgw` command line as commander sees it: every subcommand and flag,
// built by a function so that a test can walk the options and read --help
// without running anything (main.ts parses process.argv with it). Each
// command's code is imported when it runs, not here: every process llmgw
// starts (an agent's engines, each `llmgw ctl` call) would otherwise load the
// control plane, the agent and the gateway first, a second of CPU. No option
// declares a default: each part's table (CONTROL_DEFAULTS, AGENT_DEFAULTS,
// CLI_DEFAULTS) is the one place a default is written, the command fills
// what is absent from it, and the help text prints it from there.
import { Command, Option } from 'commander';
import { AGENT_DEFAULTS } from '../agent/defaults/index.js';
import { CONTROL_DEFAULTS } from '../control/config/defaults.js';
import type { ControlOptions } from '../control/index.js';
import { formatDurationMs } from '../units/index.js';
import type { AgentFlags } from './agent.js';
import type { RotateSecretsFlags } from './rotate-secrets.js';
import { gatewayCommand } from './gateway.js';
import { CLI_DEFAULTS } from './defaults.js';
import type { InstallServiceFlags } from './service.js';
import type { TlsInitFlags } from './tls.js';
import type { UpFlags } from './up.js';
import { LLMGW_VERSION } from '../version.js';

/** A repeatable flag's values in order; absent until the flag is first given (the command reads absent as none). */
const collect = (value: string, previous: string[] | undefined): string[] => [...(previous ?? []), value];

/** Help text ending with the default it prints from a table. */
const withDefault = (help: string, value: string | number | boolean): string => `${help} (default: ${value})`;

const ms = formatDurationMs;

export function buildProgram(): Command {
  const program = new Command()
    .name('llmgw')
    .description('One OpenAI-compatible endpoint in front of your GPU fleet')
    // From package.json beside dist/: npm_package_version is set only under `npm run`, never for an installed llmgw.
    .version(LLMGW_VERSION)
    .showHelpAfterError()
    .exitOverride((err) => {
      process.exit(err.exitCode === 0 ? 0 : 2);
    });

  const control = program.command('control').description('run the control plane (client, admin and agent listeners)');
  control.addOption(new Option('--config <file>', 'YAML configuration file'));
  for (const [key, help] of Object.entries(controlFlagHelp())) {
    // A switch, not a key with a value: running without an admin token must be said outright.
    control.addOption(
      new Option(`--${key.replaceAll('_', '-')}${key === 'insecure_no_admin_token' ? '' : ' <value>'}`, help),
    );
  }
  control.addOption(
    new Option('--allow-http-sources', 'accept http:// weight sources (tests on loopback only)').hideHelp(),
  );
  control.action(async (opts: Record<string, string | boolean | undefined>) => {
    const { runControl } = await import('./control.js');
    await runControl(opts);
  });
  control
    .command('rotate-secrets')
    .description(
      're-wrap every remote API key sealed in the store under a new key file (then set secrets_key_file to it)',
    )
    .requiredOption('--new-key-file <file>', 'the new key (64 hex digits, mode 600); made when it does not exist')
    .option('--config <file>', 'YAML configuration file, as for llmgw control')
    .option('--store <value>', 'sqlite:PATH or a postgres:// URL (default: from the configuration)')
    .option('--secrets-key-file <file>', 'the current key file (default: from the configuration)')
    .action(async (opts: RotateSecretsFlags) => {
      const { runRotateSecrets } = await import('./rotate-secrets.js');
      await runRotateSecrets(opts);
    });
  program.addCommand(gatewayCommand());

  program
    .command('agent')
    .description('run the node agent: report this machine to the control plane and run its shards')
    .requiredOption(
      '--control <urls>',
      'control plane agent URL(s), comma-separated for failover, e.g. http://10.0.0.1:8082',
    )
    .option(
      '--join-token-file <file>',
      "a file (owner-only) holding the control plane's join token (or set LLMGW_JOIN_TOKEN)",
    )
    .option(
      '--join-token <token>',
      'the join token itself; shown to every user by ps, so prefer --join-token-file or LLMGW_JOIN_TOKEN',
    )
    .option('--node-id <id>', 'node id (default: from /etc/machine-id and the hostname)')
    .option('--labels <k=v,...>', 'node labels for pool selectors')
    .option(
      '--state-dir <dir>',
      withDefault('where the agent keeps its credential and engine records', AGENT_DEFAULTS.stateDir),
    )
    .option('--cache-dir <dir>', 'weight cache directory (default: <state-dir>/cache)')
    .option('--model-dir <dir>', 'an operator model directory, used in place and never deleted (repeatable)', collect)
    .option(
      '--mgmt-addr <host:port>',
      withDefault('management API listener; port 0 = a free one', AGENT_DEFAULTS.mgmtAddr),
    )
    .option(
      '--simulate <spec>',
      'declare the hardware instead of probing it, e.g. gpus=8xh100-80gb,ram=2048g,disk=/data:3.5t:local',
    )
    .option('--fabric <name=address>', 'a fabric this node is on (repeatable), e.g. ib0=10.1.0.5', collect)
    .option(
      '--heartbeat-interval <duration>',
      withDefault('how often to report when the control plane does not say', ms(AGENT_DEFAULTS.heartbeatIntervalMs)),
    )
    .option(
      '--control-deadline <duration>',
      'how long past its long-poll wait a control plane may take to answer before the agent tries the next --control URL (default: from the stale window the control plane announces; joins 10s)',
    )
    .option('--log-level <level>', withDefault('pino level', AGENT_DEFAULTS.logLevel))
    .option(
      '--engine-host <address>',
      withDefault('address engines bind (0.0.0.0 or a fabric address for a fleet)', AGENT_DEFAULTS.engineHost),
    )
    .option(
      '--advertise-host <address>',
      "the address the control plane reaches engines and the management API at (default: --engine-host; for 0.0.0.0, this machine's address on the route to the control plane)",
    )
    .option(
      '--port-range <first-last>',
      withDefault('ports for engines', `${AGENT_DEFAULTS.firstPort}-${AGENT_DEFAULTS.lastPort}`),
    )
    .option(
      '--liveness-interval <duration>',
      withDefault(
        'how often a ready engine is health-checked again to catch a hang; 0 = never',
        ms(AGENT_DEFAULTS.livenessIntervalMs),
      ),
    )
    .option(
      '--liveness-failures <n>',
      withDefault(
        'failed health checks in a row after which a ready engine is stopped and restarted',
        AGENT_DEFAULTS.livenessFailures,
      ),
    )
    .option(
      '--load-interval <duration>',
      withDefault(
        "how often ready engines' /metrics are read for load-aware routing; 0 = never",
        ms(AGENT_DEFAULTS.loadIntervalMs),
      ),
    )
    .option(
      '--ca <file>',
      "PEM CA the control plane's certificate must chain to (or LLMGW_CA; default: the system's CAs)",
    )
    .option(
      '--insecure-http',
      'allow an http:// --control URL on another machine (the join token then crosses the network in clear)',
    )
    .option(
      '--tls-cert <file>',
      'PEM certificate the management API serves TLS with (the control plane then needs agent_ca)',
    )
    .option('--tls-key <file>', 'PEM private key for --tls-cert')
    .option(
      '--engine-tls',
      'engines serve https with --tls-cert/--tls-key (the control plane then needs engine_ca); probes verify them against --ca',
    )
    .option(
      '--allow-unsafe-profile-env',
      'start engines whose profile env sets a loader or interpreter hook (LD_PRELOAD, NODE_OPTIONS, …); the control plane can then run code on this node',
    )
    .option(
      '--otlp-endpoint <url>',
      "OpenTelemetry collector for this agent's shard traces over OTLP/HTTP, e.g. http://127.0.0.1:4318; vLLM is started with --otlp-traces-endpoint too (default: OTEL_EXPORTER_OTLP_ENDPOINT, else no traces)",
    )
    .addOption(new Option('--allow-http-sources', 'accept http:// weight sources (tests on loopback only)').hideHelp())
    .action(async (opts: AgentFlags) => {
      const { runAgent } = await import('./agent.js');
      await runAgent(opts);
    });

  const engine = program.command('engine').description('engines that ship with llmgw');
  engine
    .command('sim')
    .description('a simulated OpenAI-compatible engine for tests and benchmarks (--help for its flags)')
    .helpOption(false)
    .allowUnknownOption()
    .allowExcessArguments()
    .action(async (_opts: unknown, cmd: Command) => {
      const { runSimEngineCli } = await import('../engine/sim/index.js');
      process.exitCode = await runSimEngineCli(cmd.args);
    });
  engine
    .command('builtin')
    .description("llmgw's own CPU engine over a GGUF file (--help for its flags)")
    .helpOption(false)
    .allowUnknownOption()
    .allowExcessArguments()
    .action(async (_opts: unknown, cmd: Command) => {
      const { runBuiltinEngineCli } = await import('../engine/builtin/index.js');
      process.exitCode = await runBuiltinEngineCli(cmd.args);
    });

  program
    .command('dev')
    .description('developer tools')
    .command('make-model')
    .description('write a tiny llama GGUF with seeded random weights (for tests and the demo)')
    .helpOption(false)
    .allowUnknownOption()
    .allowExcessArguments()
    .action(async (_opts: unknown, cmd: Command) => {
      const { runMakeModelCli } = await import('../dev/make-model/index.js');
      process.exitCode = await runMakeModelCli(cmd.args);
    });

  program
    .command('up')
    .description('a control plane and an agent for this machine, with a demo model: the quick start')
    .option('--data-dir <dir>', withDefault('where the store, secrets, models and logs live', CLI_DEFAULTS.up.dataDir))
    .option('--client-addr <host:port>', withDefault('the OpenAI-compatible listener', CONTROL_DEFAULTS.client_addr))
    .option('--admin-addr <host:port>', withDefault('the admin API and dashboard', CONTROL_DEFAULTS.admin_addr))
    .option('--agent-addr <host:port>', withDefault('the agent listener', CONTROL_DEFAULTS.agent_addr))
    .option('--log-level <level>', withDefault('pino level for the log file', CONTROL_DEFAULTS.log_level))
    .action(async (opts: UpFlags) => {
      const { runUp } = await import('./up.js');
      await runUp(opts);
    });

  program
    .command('tls')
    .description('TLS certificates for the control plane and agents')
    .command('init')
    .description('make a private CA and certificates signed by it for the control plane and each node named')
    .argument('<dir>', 'where to write them (created 0700; keys 0600)')
    .option(
      '--name <node[=host,...]>',
      'a node id to make a certificate for, with any more names or addresses it is reached by (repeatable)',
      collect,
    )
    .option(
      '--host <name>',
      'a DNS name or address the control plane is reached by (repeatable; localhost, 127.0.0.1 and ::1 are always in)',
      collect,
    )
    .option(
      '--days <n>',
      withDefault(
        'how long the control plane and node certificates are valid; the CA lives 10 years',
        CLI_DEFAULTS.tlsInit.days,
      ),
    )
    .option('--force', 'replace files that exist (a new CA: certificates it signed before stop being trusted)')
    .action(async (dir: string, opts: TlsInitFlags) => {
      const { runTlsInit } = await import('./tls.js');
      await runTlsInit(dir, opts);
    });

  program
    .command('install-service')
    .description('write a systemd unit and an environment file for the control plane or a node agent')
    .argument('<kind>', 'control (the control plane) or agent (a GPU node)')
    .option('--print', 'print the unit and write nothing')
    .option('--unit-dir <dir>', withDefault('where the unit goes', CLI_DEFAULTS.installService.unitDir))
    .option(
      '--env-dir <dir>',
      withDefault(
        'where the environment file with the tokens goes (written 0600, never overwritten)',
        CLI_DEFAULTS.installService.envDir,
      ),
    )
    .option('--user <name>', withDefault('the system user the service runs as', CLI_DEFAULTS.installService.user))
    .option(
      '--state-name <name>',
      withDefault(
        'its state directory under /var/lib, made by systemd for the user',
        CLI_DEFAULTS.installService.stateName,
      ),
    )
    .option('--node <path>', 'the node binary the unit runs (default: this one)')
    .action(async (kind: string, opts: InstallServiceFlags) => {
      const { runInstallService } = await import('./service.js');
      runInstallService(kind, opts);
    });

  program
    .command('ctl')
    .description('the operator CLI over the admin API (llmgw ctl --help for its commands)')
    .helpOption(false)
    .allowUnknownOption()
    .allowExcessArguments()
    .action(async (_opts: unknown, cmd: Command) => {
      const { runCtl } = await import('../ctl/index.js');
      process.exitCode = await runCtl(cmd.args);
    });

  return program;
}

/** One line per config key; typed by the options' own keys, so a key added to the config without a flag fails to compile. */
function controlFlagHelp(): Record<keyof ControlOptions, string> {
  const help: Record<keyof ControlOptions, string> = {
    client_addr: 'client (inference) listener, host:port',
    admin_addr: 'admin API and dashboard listener',
    agent_addr: 'node agent listener',
    store: 'sqlite:PATH, a postgres:// URL, or none',
    catalog: 'YAML file of models loaded at start',
    admin_token: 'the admin token itself; shown to every user by ps, so prefer --admin-token-file or LLMGW_ADMIN_TOKEN',
    admin_token_file:
      'file (owner-only) holding the token admin requests must carry (default: one made in the data directory)',
    insecure_no_admin_token:
      'with no admin token configured, make none: every user of this machine can then use the admin API on loopback',
    join_token: 'the join token itself; shown to every user by ps, so prefer --join-token-file or LLMGW_JOIN_TOKEN',
    join_token_file: 'file (owner-only) holding the token node agents present to join',
    join_approval: 'auto or manual (new nodes, and nodes whose GPUs change, wait for ctl nodes approve)',
    api_keys: 'required or off (no API key asked; loopback client_addr only)',
    log_level: 'fatal, error, warn, info, debug, trace or silent',
    node_stale_after: 'a node silent this long is stale',
    node_lost_after: 'a node silent this long is lost and its work moved',
    reconcile_interval: 'how often the reconciler runs without being notified',
    client_headers_timeout:
      'how long a client of any listener may take to finish its TLS handshake, then to send its request headers',
    client_max_connections:
      'most connections the client listener holds at once; 0 = no cap; the default is lowered to fit the open-file limit',
    admin_max_connections:
      'most connections the admin listener holds at once; 0 = no cap; the default is lowered to fit the open-file limit',
    agent_max_connections:
      "most connections the agent listener holds at once, one per node's heartbeat; 0 = no cap; the default is lowered to fit the open-file limit",
    upstream_headers_timeout: 'from a request sent to an engine to its response headers',
    idle_body_timeout:
      'the longest silence in a request or response body; on the admin and agent listeners, most a request body may take',
    request_timeout: 'a whole client request, holds and retries included',
    cold_start_timeout: 'how long a request waits for a model with no ready replica while one starts',
    max_held_per_key: 'most requests of one API key waiting for models with no ready replica; then 429',
    prefix_cache_tokens_per_request:
      'prefix-cache routing: uncached prompt tokens weighed as one request of load; 0 = the cache is not weighed',
    prefix_cache_max_blocks: "prefix-cache routing: most (replica, block) entries the gateway's index keeps",
    prefix_cache_prompts: 'prefix-cache routing: most prompts kept tokenised for the next turn',
    prefix_cache_tokenize_timeout: "prefix-cache routing: longest wait for an engine's /tokenize (in the background)",
    max_creates_per_pass: 'most replicas the reconciler creates in one pass (default 10% of the fleet, at least 10)',
    cors_origins:
      'web origins allowed to call the client listener from a browser, comma-separated, or * (default none)',
    tls_cert: 'PEM certificate all three listeners serve TLS with (default: plain HTTP)',
    tls_key: 'PEM private key for tls_cert',
    client_tls_cert: 'PEM certificate for the client listener alone, replacing tls_cert there',
    client_tls_key: 'PEM private key for client_tls_cert',
    agent_ca: "PEM CA agents' management certificates are signed by; set = call agents over https",
    engine_ca:
      "PEM CA engines' certificates are signed by (agents with --engine-tls); https endpoints are verified against it (default: the system's CAs)",
    allow_unsafe_profile_env:
      'true accepts loader and interpreter hooks (LD_PRELOAD, NODE_OPTIONS, …) in profile env; whoever adds a model then runs code on every node',
    admin_hosts:
      'host names the admin listener answers to besides its address and loopback, comma-separated (default none)',
    client_hosts:
      'host names the client listener answers to besides its address and loopback, comma-separated (default none)',
    metrics_public: 'true: /metrics answers without the admin token',
    responses_ttl: 'how long a Responses API response is kept for previous_response_id',
    responses_max_per_key: 'most bytes of Responses API responses one key keeps, oldest dropped first; 0 = none',
    max_upload_size: 'largest upload the client listener reads, an audio file for transcriptions',
    files_dir: 'where /v1/files keeps file bytes; default files beside a SQLite store, required on Postgres',
    files_max_size: 'largest file /v1/files takes (413 past it)',
    batch_max_lines: 'most requests in one batch input file',
    batch_lease: "how long a batch runner's claim on a line lasts unrenewed before another may take it",
    batch_min_completion_window: 'shortest completion_window a batch may ask for (OpenAI: 24h)',
    batch_headroom: "share of a model's places, 0..1, batch lines leave free for interactive requests (default 0.5)",
    budget_renew_wait:
      'how long a request whose lease of a hard budget ran dry waits for the store to renew it before 503 LLMGW_BUDGET_UNSETTLED; 0 = no wait (default 500ms)',
    heap_growing_percent:
      "how far past the live heap V8 lets old space grow before collecting it, percent; 50 suits thousands of long-polled nodes; 0 = V8's own heuristic",
    otlp_endpoint:
      'OpenTelemetry collector to send traces to over OTLP/HTTP, e.g. http://127.0.0.1:4318 (default: OTEL_EXPORTER_OTLP_ENDPOINT, else no traces)',
    trace_sample_ratio: "share of new traces kept, 0..1; a client's traceparent decides for its own",
    trace_content: 'true records prompts and whole answers on spans (never otherwise)',
    secrets_key_file:
      "file of 64 hex digits (mode 600) sealing remote endpoints' API keys kept in the store (default none: such keys are refused)",
    remote_probe_interval: 'how often each remote endpoint and peer llmgw is probed',
    oidc_issuer:
      "OpenID Connect provider's issuer URL for signing in to the dashboard and ctl (default: no single sign-on)",
    oidc_client_id: 'the client id registered at the provider',
    oidc_client_secret:
      "the client's secret; shown by ps, so prefer --oidc-client-secret-file (default: a public client, PKCE alone)",
    oidc_client_secret_file: "file (owner-only) holding the client's secret",
    oidc_redirect_url: 'where the provider sends browsers back: https://<admin address>/login/oidc/callback',
    oidc_scopes: 'scopes asked of the provider, space- or comma-separated',
    oidc_groups_claim: "the claim listing a person's groups",
    oidc_name_claim: 'the claim naming a person (then preferred_username, then sub)',
    oidc_group_roles:
      'group=role pairs, comma-separated; group=team-admin:team for a team-admin; in no listed group = refused',
    oidc_allow_insecure: 'true allows an http:// issuer (loopback tests only)',
    gpu_prices:
      'US dollars per GPU-hour by GPU class, H100=2.5,A10G=0.75: models with no token price are charged the GPU-hours their replicas hold',
  };
  // The default printed from the table, never written here: a key with none keeps its own words on absence.
  for (const [key, value] of Object.entries(CONTROL_DEFAULTS)) {
    const k = key as keyof ControlOptions;
    help[k] = withDefault(help[k], value);
  }
  return help;
}
