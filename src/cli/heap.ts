// The V8 heap settings `llmgw control`, `llmgw up` and `llmgw gateway` give
// their own processes. Apart from the control plane itself because it is the
// process's business, not a library's: whoever embeds ControlPlane keeps
// their own V8 settings.
//
// At thousands of nodes most heartbeats are long-polled, held for seconds,
// and promoted to the old generation before they are answered; V8's own
// heuristic then lets that garbage reach about the size of the live heap
// again before a full collection (docs/heartbeats.md). A smaller growing
// factor collects it sooner: a little CPU, and more full collections for
// the router's requests to meet, so it is the operator's choice (config
// heap_growing_percent), off by default.
import v8 from 'node:v8';

/**
 * The V8 flag to set for `percent`, or null where none is: 0 (V8's own
 * heuristic) or a --heap-growing-percent node was started with, which an
 * operator chose and which wins.
 */
export function heapGrowingFlag(percent: number, execArgv: readonly string[]): string | null {
  if (percent === 0) return null;
  if (givesFlag(execArgv, 'heap-growing-percent')) return null;
  return `--heap-growing-percent=${percent}`;
}

/** Whether `args` give node the flag `name` (V8 reads `-` and `_` alike), with a value or without. */
function givesFlag(args: readonly string[], name: string): boolean {
  return args.some((arg) => {
    const given = arg.split('=', 1)[0]!.replaceAll('_', '-');
    return given === `--${name}`;
  });
}

/** Sets V8's heap growing factor for this process as the config asks; returns the flag set, or null when none was. */
export function applyHeapGrowing(percent: number, execArgv: readonly string[] = process.execArgv): string | null {
  const flag = heapGrowingFlag(percent, execArgv);
  // Read by V8 each time it sets the next collection's limit, so setting it after start takes effect from the next one.
  if (flag !== null) v8.setFlagsFromString(flag);
  return flag;
}

/**
 * The young generation, MiB a semi-space, that the processes serving
 * requests (gateway workers; `llmgw control`, `llmgw up` and a one-process
 * gateway where Node can restart itself in place; the control plane's
 * systemd unit) run with unless node was told otherwise. Node's default (16)
 * collects it several times a second under load, copying every request in
 * flight each time and soon promoting them: in lockstep on the bench's
 * whole answers a router on the default took 1.41 to 1.51× the CPU per
 * request of one at 64 (bench/README.md). It costs up to ~100 MiB more
 * memory per process at peak.
 */
export const YOUNG_GENERATION_MIB = 64;

const YOUNG_GENERATION_FLAG = `--max-semi-space-size=${YOUNG_GENERATION_MIB}`;

/**
 * The Node flags for a gateway worker: `execArgv`, with the young
 * generation set to YOUNG_GENERATION_MIB unless the operator set one
 * (in `execArgv` or NODE_OPTIONS `nodeOptions`), which wins. The flag is
 * read only as a process starts, so it is given to the workers as they are
 * forked; a process started without it keeps Node's default.
 */
export function youngGenerationArgs(execArgv: readonly string[], nodeOptions: string | undefined): string[] {
  if (youngGenerationGiven(execArgv, nodeOptions)) return [...execArgv];
  return [...execArgv, YOUNG_GENERATION_FLAG];
}

/** Whether node was given a young generation: in its arguments `execArgv` or in NODE_OPTIONS `nodeOptions`. */
function youngGenerationGiven(execArgv: readonly string[], nodeOptions: string | undefined): boolean {
  const name = 'max-semi-space-size';
  return givesFlag(execArgv, name) || givesFlag((nodeOptions ?? '').split(/\s+/), name);
}

/** What restartWithYoungGeneration reads of a process: Node's `process`, or a stand-in in tests. */
export interface RestartableProcess {
  readonly execPath: string;
  readonly execArgv: readonly string[];
  readonly argv: readonly string[];
  readonly env: NodeJS.ProcessEnv;
  /** Replaces this process's image, same pid; absent where Node has none (before 22.15, and on Windows). */
  readonly execve?: (file: string, args: readonly string[], env: NodeJS.ProcessEnv) => never;
}

/**
 * The command line to run this process again with the young generation
 * set, or null where it need not or cannot be: the operator set one (in
 * node's arguments or NODE_OPTIONS), or this Node cannot replace its own
 * image (no process.execve: Node 20, where `npm start`, the systemd unit or
 * the operator gives the flag).
 */
export function youngGenerationRestart(p: RestartableProcess): string[] | null {
  if (typeof p.execve !== 'function' || youngGenerationGiven(p.execArgv, p.env.NODE_OPTIONS)) return null;
  return [p.execPath, ...p.execArgv, YOUNG_GENERATION_FLAG, ...p.argv.slice(1)];
}

/**
 * For `llmgw control`, `llmgw up` and a one-process `llmgw gateway`, which
 * serve the requests in their own process: runs it again in place, same
 * pid, stdio and environment, with the young generation its requests need,
 * unless youngGenerationRestart says not to; then it returns. Called first,
 * before anything is opened or written: the new image keeps only the file
 * descriptors, and starts over from the same command line.
 */
export function restartWithYoungGeneration(p: RestartableProcess = process as RestartableProcess): void {
  const args = youngGenerationRestart(p);
  if (args !== null) p.execve!(p.execPath, args, p.env);
}
