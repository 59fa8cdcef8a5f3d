// The tiny llama-architecture model llmgw makes for itself: seeded random F32
// weights behind a byte-level SentencePiece-style vocabulary and a ChatML chat
// template, small enough (a few hundred KB by default) to write in a test's
// beforeAll and to run on one core. Output is gibberish, but it goes through
// llama.cpp's real loader, tokenizer, chat template and sampler, which is what
// the builtin engine, the quick start and the end-to-end tests need offline.
import { z } from 'zod';
import { ValidationError } from '../../errors/index.js';
import { parseOptions } from '../../validation/options.js';
import { writeGguf, type GgufTensor, type GgufValue } from './gguf-writer.js';

export interface MakeTinyModelOptions {
  /** Seed of the weights' PRNG; absent means 1. The same seed and shape give byte-identical files. */
  seed?: number;
  /** Width of the residual stream; absent means 64. Must be a multiple of headCount. */
  embeddingLength?: number;
  /** Transformer blocks; absent means 2. */
  blockCount?: number;
  /** Attention heads (as many key/value heads); absent means 4. */
  headCount?: number;
  /** Hidden width of each block's feed-forward network; absent means 2 × embeddingLength. */
  feedForwardLength?: number;
  /** Longest context the model declares, in tokens; absent means 256. */
  contextLength?: number;
  /** `general.name`; absent means "llmgw-tiny". */
  name?: string;
}

const positiveInt = z.number().int().positive();

const MakeTinyModelOptionsSchema = z.strictObject({
  seed: z
    .number()
    .int()
    .min(0)
    .max(2 ** 32 - 1)
    .optional(),
  embeddingLength: positiveInt.max(8192).optional(),
  blockCount: positiveInt.max(64).optional(),
  headCount: positiveInt.max(128).optional(),
  feedForwardLength: positiveInt.max(32768).optional(),
  contextLength: positiveInt.max(1 << 20).optional(),
  name: z.string().min(1).optional(),
});

export interface CompiledMakeTinyModelOptions {
  readonly seed: number;
  readonly embeddingLength: number;
  readonly blockCount: number;
  readonly headCount: number;
  readonly feedForwardLength: number;
  readonly contextLength: number;
  readonly name: string;
}

export function compileMakeTinyModelOptions(options: MakeTinyModelOptions = {}): CompiledMakeTinyModelOptions {
  const o = parseOptions(MakeTinyModelOptionsSchema, options, 'tiny model options');
  const embeddingLength = o.embeddingLength ?? 64;
  const headCount = o.headCount ?? 4;
  const headLength = embeddingLength / headCount;
  // RoPE rotates pairs of values, so each head needs an even length.
  if (!Number.isInteger(headLength) || headLength % 2 !== 0) {
    throw new ValidationError(
      'LLMGW_CONFIG_INVALID',
      [
        `embeddingLength ${embeddingLength} must split into ${headCount} heads of an even length; try a multiple of ${2 * headCount}`,
      ],
      'tiny model options',
    );
  }
  return Object.freeze({
    seed: o.seed ?? 1,
    embeddingLength,
    blockCount: o.blockCount ?? 2,
    headCount,
    feedForwardLength: o.feedForwardLength ?? 2 * embeddingLength,
    contextLength: o.contextLength ?? 256,
    name: o.name ?? 'llmgw-tiny',
  });
}

/** Token types of llama.cpp's vocabulary (`enum llama_token_type`). */
const TOKEN_TYPE = { normal: 1, unknown: 2, control: 3, byte: 6 } as const;

/**
 * SentencePiece writes a space as U+2581. Without it as a token a space would
 * fall back to that character's three bytes, and decoding would give back
 * "\u2581" instead of " " (node-llama-cpp warns about exactly that round trip).
 */
const SPM_SPACE = '\u2581';

