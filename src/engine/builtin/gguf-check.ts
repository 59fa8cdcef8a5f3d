// Checks a GGUF file before llama.cpp sees it, and sizes it for placement.
// llama.cpp trusts counts and offsets in the header; a truncated download or
// a crafted file can make it allocate wildly or abort the process. So the
// engine reads the header with a bounded parser first (@huggingface/gguf,
// behind our own sanity checks on the counts against the file's size), checks
// that every tensor's bytes lie inside the file, and refuses anything else
// with LLMGW_GGUF_INVALID and a sentence saying what is wrong. The same facts
// give estimateBuiltinMemory(), which placement uses for CPU profiles.
import { open, stat } from 'node:fs/promises';
import { gguf, type GGUFParseOutput } from '@huggingface/gguf';
import { LlmgwError } from '../../errors/index.js';

/** Magic, version, tensor count and key/value count: the fixed part of a v2/v3 header. */
const FIXED_HEADER_BYTES = 24;
/** Smallest tensor info: name length (8), no name, n_dims (4), type (4), offset (8). */
const MIN_TENSOR_INFO_BYTES = 24;
/** Smallest key/value: key length (8), value type (4), a one-byte value. */
const MIN_KV_BYTES = 13;
/** ggml's default when `general.alignment` is absent. */
const DEFAULT_ALIGNMENT_BYTES = 32;

/**
 * Bytes per block and values per block of ggml's tensor types (ggml.c
 * `type_traits`). A type missing here is still loaded; only its size is not
 * checked against the file.
 */
const GGML_TYPE_BLOCKS: Readonly<Record<number, { blockValues: number; blockBytes: number }>> = {
  0: { blockValues: 1, blockBytes: 4 }, // F32
  1: { blockValues: 1, blockBytes: 2 }, // F16
  2: { blockValues: 32, blockBytes: 18 }, // Q4_0
  3: { blockValues: 32, blockBytes: 20 }, // Q4_1
  6: { blockValues: 32, blockBytes: 22 }, // Q5_0
  7: { blockValues: 32, blockBytes: 24 }, // Q5_1
  8: { blockValues: 32, blockBytes: 34 }, // Q8_0
  9: { blockValues: 32, blockBytes: 36 }, // Q8_1
  10: { blockValues: 256, blockBytes: 84 }, // Q2_K
  11: { blockValues: 256, blockBytes: 110 }, // Q3_K
  12: { blockValues: 256, blockBytes: 144 }, // Q4_K
  13: { blockValues: 256, blockBytes: 176 }, // Q5_K
  14: { blockValues: 256, blockBytes: 210 }, // Q6_K
  15: { blockValues: 256, blockBytes: 292 }, // Q8_K
  16: { blockValues: 256, blockBytes: 66 }, // IQ2_XXS
  17: { blockValues: 256, blockBytes: 74 }, // IQ2_XS
  18: { blockValues: 256, blockBytes: 98 }, // IQ3_XXS
  19: { blockValues: 256, blockBytes: 50 }, // IQ1_S
  20: { blockValues: 32, blockBytes: 18 }, // IQ4_NL
  21: { blockValues: 256, blockBytes: 110 }, // IQ3_S
  22: { blockValues: 256, blockBytes: 82 }, // IQ2_S
  23: { blockValues: 256, blockBytes: 136 }, // IQ4_XS
  24: { blockValues: 1, blockBytes: 1 }, // I8
  25: { blockValues: 1, blockBytes: 2 }, // I16
  26: { blockValues: 1, blockBytes: 4 }, // I32
  27: { blockValues: 1, blockBytes: 8 }, // I64
  28: { blockValues: 1, blockBytes: 8 }, // F64
  29: { blockValues: 256, blockBytes: 56 }, // IQ1_M
  30: { blockValues: 1, blockBytes: 2 }, // BF16
  34: { blockValues: 256, blockBytes: 54 }, // TQ1_0
  35: { blockValues: 256, blockBytes: 66 }, // TQ2_0
  39: { blockValues: 32, blockBytes: 17 }, // MXFP4
};

/** What llmgw needs to know about a model file. A zero means the file does not say. */
export interface GgufModelFacts {
  readonly fileSizeBytes: number;
  /** Bytes of tensor data of the types llmgw knows; 0 when none is known. */
  readonly tensorBytes: number;
  readonly tensorCount: number;
  readonly architecture: string;
  /** `general.name`; absent when the file has none. */
  readonly name: string | undefined;
  readonly blockCount: number;
  readonly trainedContextTokens: number;
  readonly embeddingLength: number;
  readonly headCount: number;
  readonly headCountKv: number;
  /** Per head, in values; the file's own or embeddingLength / headCount. */
  readonly keyLength: number;
  readonly valueLength: number;
  readonly vocabularySize: number;
}

