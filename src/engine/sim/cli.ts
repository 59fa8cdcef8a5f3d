// `llmgw engine sim`: the sim engine as a process, the way a supervisor runs
// vLLM. Flags map one to one onto SimEngineOptions; the process prints one
// "listening" line when it serves, exits 0 after a graceful SIGTERM, and 1
// when --crash-after makes it crash. The process plumbing (signals, exit,
// stdout) is injected so that the stand-ins reuse it and tests can drive it.
import { ValidationError, isLlmgwError } from '../../errors/index.js';
import { nearestName } from '../../units/index.js';
import { apiKeyFlagWarning, ENGINE_API_KEY_ENV, engineApiKey } from '../api-key.js';
import { compileSimEngineOptions, type SimEngineOptions } from './options.js';
import { appendStartRecord, startRecord } from './record.js';
import { startSimEngine, type SimEngine } from './server.js';

/** The process around the CLI; every member has a default that uses the real process. */
export interface SimCliIo {
  readonly stdout: { write(text: string): unknown };
  readonly stderr: { write(text: string): unknown };
  readonly env: NodeJS.ProcessEnv;
  /** Ends the process with `code` once the engine has stopped. Default: process.exit. */
  readonly exit: (code: number) => void;
  /** Calls `handler` on SIGTERM and SIGINT until the returned function is called. */
  readonly onTerminate: (handler: (signal: NodeJS.Signals) => void) => () => void;
}

export function defaultSimCliIo(overrides: Partial<SimCliIo> = {}): SimCliIo {
  return {
    stdout: overrides.stdout ?? process.stdout,
    stderr: overrides.stderr ?? process.stderr,
    env: overrides.env ?? process.env,
    exit: overrides.exit ?? ((code) => process.exit(code)),
    onTerminate:
      overrides.onTerminate ??
      ((handler) => {
        process.on('SIGTERM', handler);
        process.on('SIGINT', handler);
        return () => {
          process.off('SIGTERM', handler);
          process.off('SIGINT', handler);
        };
      }),
  };
}

/** 'file': the value names a file whose text is the option (a secret kept off the command line). */
type FlagKind = 'string' | 'number' | 'length' | 'list' | 'boolean' | 'file';

/** Each flag, the option it sets and how its text is read. */
const FLAGS: Readonly<Record<string, { key: keyof SimEngineOptions; kind: FlagKind; help: string }>> = {
  '--host': { key: 'host', kind: 'string', help: 'address to bind (default 127.0.0.1)' },
  '--port': { key: 'port', kind: 'number', help: 'TCP port; 0 picks a free one (default 0)' },
  '--model': {
    key: 'models',
    kind: 'list',
    help: 'a served model name; repeat for aliases, the first is canonical (default sim)',
  },
  '--ttft-ms': { key: 'ttftMs', kind: 'number', help: 'time to first token in ms (default 0)' },
  '--tokens-per-second': {
    key: 'tokensPerSecond',
    kind: 'number',
    help: 'token rate per request; 0 = as fast as possible (default 0)',
  },
  '--max-concurrency': {
    key: 'maxConcurrency',
    kind: 'number',
    help: 'requests generating at once; 0 = unlimited (default 0)',
  },
  '--overflow': {
    key: 'overflow',
    kind: 'string',
    help: 'beyond --max-concurrency: queue or reject (429 with Retry-After) (default queue)',
  },
  '--error-rate': {
    key: 'errorRate',
    kind: 'number',
    help: 'share of requests answered 500, 0..1, repeatable with --seed (default 0)',
  },
  '--crash-after': {
    key: 'crashAfterRequests',
    kind: 'number',
    help: 'exit with code 1 after N requests; 0 = never (default 0)',
  },
  '--hang': { key: 'hang', kind: 'boolean', help: 'accept connections, never answer (not even /health)' },
  '--hang-after': { key: 'hangAfterRequests', kind: 'number', help: 'hang after N requests; 0 = never (default 0)' },
  '--startup-delay-ms': {
    key: 'startupDelayMs',
    kind: 'number',
    help: '/health answers 503 loading for this long (default 0)',
  },
  '--embedding-dim': { key: 'embeddingDim', kind: 'number', help: 'components per embedding (default 32)' },
  '--max-model-len': {
    key: 'maxModelLen',
    kind: 'length',
    help: 'context in tokens, like 4096 or 32k; a longer prompt gets 400; 0 = no limit (default 0)',
  },
  '--seed': { key: 'seed', kind: 'number', help: 'seed of the generated text and the error draw (default 0)' },
  '--shutdown-grace-ms': {
    key: 'shutdownGraceMs',
    kind: 'number',
    help: 'on SIGTERM, how long running requests may finish (default 5000)',
  },
  '--flavor': {
    key: 'flavor',
    kind: 'string',
    help: 'which engine /metrics and /health imitate: vllm, llamacpp or sglang (default vllm)',
  },
  '--api-key': {
    key: 'apiKey',
    kind: 'string',
    help: `as --api-key-file, but the key shows in ps to every user; prefer the file or ${ENGINE_API_KEY_ENV}`,
  },
  '--api-key-file': {
    key: 'apiKey',
    kind: 'file',
    help: `requests to /v1/* need Authorization: Bearer <the file's key>, else 401; /health stays open (default: ${ENGINE_API_KEY_ENV}, else none)`,
  },
  '--tls-cert': {
    key: 'tlsCert',
    kind: 'string',
    help: 'PEM certificate file: serve https (needs --tls-key) (default plain http)',
  },
  '--tls-key': { key: 'tlsKey', kind: 'string', help: 'PEM private key file for --tls-cert' },
  '--kv-cache-blocks': {
    key: 'kvCacheBlocks',
    kind: 'number',
    help: 'blocks of a simulated KV prefix cache, LRU, published on GET /kv-events; 0 = none (default 0)',
  },
  '--kv-block-size': { key: 'kvBlockSize', kind: 'number', help: 'tokens per cache block (default 16)' },
  '--prefill-ms-per-token': {
    key: 'prefillMsPerToken',
    kind: 'number',
    help: 'added to --ttft-ms per prompt token the cache does not hold (default 0)',
  },
  '--kv-events-endpoint': {
    key: 'kvEventsEndpoint',
    kind: 'string',
    help: "bind a ZeroMQ PUB socket here and publish the cache's events as vLLM does, e.g. tcp://127.0.0.1:5557",
  },
  '--kv-events-replay-endpoint': {
    key: 'kvEventsReplayEndpoint',
    kind: 'string',
    help: "bind vLLM's replay ROUTER socket here (default none)",
  },
  '--kv-events-topic': { key: 'kvEventsTopic', kind: 'string', help: 'topic frame of each event message (default "")' },
};

