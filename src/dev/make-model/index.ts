// `llmgw dev make-model`: makes a tiny llama-architecture GGUF with seeded
// random weights, offline, in milliseconds. It is separate from the engines
// because it is a fixture maker, not a server: the builtin engine's tests,
// the end-to-end tests, the benchmarks and the quick start's demo catalog all
// need a real model file that no download can break.
export { makeTinyModel, type MakeTinyModelOptions, type TinyModelInfo } from './make-tiny-model.js';
export { runMakeModelCli } from './cli.js';
