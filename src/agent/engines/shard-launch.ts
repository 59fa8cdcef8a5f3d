// What an adapter is given (one shard of one replica, with everything it needs
// decided: weights on disk, GPUs, port, peers) and what it gives back (the
// exact argv and environment, how to tell the engine is ready, whether it
// serves the API). Kept apart from the adapters so that the supervisor and the
// agent depend on these shapes and never on one engine's flags.
import { isAbsolute } from 'node:path';
import { LlmgwError } from '../../errors/index.js';
import { nearestName } from '../../units/index.js';

export const ENGINE_NAMES = ['vllm', 'llamacpp', 'sglang', 'builtin', 'sim'] as const;
export type EngineName = (typeof ENGINE_NAMES)[number];

export function isEngineName(name: string): name is EngineName {
  return (ENGINE_NAMES as readonly string[]).includes(name);
}

/** Another shard of the same replica, as this shard reaches it over the fabric. */
export interface ShardPeer {
  readonly rank: number;
  /** The peer's address on the replica's fabric (an IP or a host name). */
  readonly address: string;
  /**
   * The port this rank listens on for the other ranks: the rendezvous port on
   * rank 0 (vLLM --master-port, SGLang --dist-init-addr), the rpc-server port
   * on llama.cpp ranks ≥ 1. Absent = that engine's default (vLLM 29501,
   * SGLang 50000, rpc-server 50052), which is only safe while one multi-node
   * replica per node uses it.
   */
  readonly port?: number;
}

/** One shard to run on this node: a replica's rank, with everything decided. */
export interface ShardLaunch {
  readonly replicaId: string;
  readonly shardId: string;
  readonly model: { readonly name: string; readonly aliases: readonly string[] };
  readonly profile: {
    readonly name: string;
    /** An engine name; a string because it comes off the wire, checked by adapterFor(). */
    readonly engine: string;
    /** GPUs per shard; 0 = a CPU profile. */
    readonly gpus: number;
    /** Shards (nodes) per replica; 1 = one node. */
    readonly shards: number;
    /** Appended after llmgw's own flags, so an operator's flag wins where the engine takes the last one. */
    readonly args: readonly string[];
    /** Merged over the variables llmgw sets, so an operator's value wins. */
    readonly env: Readonly<Record<string, string>>;
  };
  /** The weights on this node: a directory (vLLM, SGLang) or a GGUF file or the directory holding it (llama.cpp, builtin). */
  readonly weightsPath: string;
  /** GPUs this shard may use, as nvidia-smi numbers them; empty = none (the engine sees no GPU). */
  readonly gpuIndices: readonly number[];
  /** Address the engine binds; 0.0.0.0 = every interface. */
  readonly host: string;
  /** Port of the API (or, on ranks without one, the health server); 0 = the supervisor picks one from its range. */
  readonly port: number;
  /** 0 = the head, which serves the API. */
  readonly rank: number;
  /** Every shard of the replica ordered by rank, this one included; empty for a one-node replica. */
  readonly peers: readonly ShardPeer[];
  /**
   * The replica's secret: the engine asks it of every API request, and only
   * the router, which got it from the control plane, sends it. Never on a
   * command line (ps shows those to every user): vLLM, llama-server, sim and
   * builtin take it from a variable (VLLM_API_KEY, LLAMA_API_KEY,
   * LLMGW_ENGINE_API_KEY), SGLang from a 0600 --config file the supervisor
   * writes. Absent = the engine asks no key (a control plane too old to make
   * secrets). Never logged: the supervisor redacts it from the engine's log
   * lines.
   */
  readonly apiKey?: string;
  /** CPU threads for the builtin engine; absent = the engine's own choice. Other engines ignore it. */
  readonly threads?: number;
  /** How long the engine may take to become ready; absent = the supervisor's default for the engine. */
  readonly startTimeoutMs?: number;
  /**
   * Ports for the engine's KV cache events, as many as the adapter's
   * kvEventsPorts() asked, allocated like `port` (vLLM and SGLang: the
   * ZeroMQ PUB socket, then its replay socket). Absent = none: the engine
   * publishes no events.
   */
  readonly kvEventsPorts?: readonly number[];
}

/**
 * Where the engine tells what its KV cache holds, as planned; the shard
 * turns it into the replica's KvEventsEndpoint with the host it advertises.
 */
