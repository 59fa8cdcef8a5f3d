// What the stand-in executables for the real engines (vllm, llama-server,
// rpc-server, python -m sglang.launch_server) do, so that adapter and
// supervisor tests run the exact command lines llmgw builds on a machine with
// no GPU and no Python. The executables import runStandIn from the built sim
// (so it lives here, in dist/); tests write them with
// test/support/engine-stand-ins.ts. Each stand-in appends its argv and
// engine environment to a record file, then reads only what it needs from
// the real engine's flags (host, port, served names, context length) and
// serves like the sim engine, with that engine's /metrics names and ready
// log line.
//
// Ranks that run no API server: `vllm … --headless` opens no port at all
// (as vLLM); SGLang `--node-rank` ≥ 1 serves only GET /health (200) on its
// --port, as SGLang's dummy health server does. `rpc-server` listens on TCP
// and speaks nothing. All stay up until SIGTERM/SIGINT, then exit 0.
//
// Two variables steer a stand-in at run time: LLMGW_STANDIN_SIM_ARGS adds sim
// flags ("--startup-delay-ms 500 --ttft-ms 20"), and LLMGW_STANDIN_EXIT
// ("1:CUDA out of memory") makes it print the message to stderr and exit with
// the code right after recording, for tests of start-up failures.
import { readFileSync } from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import { createServer as createTcpServer, type Server as TcpServer } from 'node:net';
import { parse as parseYaml } from 'yaml';
import { isLlmgwError } from '../../errors/index.js';
import { defaultSimCliIo, parseContextLength, parseSimEngineArgs, serveSimProcess, type SimCliIo } from './cli.js';
import { kvEventsConfigOptions, STAND_IN_KV_CACHE_BLOCKS } from './kv-publish.js';
import type { SimEngineOptions } from './options.js';
import { appendStartRecord, startRecord } from './record.js';

export const STAND_IN_PROGRAMS = ['vllm', 'llama-server', 'rpc-server', 'python', 'python3'] as const;
export type StandInProgram = (typeof STAND_IN_PROGRAMS)[number];

/** The file name of the record when neither the options nor $LLMGW_STANDIN_RECORD name one. */
export const DEFAULT_STAND_IN_RECORD = 'stand-in-record.jsonl';

/**
 * What a stand-in does with its command line; `planStandIn` decides,
 * `runStandIn` carries it out. "{port}" in a line is replaced by the bound
 * port, so a test may pass port 0 and read the real one from the line.
 */
export type StandInPlan =
  | { readonly kind: 'serve'; readonly options: SimEngineOptions; readonly readyLine: string }
  | { readonly kind: 'headless'; readonly line: string }
  | { readonly kind: 'tcp'; readonly host: string; readonly port: number; readonly line: string }
  | { readonly kind: 'health-only'; readonly host: string; readonly port: number; readonly line: string }
  | { readonly kind: 'exit'; readonly code: number; readonly message: string; readonly toStdout?: boolean };

/** Values after the first of `names` (`--x a b` or `--x=a`), up to the next flag; null when absent. */
function flagValues(argv: readonly string[], names: readonly string[]): string[] | null {
  for (let i = 0; i < argv.length; i++) {
    const token = argv[i]!;
    for (const name of names) {
      if (token.startsWith(`${name}=`)) return [token.slice(name.length + 1)];
      if (token !== name) continue;
      const values: string[] = [];
      for (let j = i + 1; j < argv.length && !argv[j]!.startsWith('-'); j++) values.push(argv[j]!);
      return values;
    }
  }
  return null;
}

function flagValue(argv: readonly string[], names: readonly string[]): string | undefined {
  return flagValues(argv, names)?.[0];
}

function portOf(argv: readonly string[], names: readonly string[], fallback: number): number | string {
  const text = flagValue(argv, names);
  if (text === undefined) return fallback;
  const port = Number(text);
  return Number.isInteger(port) && port >= 0 && port <= 65535
    ? port
    : `${names[0]}: want a port number, got ${JSON.stringify(text)}`;
}

function contextOf(argv: readonly string[], names: readonly string[]): number | string {
  const text = flagValue(argv, names);
  if (text === undefined) return 0;
  const len = parseContextLength(text);
  return Number.isFinite(len) ? len : `${names[0]}: want a token count like 4096 or 32k, got ${JSON.stringify(text)}`;
}

/**
 * --api-key as the three engines take it (one key; llama-server's comma list
 * is read as its first), or else what the engine reads in its place (vLLM
 * VLLM_API_KEY, llama-server LLAMA_API_KEY, SGLang its --config file), so a
 * stand-in refuses what the real engine would.
 */