/** The vocabulary: specials first (their ids are what the metadata names), the space, then one token per byte. */
function buildVocabulary(): { tokens: string[]; scores: number[]; types: number[]; printable: boolean[] } {
  const tokens = ['<unk>', '<s>', '</s>', '<|im_start|>', '<|im_end|>', SPM_SPACE];
  const types: number[] = [
    TOKEN_TYPE.unknown,
    TOKEN_TYPE.control,
    TOKEN_TYPE.control,
    TOKEN_TYPE.control,
    TOKEN_TYPE.control,
    TOKEN_TYPE.normal,
  ];
  const printable = tokens.map((token) => token === SPM_SPACE);
  for (let byte = 0; byte < 256; byte++) {
    tokens.push(`<0x${byte.toString(16).toUpperCase().padStart(2, '0')}>`);
    types.push(TOKEN_TYPE.byte);
    // Printable ASCII only: every generated token then decodes to visible text on its own.
    printable.push(byte >= 0x20 && byte <= 0x7e);
  }
  return { tokens, scores: tokens.map(() => 0), types, printable };
}

export const TINY_MODEL_CHAT_TEMPLATE =
  "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

/**
 * mulberry32: a small, fast 32-bit PRNG. Its quality is irrelevant here;
 * what matters is that it is ours and deterministic across Node versions.
 */
function makeRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Dimension 0 of the residual stream carries a constant; see tinyModelTensors. */
const BEACON_VALUE = 4;
/** How hard the output layer pushes non-printable tokens down, per unit of the beacon. */
const SUPPRESS_WEIGHT = -10;

/**
 * Random weights with one deliberate structure. Greedy decoding over random
 * weights would often settle on a control or non-printable token, and a test
 * would see an empty or broken reply. So dimension 0 of every token
 * embedding is a constant "beacon" that no block writes to (row 0 of
 * attn_output and ffn_down is zero): after the final RMS norm it is always
 * positive, and the output rows of control and non-printable tokens weigh it
 * strongly negative. The model then only ever emits printable ASCII and
 * never an end-of-generation token, so generation runs to max_tokens.
 */
function tinyModelTensors(o: CompiledMakeTinyModelOptions, printable: readonly boolean[]): GgufTensor[] {
  const random = makeRandom(o.seed);
  const n = o.embeddingLength;
  const ff = o.feedForwardLength;
  const vocab = printable.length;
  const uniform = (shape: number[], scale: number): Float32Array => {
    const data = new Float32Array(shape.reduce((a, b) => a * b, 1));
    for (let i = 0; i < data.length; i++) data[i] = (random() * 2 - 1) * scale;
    return data;
  };
  const ones = (length: number): Float32Array => new Float32Array(length).fill(1);
  const zeroRow0 = (data: Float32Array, rowLength: number): Float32Array => {
    data.fill(0, 0, rowLength);
    return data;
  };

  const embeddings = uniform([n, vocab], 1);
  for (let t = 0; t < vocab; t++) embeddings[t * n] = BEACON_VALUE;

  const output = uniform([n, vocab], 0.5);
  for (let t = 0; t < vocab; t++) {
    if (printable[t]) output[t * n] = 0;
    else {
      output.fill(0, t * n, (t + 1) * n);
      output[t * n] = SUPPRESS_WEIGHT;
    }
  }

  // Scaled like a usual initialisation (1/sqrt(fan-in)) so activations stay finite.
  const inScale = 1 / Math.sqrt(n);
  const ffScale = 1 / Math.sqrt(ff);
  const tensors: GgufTensor[] = [{ name: 'token_embd.weight', shape: [n, vocab], data: embeddings }];
  for (let b = 0; b < o.blockCount; b++) {
    tensors.push(
      { name: `blk.${b}.attn_norm.weight`, shape: [n], data: ones(n) },
      { name: `blk.${b}.attn_q.weight`, shape: [n, n], data: uniform([n, n], inScale) },
      { name: `blk.${b}.attn_k.weight`, shape: [n, n], data: uniform([n, n], inScale) },
      { name: `blk.${b}.attn_v.weight`, shape: [n, n], data: uniform([n, n], inScale) },
      { name: `blk.${b}.attn_output.weight`, shape: [n, n], data: zeroRow0(uniform([n, n], inScale), n) },
      { name: `blk.${b}.ffn_norm.weight`, shape: [n], data: ones(n) },
      { name: `blk.${b}.ffn_gate.weight`, shape: [n, ff], data: uniform([n, ff], inScale) },
      { name: `blk.${b}.ffn_up.weight`, shape: [n, ff], data: uniform([n, ff], inScale) },
      { name: `blk.${b}.ffn_down.weight`, shape: [ff, n], data: zeroRow0(uniform([ff, n], ffScale), ff) },
    );
  }
  tensors.push(
    { name: 'output_norm.weight', shape: [n], data: ones(n) },
    { name: 'output.weight', shape: [n, vocab], data: output },
  );
  return tensors;
}