function invalid(path: string, problem: string, cause?: unknown): LlmgwError {
  return new LlmgwError('LLMGW_GGUF_INVALID', `${path} is not a usable GGUF file: ${problem}`, {
    context: { path },
    ...(cause === undefined ? {} : { cause }),
  });
}

function toNumber(value: unknown): number {
  if (typeof value === 'number' && Number.isFinite(value)) return value;
  if (typeof value === 'bigint' && value <= BigInt(Number.MAX_SAFE_INTEGER)) return Number(value);
  return 0;
}

/** Bytes a tensor's data takes, or undefined for a type whose size llmgw does not know. */
function tensorDataBytes(shape: readonly bigint[], dtype: number): bigint | undefined {
  const traits = GGML_TYPE_BLOCKS[dtype];
  if (!traits) return undefined;
  const values = shape.reduce((a, b) => a * b, 1n);
  const blocks = (values + BigInt(traits.blockValues) - 1n) / BigInt(traits.blockValues);
  return blocks * BigInt(traits.blockBytes);
}

/**
 * Reads the fixed header and refuses counts the file's size cannot hold,
 * before any parser sizes an allocation from them.
 */
async function checkFixedHeader(path: string, fileSizeBytes: number): Promise<void> {
  if (fileSizeBytes < FIXED_HEADER_BYTES) {
    throw invalid(
      path,
      `it is ${fileSizeBytes} bytes, shorter than a GGUF header (${FIXED_HEADER_BYTES} bytes); the file is truncated, fetch it again`,
    );
  }
  const header = Buffer.alloc(FIXED_HEADER_BYTES);
  const file = await open(path, 'r');
  try {
    await file.read(header, 0, FIXED_HEADER_BYTES, 0);
  } finally {
    await file.close();
  }
  if (header.toString('latin1', 0, 4) !== 'GGUF') {
    throw invalid(
      path,
      'it does not start with the GGUF magic bytes; is it a GGUF file (not safetensors or a partial download)?',
    );
  }
  const version = header.readUInt32LE(4);
  if (version !== 2 && version !== 3) {
    throw invalid(
      path,
      `it is GGUF version ${version}; llama.cpp reads versions 2 and 3, so convert it again with a current llama.cpp`,
    );
  }
  const tensorCount = header.readBigUInt64LE(8);
  const kvCount = header.readBigUInt64LE(16);
  const roomBytes = BigInt(fileSizeBytes - FIXED_HEADER_BYTES);
  if (tensorCount > roomBytes / BigInt(MIN_TENSOR_INFO_BYTES)) {
    throw invalid(
      path,
      `its header claims ${tensorCount} tensors, more than a ${fileSizeBytes}-byte file can describe: the file is truncated or its header is corrupt`,
    );
  }
  if (kvCount > roomBytes / BigInt(MIN_KV_BYTES)) {
    throw invalid(
      path,
      `its header claims ${kvCount} metadata entries, more than a ${fileSizeBytes}-byte file can hold: the file is truncated or its header is corrupt`,
    );
  }
}

/** The facts of a parsed header; exported so that placement can size a model from metadata it already has. */
export function ggufModelFacts(
  parsed: Pick<GGUFParseOutput, 'metadata' | 'tensorInfos'>,
  fileSizeBytes: number,
): GgufModelFacts {
  const m = parsed.metadata as Record<string, unknown>;
  const architecture = typeof m['general.architecture'] === 'string' ? m['general.architecture'] : '';
  const key = (name: string): number => toNumber(m[`${architecture}.${name}`]);
  const embeddingLength = key('embedding_length');
  const headCount = key('attention.head_count');
  const headCountKv = key('attention.head_count_kv') || headCount;
  const headLength = headCount > 0 ? Math.floor(embeddingLength / headCount) : 0;
  let tensorBytes = 0n;
  for (const t of parsed.tensorInfos) tensorBytes += tensorDataBytes(t.shape, Number(t.dtype)) ?? 0n;
  const tokens = m['tokenizer.ggml.tokens'];
  return {
    fileSizeBytes,
    tensorBytes: Number(tensorBytes),
    tensorCount: parsed.tensorInfos.length,
    architecture,
    name: typeof m['general.name'] === 'string' ? m['general.name'] : undefined,
    blockCount: key('block_count'),
    trainedContextTokens: key('context_length'),
    embeddingLength,
    headCount,
    headCountKv,
    keyLength: key('attention.key_length') || headLength,
    valueLength: key('attention.value_length') || headLength,
    vocabularySize: key('vocab_size') || (Array.isArray(tokens) ? tokens.length : 0),
  };
}

