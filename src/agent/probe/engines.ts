// Which inference engines this node can start, named as the engine adapters
// and profiles name them ('vllm', 'llamacpp', 'sglang', 'builtin', 'sim'),
// so placement can check "engine available" by name. Versions are read only
// where that is cheap and bounded: an engine's own --version may import torch
// and take many seconds, which a heartbeat must not wait for.
//
// - vllm: the `vllm` launcher on PATH; its version from the package metadata,
//   asked of the Python its launcher names on the #! line (no torch import).
// - llamacpp: `llama-server` on PATH; `llama-server --version`, bounded.
// - llamacpp-rpc: `rpc-server` (or `ggml-rpc-server`, its name since
//   llama.cpp 0.4) on PATH, what multi-node llama.cpp runs on the other
//   nodes. Never run: older builds take no --version, and an rpc-server given
//   an argument it ignores starts listening.
// - sglang: has no launcher of its own (it runs as `python3 -m
//   sglang.launch_server`), so it counts when `python3` on PATH can find the
//   module. The check uses importlib's find_spec and the package metadata,
//   which neither import sglang nor torch: tens of milliseconds.
// - builtin and sim ship inside llmgw and are always present.
import type { EngineReport } from '../../protocol/index.js';
import { type ExecFn, findOnPath, findOnPathSync, type IsExecutableFn } from './exec.js';

export interface EngineProbeDeps {
  exec: ExecFn;
  isExecutable: IsExecutableFn;
  /** The first bytes of a file (for a #! line); rejects when it cannot be read. */
  readHead: (path: string, bytes: number) => Promise<string>;
}

/** Engines shipped inside llmgw: every node has them. */
export const BUILTIN_ENGINES = ['builtin', 'sim'] as const;

/** Every engine name a node can report; the --simulate spec accepts these. */
export const ENGINE_NAMES = ['vllm', 'llamacpp', 'llamacpp-rpc', 'sglang', ...BUILTIN_ENGINES] as const;

/** Enough of a launcher script to hold its #! line and pip's two-line trampoline. */
const SCRIPT_HEAD_BYTES = 512;

/**
 * The Python a console script runs under: the #! interpreter when it is a
 * Python, the program `env` is asked for, or the one pip's sh trampoline
 * execs (used when the path is too long for a #! line). Null otherwise.
 */
export function scriptPython(head: string): { path: string } | { name: string } | null {
  const lines = head.split('\n');
  const shebang = /^#!\s*(\S+)(?:\s+(\S+))?/.exec(lines[0] ?? '');
  if (!shebang) return null;
  const interpreter = shebang[1]!;
  if (/\/env$/.test(interpreter) && shebang[2] && /python/.test(shebang[2])) return { name: shebang[2] };
  if (/python[\d.]*$/.test(interpreter)) return { path: interpreter };
  const trampoline = /exec'\s+"([^"]*python[\d.]*)"/.exec(lines.slice(1, 3).join('\n'));
  return trampoline ? { path: trampoline[1]! } : null;
}

/**
 * What `llama-server --version` prints, in the form llama.cpp tags releases
 * ("b4567 (abc1234)"). Two formats are read: builds up to late 2025 print
 * "version: 4567 (abc1234)" (the build number, the commit); later ones print
 * their semantic version first, "version: 0.4.0-dev (build 1, commit
 * 80fb11a)", which becomes "0.4.0-dev b1 (80fb11a)". The build number is a
 * commit count, so a build from a shallow clone says 1. Undefined for any
 * other output (a build too old to know --version).
 */
export function parseLlamaServerVersion(output: string): string | undefined {
  const semantic = /version:\s*(\S+)\s*\(build\s+(\d+),\s*commit\s+([0-9a-z]+)\)/i.exec(output);
  if (semantic) return `${semantic[1]} b${semantic[2]} (${semantic[3]})`;
  const numbered = /version:\s*(\d+)\s*\(([0-9a-f]+)\)/i.exec(output);
  return numbered ? `b${numbered[1]} (${numbered[2]})` : undefined;
}

