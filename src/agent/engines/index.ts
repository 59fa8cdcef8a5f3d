// Engine adapters: each turns one shard (weights path, GPUs, port, rank and
// peers) into the exact argv and environment of its engine, and says how to
// ask that engine whether it is ready. Separate from the supervisor because
// what to run is engine knowledge (flags drift per release; ENGINES.md keeps
// the sources) while how to run it — process groups, restarts, logs — is the
// same for every engine. Adapters do no I/O except finding a GGUF file in a
// directory, and that is injectable.
export { adapterFor } from './adapter-for.js';
export { engineBaseEnv } from './engine-env.js';
export { probeHost, hostPort } from './launch-parts.js';
export {
  type EngineAdapter,
  type EngineLaunchPlan,
  type EngineName,
  type Readiness,
  type ShardLaunch,
} from './shard-launch.js';