export type PlannedKvEvents =
  | { readonly kind: 'zmq'; readonly port: number; readonly replayPort?: number; readonly topic?: string }
  | { readonly kind: 'http'; readonly path: string }
  | { readonly kind: 'slots'; readonly blockSize: number };

/**
 * How to tell the engine is ready. `host` is where to connect (a wildcard bind
 * is probed on loopback). 'none' is for ranks that open no port the agent can
 * ask (vLLM headless): they are ready once started.
 */
export type Readiness =
  | {
      readonly kind: 'http';
      readonly host: string;
      readonly port: number;
      readonly path: string;
      /** True: the engine serves https (the agent's --engine-tls); absent = plain http. */
      readonly tls?: true;
    }
  | { readonly kind: 'tcp'; readonly host: string; readonly port: number }
  | { readonly kind: 'none' };

/** A command line and environment; nothing in it ever passes through a shell. */
export interface EngineLaunchPlan {
  /** [executable, ...args]: an absolute path, or a name looked up on the engine's PATH. */
  readonly argv: readonly string[];
  /** The variables llmgw sets for this engine, profile env merged over; added to the agent's own environment. */
  readonly env: Readonly<Record<string, string>>;
  readonly readiness: Readiness;
  /** True for the rank that serves the OpenAI API (rank 0); requests go only there. */
  readonly servesApi: boolean;
  /**
   * False: once ready, the engine is not probed again, because asking it
   * disturbs it (llama.cpp's rpc-server serves one client at a time and
   * queues at most two more connections, so repeated TCP probes beside the
   * head's connection fill its queue, and the next probe times out); its
   * exit is what says it died. Absent = probed on the liveness interval.
   */
  readonly probeWhileReady?: false;
  /**
   * Files the supervisor writes just before it starts the engine (mode 0600,
   * in a directory it makes 0700) and removes when the shard stops: for an
   * engine that reads its API key from no variable, only from a file (SGLang's
   * --config), so the key stays off the world-readable command line. Absent =
   * none.
   */
  readonly files?: readonly EngineFile[];
  /** Where the engine tells what its KV cache holds; absent = it tells nothing. */
  readonly kvEvents?: PlannedKvEvents;
}

/** A file an engine reads at start; `path` is absolute. */
export interface EngineFile {
  readonly path: string;
  readonly text: string;
}

export interface EngineAdapter {
  readonly engine: EngineName;
  /** How long this engine usually may take to become ready, before any override. */
  readonly defaultStartTimeoutMs: number;
  /**
   * Whether the process listens on `launch.port`. False for ranks that listen
   * on no port (vLLM headless) or on their peer port (rpc-server), so the
   * supervisor does not hand them a port from its range.
   */
  usesPort(launch: ShardLaunch): boolean;
  /**
   * How many ports the engine's KV event publisher binds (handed over as
   * launch.kvEventsPorts); absent or 0 = none.
   */
  kvEventsPorts?(launch: ShardLaunch): number;
  /** Throws LlmgwError (LLMGW_ENGINE_START_FAILED) when the shard cannot be run by this engine as given. */
  plan(launch: ShardLaunch): EngineLaunchPlan;
}

export interface EngineAdapterOptions {
  /** bin/llmgw.js of this install: `llmgw engine sim|builtin` runs through it. Required for those two engines. */
  llmgwBin?: string;
  /** The Node that runs llmgw's own engines; absent = this process's (process.execPath). */
  nodePath?: string;
  /** Executables of the external engines; absent = the bare name, found on the engine's PATH. */
  vllmExecutable?: string;
  llamaServerExecutable?: string;
  rpcServerExecutable?: string;
  /** The Python that has SGLang installed; absent = python3. */
  pythonExecutable?: string;
  /**
   * Turns a weights path into the GGUF file llama.cpp and the builtin engine
   * load. Absent = findGgufFile (reads the directory). Tests pass a pure one.
   */
  resolveGguf?: (weightsPath: string) => string;
  /**
   * Start engines whose profile env sets a loader or interpreter hook
   * (LD_PRELOAD, NODE_OPTIONS, …). Absent = false: such a shard fails with
   * the key named, whatever the control plane sent.
   */
  allowUnsafeProfileEnv?: boolean;
  /**
   * PEM certificate and key files every process that serves the API serves
   * https with (vLLM, SGLang --ssl-certfile/--ssl-keyfile, llama-server
   * --ssl-cert-file/--ssl-key-file, sim and builtin --tls-cert/--tls-key).
   * Absent = plain http.
   */
  engineTls?: EngineTlsFiles;
  /**
   * An absolute directory, owned by the agent's user, where the supervisor
   * writes the 0600 files an engine reads its API key from when it reads
   * none from a variable (SGLang). Absent = such an engine cannot be given a
   * key, and a shard with one fails to start rather than serve without it.
   */
  secretsDir?: string;
  /**
   * The OTLP/HTTP traces URL the agent sends its own spans to: vLLM is
   * started with --otlp-traces-endpoint pointing there, so its spans hang
   * under the router's attempts through the traceparent it is sent. Absent =
   * engines are not asked to trace.
   */
  otlpTracesEndpoint?: string;
}

