// The check both engines that ship with llmgw (sim, builtin) make on a
// request when started with --api-key, as vLLM, llama-server and SGLang do
// with theirs: the router presents the replica's secret as a bearer token,
// so a caller who reaches an engine's port directly (an engine bound to
// 0.0.0.0 on a fleet node) cannot skip API keys, limits and accounting.
// Only /v1/* is guarded; /health and /metrics stay open, as in vLLM, so
// the agent's probes need no secret.
import { bearerToken, sameSecret } from '../http/index.js';

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
export const API_KEY_REFUSAL = 'this engine takes requests only with its API key (Authorization: Bearer <key>); send requests through the llmgw router';