function apiKeyOf(argv: readonly string[], fromEnv?: string): { apiKey?: string } {
  const key = (flagValue(argv, ['--api-key']) ?? fromEnv)?.split(',')[0];
  return key ? { apiKey: key } : {};
}

/**
 * The engine's TLS flags (vLLM and SGLang --ssl-certfile/--ssl-keyfile,
 * llama-server --ssl-cert-file/--ssl-key-file) as the sim's, so a stand-in
 * serves https where the real engine would.
 */
function tlsOf(argv: readonly string[], certFlag: string, keyFlag: string): { tlsCert?: string; tlsKey?: string } {
  const cert = flagValue(argv, [certFlag]);
  const key = flagValue(argv, [keyFlag]);
  return { ...(cert ? { tlsCert: cert } : {}), ...(key ? { tlsKey: key } : {}) };
}

function scheme(tls: { tlsCert?: string }): string {
  return tls.tlsCert === undefined ? 'http' : 'https';
}

/** The sim options `--kv-events-config` asks for (kv-publish.ts), with the engine's block size flag. */
function kvEventsOf(argv: readonly string[], blockFlag: string): SimEngineOptions | string {
  return kvEventsConfigOptions(flagValue(argv, ['--kv-events-config']), Number(flagValue(argv, [blockFlag])));
}

function usage(program: string, message: string): StandInPlan {
  return { kind: 'exit', code: 2, message: `${program} (llmgw stand-in): ${message}` };
}

/**
 * Reads a real engine's command line, and from `env` the variables the real
 * engine reads in place of a flag (the API key). Hosts default to 127.0.0.1 even where
 * the real engine binds all interfaces (vLLM): tests stay on loopback. Ports
 * default as the engines do (vLLM 8000, llama-server 8080, SGLang 30000,
 * rpc-server 50052).
 */
export function planStandIn(
  program: string,
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>> = {},
): StandInPlan {
  switch (program) {
    case 'vllm':
      if (argv[0] === '--version' || argv[0] === '-v')
        return { kind: 'exit', code: 0, message: '0.11.1+llmgw.stand.in', toStdout: true };
      if (argv[0] !== 'serve')
        return usage('vllm', `only \`vllm serve\` is simulated, got ${JSON.stringify(argv.join(' '))}`);
      return planVllm(argv.slice(1), 'vllm', env);
    case 'llama-server':
      return planLlamaServer(argv, env);
    case 'rpc-server': {
      const port = portOf(argv, ['-p', '--port'], 50052);
      if (typeof port === 'string') return usage('rpc-server', port);
      const host = flagValue(argv, ['-H', '--host']) ?? '127.0.0.1';
      return { kind: 'tcp', host, port, line: `Starting RPC server v3.0.0\n  endpoint       : ${host}:{port}` };
    }
    case 'python':
    case 'python3':
      if (argv[0] === '-m' && argv[1] === 'sglang.launch_server') return planSglang(argv.slice(2));
      if (argv[0] === '-m' && argv[1] === 'vllm.entrypoints.openai.api_server')
        return planVllm(argv.slice(2), program, env);
      return {
        kind: 'exit',
        code: 1,
        message: `${program} (llmgw stand-in): only \`-m sglang.launch_server\` and \`-m vllm.entrypoints.openai.api_server\` are simulated, got ${JSON.stringify(argv.join(' '))}`,
      };
    default:
      return usage(
        program,
        `no stand-in is named ${JSON.stringify(program)}; there are ${STAND_IN_PROGRAMS.join(', ')}`,
      );
  }
}

function planVllm(
  argv: readonly string[],
  program: string,
  env: Readonly<Record<string, string | undefined>>,
): StandInPlan {
  const model = argv[0] !== undefined && !argv[0].startsWith('-') ? argv[0] : flagValue(argv, ['--model']);
  if (model === undefined) return usage(program, 'no model given: pass it after `serve` or as --model');
  if (argv.includes('--headless')) return { kind: 'headless', line: `vLLM headless rank for ${model}: no API server` };
  const port = portOf(argv, ['--port'], 8000);
  if (typeof port === 'string') return usage(program, port);
  const maxModelLen = contextOf(argv, ['--max-model-len']);
  if (typeof maxModelLen === 'string') return usage(program, maxModelLen);
  const names = flagValues(argv, ['--served-model-name']);
  const host = flagValue(argv, ['--host']) || '127.0.0.1';
  const tls = tlsOf(argv, '--ssl-certfile', '--ssl-keyfile');
  const kv = kvEventsOf(argv, '--block-size');
  if (typeof kv === 'string') return usage(program, kv);
  return {
    kind: 'serve',
    options: {
      host,
      port,
      models: names && names.length > 0 ? names : [model],
      maxModelLen,
      flavor: 'vllm',
      ...kv,
      ...apiKeyOf(argv, env.VLLM_API_KEY),
      ...tls,
    },
    readyLine: `INFO: Starting vLLM API server 0 on ${scheme(tls)}://${host}:{port}`,
  };
}

