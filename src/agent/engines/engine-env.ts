// The environment an engine starts from, before its adapter's variables and
// the profile's are merged over it: an allowlist of the agent's own
// environment. The agent holds secrets an engine must never see (its join
// token, an HF token, whatever else its service manager set), and an engine
// runs model code, sometimes the model author's own (trust_remote_code), so
// nothing reaches it unless it is named here. One list, in one place, so that
// every engine is started the same way and a test can read the whole rule.
//
// HF_TOKEN and HF_HOME are not passed to any engine: the agent fetches every
// source (hf://, https://) into its cache itself and hands the engine a local
// path, so no engine downloads anything. An operator who wants an engine to
// reach the Hub anyway sets what it needs in the profile's env.

/** Variables passed by exact name: the process basics every engine needs. */
const PASSED_NAMES: ReadonlySet<string> = new Set([
  'PATH',
  'HOME',
  'USER',
  'LOGNAME',
  'LANG',
  'LANGUAGE',
  'TZ',
  'TMPDIR',
  // Where a node's CUDA libraries are found, set by the node's operator for the agent's service (not by a profile, which may not set it).
  'LD_LIBRARY_PATH',
]);

/** Variables passed by prefix: locale, and the GPU stack's own settings on this node. */
const PASSED_PREFIXES: readonly string[] = ['LC_', 'CUDA_', 'NVIDIA_', 'NCCL_'];

/** True when a variable of the agent's environment may reach an engine. */
export function isPassedToEngine(name: string): boolean {
  return PASSED_NAMES.has(name) || PASSED_PREFIXES.some((prefix) => name.startsWith(prefix));
}

/**
 * The part of `agentEnv` an engine may see; undefined values are dropped.
 * The agent's own marks (LLMGW_AGENT_STATE_DIR, LLMGW_SHARD_ID,
 * LLMGW_SHARD_PORT) are added by the supervisor after this, as are the
 * adapter's variables and the profile's.
 */
export function engineBaseEnv(agentEnv: Readonly<Record<string, string | undefined>>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(agentEnv)) {
    if (value !== undefined && isPassedToEngine(name)) out[name] = value;
  }
  return out;
}
