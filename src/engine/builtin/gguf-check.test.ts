import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeTinyModel } from '../../dev/make-model/index.js';
import { isLlmgwError } from '../../errors/index.js';
import { estimateBuiltinMemory, readGgufModelFacts } from './gguf-check.js';

let dir: string;
let modelPath: string;
let modelBytes: Buffer;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'llmgw-gguf-check-'));
  modelPath = join(dir, 'tiny.gguf');
  await makeTinyModel(modelPath);
  modelBytes = await readFile(modelPath);
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function expectInvalid(path: string, message: RegExp): Promise<void> {
  try {
    await readGgufModelFacts(path);
    expect.unreachable(`${path} must be refused`);
  } catch (err) {
    expect(isLlmgwError(err) && err.code, String(err)).toBe('LLMGW_GGUF_INVALID');
    expect((err as Error).message).toMatch(message);
  }
}

/** The fixed part of a GGUF v3 header with the given counts. */
function header(tensorCount: bigint, kvCount: bigint): Buffer {
  const b = Buffer.alloc(24);
  b.write('GGUF', 0, 'latin1');
  b.writeUInt32LE(3, 4);
  b.writeBigUInt64LE(tensorCount, 8);
  b.writeBigUInt64LE(kvCount, 16);
  return b;
}

describe('readGgufModelFacts', () => {
  it('reads the facts placement and the engine need', async () => {
    const facts = await readGgufModelFacts(modelPath);
    expect(facts).toMatchObject({
      architecture: 'llama',
      name: 'llmgw-tiny',
      blockCount: 2,
      trainedContextTokens: 256,
      embeddingLength: 64,
      headCount: 4,
      headCountKv: 4,
      keyLength: 16,
      valueLength: 16,
      tensorCount: 21,
      fileSizeBytes: modelBytes.length,
    });
    expect(facts.vocabularySize).toBeGreaterThan(256);
    expect(facts.tensorBytes, 'F32 data fills the file but for header and padding').toBeLessThan(modelBytes.length);
    expect(facts.tensorBytes).toBeGreaterThan(modelBytes.length * 0.9);
  });

  it('refuses a file truncated inside its tensor data, naming the tensor', async () => {
    const path = join(dir, 'cut-data.gguf');
    await writeFile(path, modelBytes.subarray(0, Math.floor(modelBytes.length / 2)));
    await expectInvalid(path, /tensor \S+ ends at byte \d+ but the file has \d+; the file is truncated/);
  });

  it('refuses a file truncated inside its header', async () => {
    const path = join(dir, 'cut-header.gguf');
    await writeFile(path, modelBytes.subarray(0, 2000));
    await expectInvalid(path, /truncated/);
  });

  it('refuses a file shorter than any header, and one that is not GGUF at all', async () => {
    const short = join(dir, 'short.gguf');
    await writeFile(short, modelBytes.subarray(0, 10));
    await expectInvalid(short, /shorter than a GGUF header/);
    const other = join(dir, 'other.gguf');
    await writeFile(other, Buffer.from('{"safetensors": "not really"}'));
    await expectInvalid(other, /GGUF magic/);
  });

  it('refuses absurd counts in the header before any parser allocates for them', async () => {
    // Guards against a crafted header making the engine reserve memory for
    // 2^62 entries: the cost would be the agent's whole machine.
    const path = join(dir, 'huge-kv.gguf');
    await writeFile(path, Buffer.concat([header(0n, 2n ** 62n), Buffer.alloc(1000)]));
    const before = process.memoryUsage().arrayBuffers;
    await expectInvalid(path, /claims 4611686018427387904 metadata entries, more than a 1024-byte file can hold/);
    expect(process.memoryUsage().arrayBuffers - before, 'no buffer sized from the count').toBeLessThan(1024 * 1024);

    const tensors = join(dir, 'huge-tensors.gguf');
    await writeFile(tensors, Buffer.concat([header(2n ** 40n, 0n), Buffer.alloc(1000)]));
    await expectInvalid(tensors, /claims 1099511627776 tensors/);
  });

  it('refuses a missing file with the reason', async () => {
    await expectInvalid(join(dir, 'absent.gguf'), /cannot be read \(ENOENT\)/);
  });
});

describe('estimateBuiltinMemory', () => {
  it('counts the file, an F16 KV cache per layer and cell, and an allowance', async () => {
    const estimate = await estimateBuiltinMemory(modelPath, 1024);
    // 2 layers × 1024 cells × 4 KV heads × (16 + 16) values × 2 bytes.
    expect(estimate.kvCacheBytes).toBe(2 * 1024 * 4 * 32 * 2);
    expect(estimate.weightsBytes).toBe(modelBytes.length);
    expect(estimate.overheadBytes).toBeGreaterThan(0);
    expect(estimate.totalBytes).toBe(estimate.weightsBytes + estimate.kvCacheBytes + estimate.overheadBytes);
  });

  it('grows with the context and is pure given facts', async () => {
    const facts = await readGgufModelFacts(modelPath);
    const small = estimateBuiltinMemory(facts, 256);
    const large = estimateBuiltinMemory(facts, 4096);
    expect(large.kvCacheBytes).toBe(small.kvCacheBytes * 16);
    expect(large.totalBytes).toBeGreaterThan(small.totalBytes);
    expect(estimateBuiltinMemory(facts, 256)).toEqual(small);
  });
});
