// `llmgw engine builtin`: the flags the agent's builtin adapter passes, turned
// into BuiltinEngineOptions; then run until SIGTERM or SIGINT. The engine is
// always its own process (a child of the agent), so a model that fails here
// fails alone: the message goes to stderr and the exit code says it failed.
import { isLlmgwError } from '../../errors/index.js';
import { apiKeyFlagWarning, ENGINE_API_KEY_ENV, engineApiKey } from '../api-key.js';
import { parseFlags, usageError as flagUsageError, wholeNumberFlag } from '../../validation/flags.js';
import { startBuiltinEngine } from './server.js';
import type { BuiltinEngineOptions } from './options.js';

const USAGE =
  'usage: llmgw engine builtin --model FILE.gguf --port N [--host 127.0.0.1] [--alias NAME]... ' +
  '[--threads N] [--parallel N] [--max-queue N] [--ctx-size N] [--stream-interval-ms N] [--api-key-file FILE] [--tls-cert FILE --tls-key FILE]\n' +
  `The API key (asked of every /v1/* request) comes from --api-key-file or ${ENGINE_API_KEY_ENV}; --api-key KEY works too, but shows the key to every user in ps.`;

const FLAGS = {
  model: { type: 'string' },
  port: { type: 'string' },
  host: { type: 'string' },
  alias: { type: 'string', multiple: true },
  threads: { type: 'string' },
  parallel: { type: 'string' },
  'max-queue': { type: 'string' },
  'ctx-size': { type: 'string' },
  'stream-interval-ms': { type: 'string' },
  'api-key': { type: 'string' },
  'api-key-file': { type: 'string' },
  'tls-cert': { type: 'string' },
  'tls-key': { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

const usageError = (problem: string) => flagUsageError(problem, USAGE);
const wholeNumber = (flag: string, text: string | undefined) => wholeNumberFlag(flag, text, USAGE);

/**
 * Flags (and, for the API key, `env`) to options; exported for tests. Throws
 * LLMGW_CONFIG_INVALID with the usage line.
 */
export function parseBuiltinEngineArgs(
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>> = process.env,
): BuiltinEngineOptions | 'help' {
  const { values } = parseFlags(argv, FLAGS, USAGE, false);
  if (values.help) return 'help';
  if (!values.model) throw usageError('--model is required: the GGUF file to serve');
  const apiKey = engineApiKey({ flag: values['api-key'], file: values['api-key-file'] }, env);
  return {
    modelPath: values.model,
    ...(values.host === undefined ? {} : { host: values.host }),
    ...(values.port === undefined ? {} : { port: wholeNumber('port', values.port) }),
    ...(values.alias === undefined ? {} : { aliases: values.alias }),
    ...(values.threads === undefined ? {} : { threads: wholeNumber('threads', values.threads) }),
    ...(values.parallel === undefined ? {} : { parallel: wholeNumber('parallel', values.parallel) }),
    ...(values['max-queue'] === undefined ? {} : { maxQueue: wholeNumber('max-queue', values['max-queue']) }),
    ...(values['ctx-size'] === undefined ? {} : { contextTokens: wholeNumber('ctx-size', values['ctx-size']) }),
    ...(values['stream-interval-ms'] === undefined
      ? {}
      : { streamIntervalMs: wholeNumber('stream-interval-ms', values['stream-interval-ms']) }),
    ...(apiKey === undefined ? {} : { apiKey }),
    ...(values['tls-cert'] === undefined ? {} : { tlsCert: values['tls-cert'] }),
    ...(values['tls-key'] === undefined ? {} : { tlsKey: values['tls-key'] }),
  };
}

export interface BuiltinEngineCliIo {
  /** Where the ready line goes; absent means stdout. */
  out?: (line: string) => void;
  /** Where log lines and failures go; absent means stderr. */
  err?: (line: string) => void;
}

/**
 * Runs the engine until SIGTERM or SIGINT and resolves with the process exit
 * code (also set on process.exitCode): 0 after a clean stop, 1 when the model
 * cannot be served, 2 for a usage mistake. Failures are written to stderr as
 * `llmgw engine builtin: <CODE>: <message>`.
 */
export async function runBuiltinEngineCli(argv: readonly string[], io: BuiltinEngineCliIo = {}): Promise<number> {
  const out = io.out ?? ((line: string) => void process.stdout.write(`${line}\n`));
  const err = io.err ?? ((line: string) => void process.stderr.write(`${line}\n`));
  const code = await run(argv, out, err).catch((error: unknown) => {
    const known = isLlmgwError(error) ? error : undefined;
    err(
      `llmgw engine builtin: ${known ? `${known.code}: ${known.message}` : error instanceof Error ? (error.stack ?? error.message) : String(error)}`,
    );
    return known?.code === 'LLMGW_CONFIG_INVALID' ? 2 : 1;
  });
  process.exitCode = code;
  return code;
}

async function run(argv: readonly string[], out: (line: string) => void, err: (line: string) => void): Promise<number> {
  const parsed = parseBuiltinEngineArgs(argv);
  if (parsed === 'help') {
    out(USAGE);
    return 0;
  }
  if (argv.some((arg) => arg === '--api-key' || arg.startsWith('--api-key='))) err(apiKeyFlagWarning('builtin'));
  const engine = await startBuiltinEngine({ ...parsed, log: err });
  let onSignal: () => void = () => undefined;
  const signalled = new Promise<'signal'>((resolve) => {
    onSignal = () => resolve('signal');
  });
  process.once('SIGTERM', onSignal);
  process.once('SIGINT', onSignal);
  try {
    // A signal may come while the model still loads; the agent is then stopping us, not waiting.
    const first = await Promise.race([engine.ready.then(() => 'ready' as const), signalled]);
    if (first === 'ready') {
      out(`builtin engine listening on ${engine.url}`);
      await signalled;
    }
    await engine.close();
    err('builtin engine stopped');
    return 0;
  } catch (error) {
    await engine.close();
    throw error;
  } finally {
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
  }
}