/**
 * The names llama.cpp's RPC server goes by, in the order they are looked
 * for: `rpc-server` up to late 2025, `ggml-rpc-server` in builds that print
 * a semantic version (0.4 and later).
 */
export const RPC_SERVER_NAMES = ['rpc-server', 'ggml-rpc-server'] as const;

/**
 * The RPC server the agent runs on ranks ≥ 1: the first of RPC_SERVER_NAMES
 * on `pathEnv`, as the probe found it; when there is none, the bare
 * `rpc-server`, so the launch fails naming the program that is missing.
 */
export function rpcServerOnPath(pathEnv: string): string {
  for (const name of RPC_SERVER_NAMES) {
    const path = findOnPathSync(name, pathEnv);
    if (path !== null) return path;
  }
  return RPC_SERVER_NAMES[0];
}

/** Exit code with which the sglang check says "no such module". */
const NOT_INSTALLED_EXIT = 3;

/** Prints the distribution's version ('' when it has no metadata, a source checkout); exits 3 when the module is absent. */
function pythonVersionCheck(module: string): string {
  return [
    'import importlib.util as u, importlib.metadata as m',
    `if u.find_spec(${JSON.stringify(module)}) is None: raise SystemExit(${NOT_INSTALLED_EXIT})`,
    'try:',
    `    print(m.version(${JSON.stringify(module)}))`,
    'except Exception:',
    '    print("")',
  ].join('\n');
}

export async function probeEngines(pathEnv: string, timeoutMs: number, deps: EngineProbeDeps): Promise<EngineReport[]> {
  const find = (name: string) => findOnPath(name, pathEnv, deps.isExecutable);
  const run = async (file: string, args: string[]) => {
    try {
      const result = await deps.exec(file, args, { timeoutMs });
      return result.timedOut ? null : result;
    } catch {
      return null;
    }
  };

  const vllm = async (): Promise<EngineReport | null> => {
    const path = await find('vllm');
    if (path === null) return null;
    const head = await deps.readHead(path, SCRIPT_HEAD_BYTES).catch(() => '');
    const python = scriptPython(head);
    const interpreter = python === null ? null : 'path' in python ? python.path : await find(python.name);
    const result = interpreter === null ? null : await run(interpreter, ['-c', pythonVersionCheck('vllm')]);
    const version = result?.exitCode === 0 ? result.stdout.trim() : '';
    return version === '' ? { name: 'vllm', path } : { name: 'vllm', version, path };
  };

  const llamacpp = async (): Promise<EngineReport | null> => {
    const path = await find('llama-server');
    if (path === null) return null;
    const result = await run(path, ['--version']);
    const version = result === null ? undefined : parseLlamaServerVersion(`${result.stdout}\n${result.stderr}`);
    return version === undefined ? { name: 'llamacpp', path } : { name: 'llamacpp', version, path };
  };

  const rpc = async (): Promise<EngineReport | null> => {
    for (const name of RPC_SERVER_NAMES) {
      const path = await find(name);
      if (path !== null) return { name: 'llamacpp-rpc', path };
    }
    return null;
  };

  const sglang = async (): Promise<EngineReport | null> => {
    const python = await find('python3');
    if (python === null) return null;
    const result = await run(python, ['-c', pythonVersionCheck('sglang')]);
    if (result === null || result.exitCode !== 0) return null;
    const version = result.stdout.trim();
    // The path is the Python the adapter runs `-m sglang.launch_server` with.
    return version === '' ? { name: 'sglang', path: python } : { name: 'sglang', version, path: python };
  };

  const found = await Promise.all([vllm(), llamacpp(), rpc(), sglang()]);
  return [...found.filter((e): e is EngineReport => e !== null), ...BUILTIN_ENGINES.map((name) => ({ name }))];
}