function planLlamaServer(argv: readonly string[], env: Readonly<Record<string, string | undefined>>): StandInPlan {
  if (argv.includes('--version'))
    return { kind: 'exit', code: 0, message: 'version: 0 (llmgw stand-in)', toStdout: true };
  const model = flagValue(argv, ['-m', '--model']);
  if (model === undefined) return usage('llama-server', 'no model given: pass -m PATH');
  const port = portOf(argv, ['--port'], 8080);
  if (typeof port === 'string') return usage('llama-server', port);
  const maxModelLen = contextOf(argv, ['-c', '--ctx-size']);
  if (typeof maxModelLen === 'string') return usage('llama-server', maxModelLen);
  const alias = flagValue(argv, ['-a', '--alias']);
  const names = alias
    ? alias
        .split(',')
        .map((a) => a.trim())
        .filter((a) => a !== '')
    : [];
  const host = flagValue(argv, ['--host']) ?? '127.0.0.1';
  const tls = tlsOf(argv, '--ssl-cert-file', '--ssl-key-file');
  return {
    kind: 'serve',
    options: {
      host,
      port,
      models: names.length > 0 ? names : [model],
      maxModelLen,
      flavor: 'llamacpp',
      ...apiKeyOf(argv, env.LLAMA_API_KEY),
      ...tls,
    },
    readyLine: `main: server is listening on ${scheme(tls)}://${host}:{port} - starting the main loop`,
  };
}

/**
 * The `api-key` of SGLang's --config file (a YAML mapping of its flags, with
 * dashes or underscores), as SGLang merges it under the command line's own
 * flags; undefined when no file is named or it names no key. A string when
 * the file cannot be read: SGLang refuses to start then too.
 */
function sglangConfigKey(argv: readonly string[]): { key?: string } | string {
  const file = flagValue(argv, ['--config']);
  if (file === undefined) return {};
  if (!/\.ya?ml$/i.test(file)) return `--config: the file must be YAML (.yaml or .yml), got ${JSON.stringify(file)}`;
  let doc: unknown;
  try {
    doc = parseYaml(readFileSync(file, 'utf8'));
  } catch (err) {
    return `--config ${file}: ${err instanceof Error ? err.message : String(err)}`;
  }
  if (doc === null || doc === undefined) return {};
  if (typeof doc !== 'object' || Array.isArray(doc)) return `--config ${file}: want a mapping of flags to values`;
  const key = (doc as Record<string, unknown>)['api-key'] ?? (doc as Record<string, unknown>).api_key;
  return key === undefined || key === null ? {} : { key: String(key) };
}

function planSglang(argv: readonly string[]): StandInPlan {
  const fromConfig = sglangConfigKey(argv);
  if (typeof fromConfig === 'string') return usage('sglang', fromConfig);
  const model = flagValue(argv, ['--model-path', '--model']);
  if (model === undefined) return usage('sglang', 'no model given: pass --model-path');
  const port = portOf(argv, ['--port'], 30000);
  if (typeof port === 'string') return usage('sglang', port);
  const host = flagValue(argv, ['--host']) ?? '127.0.0.1';
  const rank = Number(flagValue(argv, ['--node-rank']) ?? '0');
  if (rank >= 1)
    return {
      kind: 'health-only',
      host,
      port,
      line: `SGLang node rank ${rank}: dummy health server on http://${host}:{port}`,
    };
  const maxModelLen = contextOf(argv, ['--context-length']);
  if (typeof maxModelLen === 'string') return usage('sglang', maxModelLen);
  const name = flagValue(argv, ['--served-model-name']);
  const kv = kvEventsOf(argv, '--page-size');
  if (typeof kv === 'string') return usage('sglang', kv);
  return {
    kind: 'serve',
    // The command line's --api-key wins over the file's, as SGLang merges them.
    options: {
      host,
      port,
      models: [name ?? model],
      maxModelLen,
      flavor: 'sglang',
      ...kv,
      ...apiKeyOf(argv, fromConfig.key),
      ...tlsOf(argv, '--ssl-certfile', '--ssl-keyfile'),
    },
    readyLine: 'The server is fired up and ready to roll!',
  };
}

