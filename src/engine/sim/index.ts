// sim: a simulated inference engine that speaks OpenAI's HTTP API exactly as
// vLLM serves it (/v1/chat/completions, /v1/completions, /v1/embeddings,
// /v1/responses as vLLM 0.10 and later serve it,
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
// llmgw and not the engine.
//
// Measured ceiling (bench/sim.mjs: the sim in its own process, unpaced,
// undici Pool of 200 connections over loopback, Node 20, a shared 2-core VM
// at load ~7): about 12,000 non-streamed chat requests (16 tokens) and
// 350,000 streamed tokens (256-token streams) per core-second of the sim.
// Wall-clock on that VM was 3,000-5,700 requests/s and 100,000-220,000
// tokens/s, bounded by the client and the neighbours (a CPU profile showed
// the sim ~25% idle and most of its time in writev). So one sim process
// keeps up with a router that spends ~80 µs of CPU per request or more, and
// a benchmark that needs more runs several sims.
export { startSimEngine, type SimEngine, type SimEngineStats } from './server.js';
export { type SimEngineOptions } from './options.js';
export { runSimEngineCli } from './cli.js';
export { runStandIn } from './stand-ins.js';
