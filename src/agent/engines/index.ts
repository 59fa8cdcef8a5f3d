// Engine adapters: each turns one shard (weights path, GPUs, port, rank and
// peers) into the exact argv and environment of its engine, and says how to
// ask that engine whether it is ready. Separate from the supervisor because
// what to run is engine knowledge (flags drift per release; ENGINES.md keeps
// the sources) while how to run it — process groups, restarts, logs — is the
// same for every engine. Adapters do no I/O except finding a GGUF file in a
// directory, and that is injectable.
export { adapterFor } from './adapter-for.js';
export { engineBaseEnv, isPassedToEngine } from './engine-env.js';
export { findGgufFile } from './gguf-file.js';
export { RPC_SERVER_DEFAULT_PORT } from './llamacpp.js';
export { probeHost, hostPort } from './launch-parts.js';
export { SGLANG_DEFAULT_DIST_INIT_PORT } from './sglang.js';
export { VLLM_DEFAULT_MASTER_PORT } from './vllm.js';
export {
  ENGINE_NAMES,
  compileEngineAdapterOptions,
  isEngineName,
  type CompiledEngineAdapterOptions,
  type EngineAdapter,
  type EngineAdapterOptions,
  type EngineLaunchPlan,
  type EngineTlsFiles,
  type EngineName,
  type Readiness,
  type ShardLaunch,
  type ShardPeer,
} from './shard-launch.js';