/** What was written, for callers that size things from it (tests, the bench). */
export interface TinyModelInfo {
  readonly path: string;
  readonly vocabularySize: number;
  readonly options: CompiledMakeTinyModelOptions;
}

/**
 * Writes a tiny llama-architecture GGUF to `outPath` (overwriting it). Cheap:
 * the default shape takes milliseconds and about 460 KB.
 */
export async function makeTinyModel(outPath: string, options: MakeTinyModelOptions = {}): Promise<TinyModelInfo> {
  const o = compileMakeTinyModelOptions(options);
  const vocabulary = buildVocabulary();
  const headLength = o.embeddingLength / o.headCount;
  const kv: [string, GgufValue][] = [
    ['general.architecture', { type: 'string', value: 'llama' }],
    ['general.name', { type: 'string', value: o.name }],
    // 0 is LLAMA_FTYPE_ALL_F32.
    ['general.file_type', { type: 'u32', value: 0 }],
    ['llama.context_length', { type: 'u32', value: o.contextLength }],
    ['llama.embedding_length', { type: 'u32', value: o.embeddingLength }],
    ['llama.block_count', { type: 'u32', value: o.blockCount }],
    ['llama.feed_forward_length', { type: 'u32', value: o.feedForwardLength }],
    ['llama.attention.head_count', { type: 'u32', value: o.headCount }],
    ['llama.attention.head_count_kv', { type: 'u32', value: o.headCount }],
    ['llama.rope.dimension_count', { type: 'u32', value: headLength }],
    ['llama.rope.freq_base', { type: 'f32', value: 10000 }],
    ['llama.attention.layer_norm_rms_epsilon', { type: 'f32', value: 1e-5 }],
    ['llama.vocab_size', { type: 'u32', value: vocabulary.tokens.length }],
    ['tokenizer.ggml.model', { type: 'string', value: 'llama' }],
    ['tokenizer.ggml.tokens', { type: 'string[]', value: vocabulary.tokens }],
    ['tokenizer.ggml.scores', { type: 'f32[]', value: vocabulary.scores }],
    ['tokenizer.ggml.token_type', { type: 'i32[]', value: vocabulary.types }],
    ['tokenizer.ggml.unknown_token_id', { type: 'u32', value: 0 }],
    ['tokenizer.ggml.bos_token_id', { type: 'u32', value: 1 }],
    ['tokenizer.ggml.eos_token_id', { type: 'u32', value: 2 }],
    ['tokenizer.ggml.add_bos_token', { type: 'bool', value: true }],
    ['tokenizer.ggml.add_eos_token', { type: 'bool', value: false }],
    // Otherwise each text piece after a special token gains a leading space ("<|im_start|> user").
    ['tokenizer.ggml.add_space_prefix', { type: 'bool', value: false }],
    ['tokenizer.chat_template', { type: 'string', value: TINY_MODEL_CHAT_TEMPLATE }],
  ];
  await writeGguf(outPath, new Map(kv), tinyModelTensors(o, vocabulary.printable));
  return { path: outPath, vocabularySize: vocabulary.tokens.length, options: o };
}