/**
 * Validates a GGUF file and returns its facts. Throws LLMGW_GGUF_INVALID for
 * a missing, truncated or malformed file; reads only the header, never the
 * weights.
 */
export async function readGgufModelFacts(path: string): Promise<GgufModelFacts> {
  let fileSizeBytes: number;
  try {
    const info = await stat(path);
    if (!info.isFile()) throw invalid(path, 'it is not a regular file');
    fileSizeBytes = info.size;
  } catch (err) {
    if (err instanceof LlmgwError) throw err;
    throw invalid(
      path,
      `it cannot be read (${(err as NodeJS.ErrnoException).code ?? String(err)}); check the path and its permissions`,
      err,
    );
  }
  await checkFixedHeader(path, fileSizeBytes);

  let parsed: GGUFParseOutput;
  try {
    parsed = await gguf(path, { allowLocalFile: true });
  } catch (err) {
    throw invalid(path, `its header cannot be parsed (${err instanceof Error ? err.message : String(err)})`, err);
  }
  const headerEndBytes = parsed.tensorInfoByteRange[1];
  if (headerEndBytes > fileSizeBytes) {
    throw invalid(
      path,
      `its header runs to byte ${headerEndBytes} but the file has ${fileSizeBytes}; the file is truncated, fetch it again`,
    );
  }
  const alignment =
    toNumber((parsed.metadata as Record<string, unknown>)['general.alignment']) || DEFAULT_ALIGNMENT_BYTES;
  const dataStartBytes = parsed.tensorDataOffset;
  const size = BigInt(fileSizeBytes);
  for (const t of parsed.tensorInfos) {
    if (t.offset % BigInt(alignment) !== 0n) {
      throw invalid(
        path,
        `tensor ${t.name} starts at offset ${t.offset}, not a multiple of the file's alignment (${alignment}); the header is corrupt`,
      );
    }
    const endBytes = dataStartBytes + t.offset + (tensorDataBytes(t.shape, Number(t.dtype)) ?? 0n);
    if (endBytes > size) {
      throw invalid(
        path,
        `tensor ${t.name} ends at byte ${endBytes} but the file has ${fileSizeBytes}; the file is truncated (an interrupted download?), fetch it again`,
      );
    }
  }
  const facts = ggufModelFacts(parsed, fileSizeBytes);
  if (facts.architecture === '') {
    throw invalid(path, 'it names no general.architecture, so llama.cpp cannot tell how to run it');
  }
  return facts;
}

export interface BuiltinMemoryEstimate {
  /** The mapped weights: the file's size (llama.cpp maps the whole file). */
  readonly weightsBytes: number;
  /** K and V for every layer and cell, at llama.cpp's default F16 cache. */
  readonly kvCacheBytes: number;
  /** Compute buffers and the Node process itself; a rough allowance, not a measurement. */
  readonly overheadBytes: number;
  readonly totalBytes: number;
}

/** Node, llama.cpp and their heaps before any model: measured around 100 MiB, rounded up. */
const RUNTIME_BASE_BYTES = 128 * 2 ** 20;
/** Tokens llama.cpp evaluates per batch by default; compute buffers scale with it. */
const BATCH_TOKENS = 512;
const F16_BYTES = 2;
const F32_BYTES = 4;

/**
 * RAM the builtin engine needs to serve `model` with `kvCacheTokens` cells
 * of KV cache (--ctx-size: all sequences together). Pure given facts; with a
 * path it validates the file first.
 */
export function estimateBuiltinMemory(model: GgufModelFacts, kvCacheTokens: number): BuiltinMemoryEstimate;
export function estimateBuiltinMemory(model: string, kvCacheTokens: number): Promise<BuiltinMemoryEstimate>;
export function estimateBuiltinMemory(
  model: string | GgufModelFacts,
  kvCacheTokens: number,
): BuiltinMemoryEstimate | Promise<BuiltinMemoryEstimate> {
  if (typeof model === 'string')
    return readGgufModelFacts(model).then((facts) => estimateBuiltinMemory(facts, kvCacheTokens));
  const cells = Math.max(0, Math.floor(kvCacheTokens));
  const kvCacheBytes = model.blockCount * cells * model.headCountKv * (model.keyLength + model.valueLength) * F16_BYTES;
  // The largest compute buffers: logits for a batch and one layer's attention scores.
  const computeBytes = BATCH_TOKENS * F32_BYTES * (model.vocabularySize + model.headCount * Math.min(cells, 1 << 16));
  const overheadBytes = RUNTIME_BASE_BYTES + computeBytes;
  const weightsBytes = model.fileSizeBytes;
  return { weightsBytes, kvCacheBytes, overheadBytes, totalBytes: weightsBytes + kvCacheBytes + overheadBytes };
}