export const SIM_CLI_USAGE = [
  'usage: llmgw engine sim [flags]',
  '',
  'A simulated OpenAI-compatible inference engine for tests and benchmarks.',
  '',
  ...Object.entries(FLAGS).map(
    ([flag, f]) =>
      `  ${(flag + (f.kind === 'boolean' ? '' : f.kind === 'list' ? ' NAME' : f.kind === 'file' ? ' FILE' : ' N')).padEnd(24)} ${f.help}`,
  ),
  '',
  'Set LLMGW_SIM_RECORD to a file to append one JSON line (argv, engine env) per start.',
].join('\n');

/**
 * Reads a context length the way vLLM does: a plain integer, or with a
 * suffix, k/m = ×1000/×1000000 and K/M = ×1024/×1048576. NaN when unreadable.
 */
export function parseContextLength(text: string): number {
  const match = /^(\d+(?:\.\d+)?)([kKmM]?)$/.exec(text.trim());
  if (!match) return Number.NaN;
  const scale = { '': 1, k: 1e3, m: 1e6, K: 1024, M: 1024 * 1024 }[match[2]!]!;
  return Math.round(Number(match[1]) * scale);
}

/**
 * The options the flags ask for, validated: throws ValidationError
 * (LLMGW_CONFIG_INVALID) naming each wrong flag, and for an unknown one the
 * nearest valid flag. `--help` is not handled here. `env` is read for the
 * API key alone (${ENGINE_API_KEY_ENV}), when no flag gives one; absent = no
 * variables.
 */