export interface StandInRunOptions {
  /** Where to append the record; $LLMGW_STANDIN_RECORD wins; absent and unset = no record. */
  recordFile?: string;
  /** Sim flags added to every serve (before $LLMGW_STANDIN_SIM_ARGS). */
  simArgs?: string[];
  io?: Partial<SimCliIo>;
}

/** The body of every stand-in executable: record, then carry out the plan. Resolves with the exit code given to io.exit. */
export async function runStandIn(
  program: string,
  argv: readonly string[],
  options: StandInRunOptions = {},
): Promise<number> {
  const io = defaultSimCliIo(options.io);
  const recordFile = io.env.LLMGW_STANDIN_RECORD || options.recordFile;
  if (recordFile) appendStartRecord(recordFile, startRecord(program, argv, io.env));
  const forced = io.env.LLMGW_STANDIN_EXIT;
  if (forced) {
    const match = /^(\d+)(?::([\s\S]*))?$/.exec(forced);
    const code = match ? Number(match[1]) : 1;
    io.stderr.write(`${match ? (match[2] ?? '') : forced}\n`);
    io.exit(code);
    return code;
  }
  const plan = planStandIn(program, argv, io.env);
  switch (plan.kind) {
    case 'exit':
      (plan.toStdout ? io.stdout : io.stderr).write(`${plan.message}\n`);
      io.exit(plan.code);
      return plan.code;
    case 'serve': {
      let simOptions: SimEngineOptions;
      try {
        const extra = (io.env.LLMGW_STANDIN_SIM_ARGS ?? '').split(/\s+/).filter((t) => t !== '');
        simOptions = { ...parseSimEngineArgs([...(options.simArgs ?? []), ...extra]), ...plan.options };
        // Events need a cache to tell of: a default one unless the sim flags size it.
        if (simOptions.kvEventsEndpoint !== undefined && !simOptions.kvCacheBlocks)
          simOptions = { ...simOptions, kvCacheBlocks: STAND_IN_KV_CACHE_BLOCKS };
      } catch (err) {
        io.stderr.write(`${program} (llmgw stand-in): ${isLlmgwError(err) ? err.message : String(err)}\n`);
        io.exit(2);
        return 2;
      }
      return serveSimProcess(simOptions, io, (engine) => [plan.readyLine.replace('{port}', String(engine.port))]);
    }
    case 'headless':
      return stayUp(io, plan.line, null);
    case 'tcp':
      return stayUp(io, plan.line, {
        host: plan.host,
        port: plan.port,
        server: createTcpServer((socket) => socket.on('error', () => {})),
      });
    case 'health-only':
      return stayUp(io, plan.line, {
        host: plan.host,
        port: plan.port,
        server: createHttpServer((req, res) => {
          const ok = req.method === 'GET' && req.url === '/health';
          res.writeHead(ok ? 200 : 404, { 'content-type': 'application/json' });
          res.end(
            ok
              ? '{}'
              : '{"error":{"message":"rank ≥ 1 serves only /health; send requests to rank 0","type":"NotFoundError","param":null,"code":404}}',
          );
        }),
      });
  }
}

/** Keeps the process up (listening on `listen` if given) until a signal, then exits 0. */
async function stayUp(
  io: SimCliIo,
  line: string,
  listen: { host: string; port: number; server: TcpServer } | null,
): Promise<number> {
  if (listen) {
    try {
      await new Promise<void>((ok, fail) => {
        listen.server.once('error', fail);
        listen.server.listen({ host: listen.host, port: listen.port }, ok);
      });
    } catch (err) {
      io.stderr.write(
        `cannot listen on ${listen.host}:${listen.port}: ${(err as NodeJS.ErrnoException).code ?? String(err)}\n`,
      );
      io.exit(1);
      return 1;
    }
  }
  const bound = listen?.server.address();
  io.stdout.write(`${line.replace('{port}', String(bound && typeof bound === 'object' ? bound.port : ''))}\n`);
  // A headless rank has no socket to keep the event loop alive; this timer does.
  const keepAlive = setInterval(() => {}, 2 ** 30);
  await new Promise<void>((stop) => {
    const off = io.onTerminate(() => {
      off();
      stop();
    });
  });
  clearInterval(keepAlive);
  if (listen) {
    listen.server.close();
    if ('closeAllConnections' in listen.server)
      (listen.server as unknown as { closeAllConnections(): void }).closeAllConnections();
  }
  io.exit(0);
  return 0;
}
