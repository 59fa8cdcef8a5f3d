import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gguf } from '@huggingface/gguf';
import { getLlama, LlamaChat, LlamaCompletion, LlamaLogLevel } from 'node-llama-cpp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isLlmgwError } from '../../errors/index.js';
import { makeTinyModel, runMakeModelCli } from './index.js';
import { compileMakeTinyModelOptions, TINY_MODEL_CHAT_TEMPLATE } from './make-tiny-model.js';

let dir: string;
let modelPath: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'llmgw-make-model-'));
  modelPath = join(dir, 'tiny.gguf');
  await makeTinyModel(modelPath, { seed: 7 });
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('makeTinyModel', () => {
  it('writes a GGUF v3 llama model that @huggingface/gguf reads back key for key', async () => {
    const parsed = await gguf(modelPath, { allowLocalFile: true });
    const m = parsed.metadata as Record<string, unknown>;
    expect(m.version).toBe(3);
    expect(m['general.architecture']).toBe('llama');
    expect(m['general.alignment']).toBe(32);
    expect(m['llama.embedding_length']).toBe(64);
    expect(m['llama.block_count']).toBe(2);
    expect(m['llama.attention.head_count']).toBe(4);
    expect(m['llama.attention.head_count_kv']).toBe(4);
    expect(m['llama.feed_forward_length']).toBe(128);
    expect(m['llama.context_length']).toBe(256);
    expect(m['llama.rope.dimension_count']).toBe(16);
    expect(m['tokenizer.ggml.model']).toBe('llama');
    expect(m['tokenizer.chat_template']).toBe(TINY_MODEL_CHAT_TEMPLATE);
    const tokens = m['tokenizer.ggml.tokens'] as string[];
    expect(tokens.slice(0, 3)).toEqual(['<unk>', '<s>', '</s>']);
    expect(tokens, 'every byte needs its own token for byte fallback').toContain('<0x0A>');
    expect((m['tokenizer.ggml.token_type'] as number[]).length).toBe(tokens.length);
    expect((m['tokenizer.ggml.scores'] as number[]).length).toBe(tokens.length);

    const byName = new Map(parsed.tensorInfos.map((t) => [t.name, t]));
    expect(parsed.tensorInfos).toHaveLength(3 + 2 * 9);
    // ggml order: the row length first.
    expect(byName.get('token_embd.weight')?.shape).toEqual([64n, BigInt(tokens.length)]);
    expect(byName.get('blk.1.ffn_down.weight')?.shape).toEqual([128n, 64n]);
    expect(byName.get('blk.1.ffn_gate.weight')?.shape).toEqual([64n, 128n]);
    expect(byName.get('output_norm.weight')?.shape).toEqual([64n]);
    for (const t of parsed.tensorInfos) expect(t.offset % 32n, `${t.name} is aligned`).toBe(0n);
    expect(parsed.tensorDataOffset % 32n).toBe(0n);

    const { size } = await stat(modelPath);
    const last = parsed.tensorInfos.at(-1)!;
    expect(BigInt(size), 'the data section ends with the last tensor').toBe(
      parsed.tensorDataOffset + last.offset + 64n * BigInt(tokens.length) * 4n,
    );
    expect(size, 'a few hundred KB').toBeLessThan(600 * 1024);
  });

  it('gives the same bytes for the same seed and different weights for another', async () => {
    const again = join(dir, 'again.gguf');
    const other = join(dir, 'other.gguf');
    await makeTinyModel(again, { seed: 7 });
    await makeTinyModel(other, { seed: 8 });
    const [a, b, c] = await Promise.all([readFile(modelPath), readFile(again), readFile(other)]);
    expect(a.equals(b), 'same seed, same file').toBe(true);
    expect(a.length).toBe(c.length);
    expect(a.equals(c), 'another seed, other weights').toBe(false);
  });

  it('refuses a shape llama.cpp could not run, saying what to pick', () => {
    expect(() => compileMakeTinyModelOptions({ embeddingLength: 60, headCount: 4 })).toThrow(/multiple of 8/);
    try {
      compileMakeTinyModelOptions({ seeed: 1 } as never);
      expect.unreachable('an unknown option must be refused');
    } catch (err) {
      expect(isLlmgwError(err) && err.code).toBe('LLMGW_CONFIG_INVALID');
      expect((err as Error).message).toContain('did you mean "seed"');
    }
  });

  it('loads in node-llama-cpp and generates through the real loader, tokenizer and chat template', async () => {
    const llama = await getLlama({
      gpu: false,
      build: 'never',
      skipDownload: true,
      progressLogs: false,
      maxThreads: 1,
      logLevel: LlamaLogLevel.error,
    });
    try {
      const model = await llama.loadModel({ modelPath, gpuLayers: 0 });
      expect(model.getWarnings(), 'tokenize/detokenize round-trips and the file has no problems').toEqual([]);
      expect(model.detokenize(model.tokenize('some test text here'))).toBe('some test text here');
      const context = await model.createContext({ contextSize: 128, threads: 1, sequences: 2 });

      const completion = new LlamaCompletion({ contextSequence: context.getSequence() });
      const text = await completion.generateCompletionWithMeta('Hello', { maxTokens: 8, temperature: 0 });
      expect(text.metadata.stopReason, 'the model never ends a reply on its own').toBe('maxTokens');
      expect(text.response, 'only printable ASCII comes out').toMatch(/^[\x20-\x7e]{8}$/);

      const chat = new LlamaChat({ contextSequence: context.getSequence() });
      expect(chat.chatWrapper.wrapperName, 'the GGUF chat template is recognised').toBe('ChatML');
      const reply = await chat.generateResponse(
        [
          { type: 'user', text: 'hi' },
          { type: 'model', response: [] },
        ],
        { maxTokens: 5 },
      );
      expect(reply.response).toMatch(/^[\x20-\x7e]{1,5}$/);
    } finally {
      await llama.dispose();
    }
  });
});

describe('runMakeModelCli', () => {
  it('writes the file and says where', async () => {
    const out: string[] = [];
    const path = join(dir, 'cli.gguf');
    const code = await runMakeModelCli([path, '--seed', '3'], { out: (l) => out.push(l), err: (l) => out.push(l) });
    expect(code, out.join('\n')).toBe(0);
    expect(out[0]).toContain(`wrote ${path}`);
    expect((await stat(path)).size).toBeGreaterThan(100_000);
  });

  it('exits 2 with the usage line on a mistyped flag', async () => {
    const err: string[] = [];
    const code = await runMakeModelCli([join(dir, 'x.gguf'), '--sed', '3'], {
      out: () => undefined,
      err: (l) => err.push(l),
    });
    expect(code).toBe(2);
    expect(err.join('\n')).toMatch(/did you mean --seed\?[\s\S]*usage: llmgw dev make-model/);
    process.exitCode = 0;
  });
});