export function parseSimEngineArgs(
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>> = {},
): SimEngineOptions {
  const options: Record<string, unknown> = {};
  const problems: string[] = [];
  const files = new Map<string, string>();
  for (let i = 0; i < argv.length; i++) {
    const token = argv[i]!;
    const eq = token.indexOf('=');
    const flag = token.startsWith('--') && eq !== -1 ? token.slice(0, eq) : token;
    const spec = FLAGS[flag];
    if (!spec) {
      // A flag cut short ("--ttft") means its longer form; otherwise the nearest by edits.
      const names = Object.keys(FLAGS);
      const near = (flag.length > 3 ? names.find((n) => n.startsWith(flag)) : undefined) ?? nearestName(flag, names);
      // Its value, if it has one, is not a second mistake.
      if (token.startsWith('-') && flag === token && argv[i + 1] !== undefined && !argv[i + 1]!.startsWith('-')) i++;
      problems.push(
        token.startsWith('-')
          ? `${flag}: unknown flag${near ? `; did you mean ${near}?` : '; run with --help for the list'}`
          : `${JSON.stringify(token)}: unexpected argument; every setting is a flag, like --model NAME`,
      );
      continue;
    }
    if (spec.kind === 'boolean') {
      if (eq !== -1 && flag !== token) {
        const v = token.slice(eq + 1);
        if (v !== 'true' && v !== 'false') problems.push(`${flag}: want no value, or =true or =false`);
        else options[spec.key] = v === 'true';
      } else options[spec.key] = true;
      continue;
    }
    let value: string | undefined;
    if (flag !== token) value = token.slice(eq + 1);
    else {
      value = argv[i + 1];
      if (value === undefined || (value.startsWith('--') && FLAGS[value.split('=')[0]!])) {
        problems.push(`${flag}: needs a value`);
        continue;
      }
      i++;
    }
    if (spec.kind === 'file') files.set(spec.key, value);
    else if (spec.kind === 'string') options[spec.key] = value;
    else if (spec.kind === 'list') options[spec.key] = [...((options[spec.key] as string[] | undefined) ?? []), value];
    else {
      const n = spec.kind === 'length' ? parseContextLength(value) : value.trim() === '' ? Number.NaN : Number(value);
      if (!Number.isFinite(n)) problems.push(`${flag}: want a number, got ${JSON.stringify(value)}`);
      else options[spec.key] = n;
    }
  }
  try {
    const apiKey = engineApiKey({ flag: options.apiKey as string | undefined, file: files.get('apiKey') }, env);
    if (apiKey === undefined) delete options.apiKey;
    else options.apiKey = apiKey;
  } catch (err) {
    if (!(err instanceof ValidationError)) throw err;
    problems.push(...err.problems);
  }
  if (problems.length)
    throw new ValidationError('LLMGW_CONFIG_INVALID', problems, 'the sim engine flags are not valid');
  try {
    compileSimEngineOptions(options);
  } catch (err) {
    if (err instanceof ValidationError) {
      const flagOf = new Map(Object.entries(FLAGS).map(([flag, f]) => [f.key as string, flag]));
      const reworded = err.problems.map((p) => {
        const key = /^([A-Za-z]+)[:[.]/.exec(p)?.[1];
        const flag = key === undefined ? undefined : flagOf.get(key);
        return flag ? `${flag}${p.slice(key!.length)}` : p;
      });
      throw new ValidationError('LLMGW_CONFIG_INVALID', reworded, 'the sim engine flags are not valid');
    }
    throw err;
  }
  return options as SimEngineOptions;
}

/**
 * Runs the sim as this process until SIGTERM/SIGINT (exit 0 after a grace
 * for running requests) or a crash (exit 1). Bad flags print why and exit 2.
 * Resolves with the exit code after handing it to `io.exit`.
 */
export async function runSimEngineCli(argv: readonly string[], io: Partial<SimCliIo> = {}): Promise<number> {
  const pio = defaultSimCliIo(io);
  if (argv.includes('--help') || argv.includes('-h')) {
    pio.stdout.write(`${SIM_CLI_USAGE}\n`);
    pio.exit(0);
    return 0;
  }
  let options: SimEngineOptions;
  try {
    options = parseSimEngineArgs(argv, pio.env);
  } catch (err) {
    pio.stderr.write(`llmgw engine sim: ${isLlmgwError(err) ? err.message : String(err)}\n`);
    pio.exit(2);
    return 2;
  }
  if (argv.some((arg) => arg === '--api-key' || arg.startsWith('--api-key=')))
    pio.stderr.write(`${apiKeyFlagWarning('sim')}\n`);
  const recordFile = pio.env.LLMGW_SIM_RECORD;
  if (recordFile) appendStartRecord(recordFile, startRecord('sim', argv, pio.env));
  return serveSimProcess(options, pio, (engine) => [
    `sim engine listening on ${engine.url}`,
    ...(engine.kvEvents === undefined ? [] : [`sim engine publishing KV events on ${engine.kvEvents.endpoint}`]),
  ]);
}

/**
 * Serves `options` as this process: prints `readyLines` once listening, then
 * waits for a signal or a crash and exits. Shared with the stand-ins, which
 * print their real engine's ready line instead.
 */
export async function serveSimProcess(
  options: SimEngineOptions,
  io: SimCliIo,
  readyLines: (engine: SimEngine) => string[],
): Promise<number> {
  let engine: SimEngine;
  try {
    engine = await startSimEngine(options);
  } catch (err) {
    io.stderr.write(`llmgw engine sim: ${isLlmgwError(err) ? err.message : String(err)}\n`);
    io.exit(1);
    return 1;
  }
  let signals = 0;
  const stopListening = io.onTerminate(() => {
    // The first signal closes gracefully; a second one cuts what is left.
    void engine.close(signals++ === 0 ? {} : { graceMs: 0 });
  });
  for (const line of readyLines(engine)) io.stdout.write(`${line}\n`);
  const end = await engine.ended;
  stopListening();
  const code = end === 'crashed' ? 1 : 0;
  if (end === 'crashed') {
    io.stderr.write(
      `sim engine crashed on purpose after ${engine.stats().requestsEnded} requests (--crash-after ${engine.config.crashAfterRequests})\n`,
    );
  }
  io.exit(code);
  return code;
}
