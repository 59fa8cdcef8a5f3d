// For the tests beside src/engine/builtin: a node-llama-cpp instance to
// check grammars with llama.cpp's own matcher, and the builtin engine
// serving a tiny random-weight model in process. Random weights write
// whatever a grammar allows, so what such a test asserts holds because the
// grammar held. Each `use…` registers its own beforeAll/afterAll in the
// calling file and returns a getter for what it made.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { getLlama, LlamaLogLevel, type Llama, type LlamaGrammar } from 'node-llama-cpp';
import OpenAI from 'openai';
import { afterAll, beforeAll } from 'vitest';
import { makeTinyModel } from '../../src/dev/make-model/index.js';
import { startBuiltinEngine, type BuiltinEngine } from '../../src/engine/builtin/server.js';

/** A CPU node-llama-cpp for the file's tests: prebuilt binary only, nothing downloaded or built. */
export function useLlama(): () => Llama {
  let llama: Llama | undefined;
  beforeAll(async () => {
    llama = await getLlama({
      gpu: false,
      build: 'never',
      usePrebuiltBinaries: true,
      skipDownload: true,
      logLevel: LlamaLogLevel.error,
    });
  });
  afterAll(async () => {
    await llama?.dispose();
  });
  return () => {
    if (!llama) throw new Error('useLlama: the Llama is made in beforeAll; ask for it inside a test');
    return llama;
  };
}

/**
 * Whether `grammar` accepts the whole of `text`. node-llama-cpp keeps this
 * check internal (LlamaGrammar._testText, llama.cpp's own matcher); a test
 * may lean on it, and fails loudly if an upgrade takes it away.
 */
export function accepts(grammar: LlamaGrammar, text: string): boolean {
  const test = (grammar as unknown as { _testText?: (text: string) => boolean })._testText;
  if (typeof test !== 'function') throw new Error('node-llama-cpp no longer has LlamaGrammar._testText');
  return test.call(grammar, text);
}

export interface TinyEngineOptions {
  /** The name the engine serves the model under. */
  model: string;
  /** Tokens of context, shared by the sequences. */
  contextTokens: number;
  /** Sequences generating at once; absent = 1. */
  parallel?: number;
}

/** The builtin engine on a fresh tiny model, and the official client pointed at it (no retries). */
export function useTinyEngine(options: TinyEngineOptions): { client: () => OpenAI; engine: () => BuiltinEngine } {
  let dir: string | undefined;
  let engine: BuiltinEngine | undefined;
  let client: OpenAI | undefined;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'llmgw-builtin-'));
    const modelPath = join(dir, 'tiny.gguf');
    await makeTinyModel(modelPath, { contextLength: options.contextTokens });
    engine = await startBuiltinEngine({
      modelPath,
      aliases: [options.model],
      threads: 1,
      parallel: options.parallel ?? 1,
      contextTokens: options.contextTokens,
      log: () => undefined,
    });
    await engine.ready;
    client = new OpenAI({ baseURL: `${engine.url}/v1`, apiKey: 'unused', maxRetries: 0 });
  });
  afterAll(async () => {
    await engine?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });
  const made = <T>(value: T | undefined): T => {
    if (value === undefined) throw new Error('useTinyEngine: the engine starts in beforeAll; ask for it inside a test');
    return value;
  };
  return { client: () => made(client), engine: () => made(engine) };
}