export interface EngineTlsFiles {
  readonly certFile: string;
  readonly keyFile: string;
}

export interface CompiledEngineAdapterOptions {
  readonly llmgwBin: string | undefined;
  readonly nodePath: string;
  readonly vllmExecutable: string;
  readonly llamaServerExecutable: string;
  readonly rpcServerExecutable: string;
  readonly pythonExecutable: string;
  readonly resolveGguf: ((weightsPath: string) => string) | undefined;
  readonly allowUnsafeProfileEnv: boolean;
  /** Null = plain http. */
  readonly engineTls: EngineTlsFiles | null;
  /** Null = no engine can be given its key in a file. */
  readonly secretsDir: string | null;
  /** Null = engines are not asked to trace. */
  readonly otlpTracesEndpoint: string | null;
}

const OPTION_KEYS = [
  'llmgwBin',
  'nodePath',
  'vllmExecutable',
  'llamaServerExecutable',
  'rpcServerExecutable',
  'pythonExecutable',
  'resolveGguf',
  'allowUnsafeProfileEnv',
  'engineTls',
  'secretsDir',
  'otlpTracesEndpoint',
] as const;

export function compileEngineAdapterOptions(options: EngineAdapterOptions = {}): CompiledEngineAdapterOptions {
  const problems: string[] = [];
  for (const key of Object.keys(options)) {
    if ((OPTION_KEYS as readonly string[]).includes(key)) continue;
    const near = nearestName(key, OPTION_KEYS);
    problems.push(`engine adapter option "${key}" is unknown${near ? `; did you mean "${near}"?` : ''}`);
  }
  const executable = (key: (typeof OPTION_KEYS)[number], fallback: string): string => {
    const value = options[key];
    if (value === undefined) return fallback;
    if (typeof value !== 'string' || value.trim() === '') {
      problems.push(`engine adapter option "${key}" must be a path or a command name; got ${JSON.stringify(value)}`);
      return fallback;
    }
    return value;
  };
  const tls = options.engineTls;
  if (
    tls !== undefined &&
    (typeof tls?.certFile !== 'string' || tls.certFile === '' || typeof tls.keyFile !== 'string' || tls.keyFile === '')
  ) {
    problems.push('engine adapter option "engineTls" wants {certFile, keyFile}, both PEM file paths');
  }
  const secretsDir = options.secretsDir;
  if (secretsDir !== undefined && (typeof secretsDir !== 'string' || !isAbsolute(secretsDir))) {
    problems.push(`engine adapter option "secretsDir" wants an absolute directory; got ${JSON.stringify(secretsDir)}`);
  }
  const compiled: CompiledEngineAdapterOptions = {
    llmgwBin: options.llmgwBin === undefined ? undefined : executable('llmgwBin', ''),
    nodePath: executable('nodePath', process.execPath),
    vllmExecutable: executable('vllmExecutable', 'vllm'),
    llamaServerExecutable: executable('llamaServerExecutable', 'llama-server'),
    rpcServerExecutable: executable('rpcServerExecutable', 'rpc-server'),
    pythonExecutable: executable('pythonExecutable', 'python3'),
    resolveGguf: options.resolveGguf,
    allowUnsafeProfileEnv: options.allowUnsafeProfileEnv === true,
    engineTls: tls === undefined ? null : Object.freeze({ certFile: tls.certFile, keyFile: tls.keyFile }),
    secretsDir: typeof secretsDir === 'string' && isAbsolute(secretsDir) ? secretsDir : null,
    otlpTracesEndpoint: options.otlpTracesEndpoint || null,
  };
  if (problems.length > 0) throw new LlmgwError('LLMGW_CONFIG_INVALID', problems.join('; '));
  return compiled;
}
