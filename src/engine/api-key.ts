// The check both engines that ship with llmgw (sim, builtin) make on a
// request when given an API key, as vLLM, llama-server and SGLang do
// with theirs: the router presents the replica's secret as a bearer token,
// so a caller who reaches an engine's port directly (an engine bound to
// 0.0.0.0 on a fleet node) cannot skip API keys, limits and accounting.
// Only /v1/* is guarded; /health and /metrics stay open, as in vLLM, so
// the agent's probes need no secret.
import { ValidationError } from '../errors/index.js';
import { bearerToken, sameSecret } from '../http/bearer.js';
import { readSecretFile } from '../validation/flags.js';

/**
 * The variable the agent puts a replica's secret in for the sim and builtin
 * engines. A command line is readable by every user of the machine
 * (/proc/PID/cmdline, ps); a process's environment only by its own user and
 * root, so the key never goes on the engine's argv.
 */
export const ENGINE_API_KEY_ENV = 'LLMGW_ENGINE_API_KEY';

/** The warning an engine prints when its key came as --api-key (still accepted, for a person starting one by hand). */
export function apiKeyFlagWarning(engine: string): string {
  return `llmgw engine ${engine}: warning: --api-key puts the key on the command line, where every user of this machine can read it (ps); set ${ENGINE_API_KEY_ENV} or pass --api-key-file FILE instead`;
}

/**
 * The engine's API key from, in order, --api-key, --api-key-file (the file's
 * text, trimmed) or ${ENGINE_API_KEY_ENV}; undefined when none is given (the
 * engine then asks no key). Both flags at once, an unreadable file or an
 * empty one is a usage mistake (LLMGW_CONFIG_INVALID): an engine that meant
 * to ask a key must not start open.
 */
export function engineApiKey(
  given: { flag?: string | undefined; file?: string | undefined },
  env: Readonly<Record<string, string | undefined>>,
): string | undefined {
  if (given.flag !== undefined && given.file !== undefined) {
    throw new ValidationError(
      'LLMGW_CONFIG_INVALID',
      ['--api-key and --api-key-file are both given; keep --api-key-file'],
      'the API key is given twice',
    );
  }
  if (given.flag !== undefined) return given.flag;
  if (given.file !== undefined) {
    const read = readSecretFile(given.file);
    if ('problem' in read)
      throw new ValidationError(
        'LLMGW_CONFIG_INVALID',
        [`--api-key-file ${given.file} ${read.problem}`],
        'the API key file cannot be used',
      );
    return read.text;
  }
  const fromEnv = env[ENGINE_API_KEY_ENV];
  return fromEnv === undefined || fromEnv === '' ? undefined : fromEnv;
}

/** True when `path` needs the key: the OpenAI API, not the probes. */
export function apiKeyGuards(path: string): boolean {
  return path === '/v1' || path.startsWith('/v1/');
}

/**
 * True when the Authorization header carries `Bearer <apiKey>`. Compared in
 * constant time over hashes, so neither the key's bytes nor its length leak
 * through timing.
 */
export function bearerMatches(authorization: string | undefined, apiKey: string): boolean {
  const given = bearerToken(authorization);
  return given !== null && sameSecret(given, apiKey);
}

/** The sentence a refused caller reads (never the key, never a hint of it). */
export const API_KEY_REFUSAL =
  'this engine takes requests only with its API key (Authorization: Bearer <key>); send requests through the llmgw router';
