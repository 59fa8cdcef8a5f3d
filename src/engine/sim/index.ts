// sim: a simulated inference engine that speaks OpenAI's HTTP API exactly as
// vLLM serves it (/v1/chat/completions, /v1/completions, /v1/embeddings,
// /v1/models, /health, /metrics) but generates deterministic words instead of
// running a model. Every test and benchmark of llmgw leans on it: the router
// (streaming, aborts, retries on 429 and 500), the reconciler and supervisor
// (slow starts, crashes, hangs), fleet simulation, and the stand-in
// executables for vLLM, llama.cpp and SGLang that record their command line
// and then serve like sim. It is separate from the builtin engine because it
// must run anywhere, start in milliseconds, and fail on demand.
//
// Latency, rate and capacity are options (time to first token, tokens per
// second, max concurrency with queue or reject), so a benchmark measures
// llmgw and not the engine. Measured ceiling, bench/sim.mjs, the sim in its
// own process with unpaced tokens, undici Pool of 200 connections on
// loopback, 2-core shared VM (Node 20): see CEILING below; on a quiet
// 16-core machine it is higher.
//
// CEILING: ~13-16k non-streamed requests/s (16 tokens each) and ~250-300k
// streamed tokens/s (256-token streams), one core for the sim.
export { startSimEngine, type SimEngine, type SimEngineEnd, type SimEngineStats } from './server.js';
export {
  compileSimEngineOptions,
  SIM_ENGINE_OPTION_KEYS,
  type SimEngineConfig,
  type SimEngineOptions,
  type SimFlavor,
  type SimOverflow,
} from './options.js';
export {
  runSimEngineCli,
  parseSimEngineArgs,
  parseContextLength,
  serveSimProcess,
  defaultSimCliIo,
  SIM_CLI_USAGE,
  type SimCliIo,
} from './cli.js';
export {
  writeStandIns,
  runStandIn,
  planStandIn,
  builtSimModulePath,
  STAND_IN_PROGRAMS,
  DEFAULT_STAND_IN_RECORD,
  type StandInProgram,
  type StandInOptions,
  type StandIns,
  type StandInPlan,
  type StandInRunOptions,
} from './stand-ins.js';
export { readStartRecords, selectEnv, type StartRecord } from './record.js';
export { VOCABULARY } from './generate.js';
