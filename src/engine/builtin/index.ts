// The builtin engine: llmgw's own OpenAI-compatible server over a GGUF file
// on the CPU, through node-llama-cpp's prebuilt llama.cpp, so that a machine
// with no GPU and no Python still serves a real model (the quick start, CPU
// pools, tests). It is separate from the agent because it always runs as the
// agent's child process (`llmgw engine builtin`): a model that crashes the
// loader takes down one engine, never the agent. The agent reaches it only
// over HTTP, like any other engine.
export { runBuiltinEngineCli } from './cli.js';
export { defaultThreads, type BuiltinEngineOptions } from './options.js';
export { startBuiltinEngine, type BuiltinEngine, type BuiltinEngineStats } from './server.js';
