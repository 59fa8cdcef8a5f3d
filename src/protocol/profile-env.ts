// Profile environment variables that would let whoever writes a model's
// profile run code of their choosing in an engine: loader hooks (a library
// preloaded into every process) and interpreter hooks (a module imported or
// a script run before the engine's own code). A profile's `env` reaches the
// engine on a GPU node as it is, so such a key turns the right to add a
// model into the right to run code on every node that places it. Shared by
// the control plane (which refuses the model) and the agent (which refuses
// the shard again, so a tampered control plane cannot set them either).
//
// A denylist, not an allowlist, because engines take many legitimate tuning
// variables (VLLM_*, NCCL_*, OMP_*, ...) that no list could keep up with;
// what is refused is the small, stable set of hooks that load foreign code.

/** Names refused exactly. */
const UNSAFE_NAMES: ReadonlySet<string> = new Set([
  // The dynamic loader (glibc and musl).
  'LD_PRELOAD',
  'LD_LIBRARY_PATH',
  'LD_AUDIT',
  // Node: --require/--import of any module, data: URLs included.
  'NODE_OPTIONS',
  'NODE_PATH',
  // Python: the module path, a startup script, another standard library, sitecustomize in a user site.
  'PYTHONPATH',
  'PYTHONSTARTUP',
  'PYTHONHOME',
  'PYTHONUSERBASE',
  'PYTHONINSPECT',
  'PYTHONBREAKPOINT',
  // Python: the directory name under the prefix where the standard library's
  // extension modules are found; a relative path leads anywhere (the model's own files).
  'PYTHONPLATLIBDIR',
  // Python: a warning filter's category is imported by name, so any module on
  // sys.path runs at start-up. With BROWSER (the command Python's webbrowser
  // module runs) it is a known chain: PYTHONWARNINGS=…:antigravity.x:… imports
  // antigravity, which opens a browser, which runs $BROWSER.
  'PYTHONWARNINGS',
  'BROWSER',
  // Shells: a script read by every non-interactive bash or sh; bash xtrace
  // expanding $PS4 (command substitution included) before each command.
  'BASH_ENV',
  'ENV',
  'SHELLOPTS',
  'PS4',
  // The CUDA driver loads this library into every process that initialises CUDA (how profilers hook in).
  'CUDA_INJECTION64_PATH',
  'CUDA_INJECTION32_PATH',
  // glibc's iconv loads conversion modules (shared libraries) from this directory.
  'GCONV_PATH',
  // OpenSSL: a config file can load any engine or provider (a shared library), from these directories too.
  'OPENSSL_CONF',
  'OPENSSL_ENGINES',
  'OPENSSL_MODULES',
  // Triton and PyTorch compile kernels at run time with the program these name.
  'CC',
  'CXX',
  // Perl and Ruby: options (-M, -r) that load a module first.
  'PERL5OPT',
  'PERL5LIB',
  'RUBYOPT',
  'RUBYLIB',
  // The JVM (Ray's Java workers): -javaagent.
  'JAVA_TOOL_OPTIONS',
  '_JAVA_OPTIONS',
]);

/**
 * Prefixes refused: macOS's loader (DYLD_INSERT_LIBRARIES and its kin), every
 * LD_ variable the loader may read in some libc, and bash's exported functions
 * (BASH_FUNC_name%%), which replace a command in every bash script the engine runs.
 */
const UNSAFE_PREFIXES: readonly string[] = ['DYLD_', 'LD_', 'BASH_FUNC_'];

/** True when a profile may not set `name`: it would load code into the engine. */
export function isUnsafeProfileEnvName(name: string): boolean {
  if (UNSAFE_NAMES.has(name)) return true;
  return UNSAFE_PREFIXES.some((prefix) => name.startsWith(prefix));
}

/** The names in `env` a profile may not set, in the order given; empty when it is safe. */
export function unsafeProfileEnvNames(env: Readonly<Record<string, string>>): string[] {
  return Object.keys(env).filter(isUnsafeProfileEnvName);
}

/** The sentence both sides use to refuse a name, so the operator reads the same fix wherever it was caught. */
export function unsafeProfileEnvProblem(name: string, allowSwitch: string): string {
  return `${name} is a loader or interpreter hook: set in a profile it would run code of the model author's choosing inside the engine on every node that runs it; remove it from the profile's env, or, if every admin is trusted with root on every node, ${allowSwitch}`;
}
