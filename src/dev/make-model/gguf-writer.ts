// A minimal GGUF v3 writer: metadata key/values, tensor infos and F32 tensor
// data, laid out the way llama.cpp's gguf.cpp reads them. It is llmgw's own
// code on purpose: it only has to write the test fixtures llmgw makes for
// itself (see make-tiny-model.ts), and owning a ~150-line writer beats
// depending on Python's gguf package or a converter to get a model offline.
// Reading GGUF files is not this module's business: the engine validates with
// @huggingface/gguf, and the tests read these files back with it.
import { open } from 'node:fs/promises';

/** GGUF metadata value types (gguf.h `enum gguf_type`). */
const GGUF_TYPE = { u32: 4, i32: 5, f32: 6, bool: 7, string: 8, array: 9 } as const;

/** ggml tensor types this writer emits (ggml.h `enum ggml_type`). */
const GGML_TYPE_F32 = 0;

/** Where the data section and every tensor in it start, in bytes (`general.alignment`). */
export const GGUF_ALIGNMENT_BYTES = 32;

export type GgufValue =
  | { type: 'u32'; value: number }
  | { type: 'i32'; value: number }
  | { type: 'f32'; value: number }
  | { type: 'bool'; value: boolean }
  | { type: 'string'; value: string }
  | { type: 'string[]'; value: readonly string[] }
  | { type: 'f32[]'; value: readonly number[] }
  | { type: 'i32[]'; value: readonly number[] };

export interface GgufTensor {
  /** llama.cpp's tensor name, e.g. `blk.0.attn_q.weight`. */
  name: string;
  /** ggml `ne` order: the first dimension is the fastest-varying (a row's length). */
  shape: readonly number[];
  /** Row-major in `shape`'s order; its length must be the product of `shape`. */
  data: Float32Array;
}

/** Appends little-endian values to a growing list of chunks; the header is small, so simple wins. */
class ByteSink {
  private readonly chunks: Buffer[] = [];
  lengthBytes = 0;

  push(chunk: Buffer): void {
    this.chunks.push(chunk);
    this.lengthBytes += chunk.length;
  }

  u32(value: number): void {
    const b = Buffer.alloc(4);
    b.writeUInt32LE(value);
    this.push(b);
  }

  i32(value: number): void {
    const b = Buffer.alloc(4);
    b.writeInt32LE(value);
    this.push(b);
  }

  u64(value: number): void {
    const b = Buffer.alloc(8);
    b.writeBigUInt64LE(BigInt(value));
    this.push(b);
  }

  f32(value: number): void {
    const b = Buffer.alloc(4);
    b.writeFloatLE(value);
    this.push(b);
  }

  string(value: string): void {
    const bytes = Buffer.from(value, 'utf8');
    this.u64(bytes.length);
    this.push(bytes);
  }

  padTo(alignmentBytes: number): void {
    const pad = (alignmentBytes - (this.lengthBytes % alignmentBytes)) % alignmentBytes;
    if (pad > 0) this.push(Buffer.alloc(pad));
  }

  toBuffer(): Buffer {
    return Buffer.concat(this.chunks, this.lengthBytes);
  }
}

function writeValue(sink: ByteSink, value: GgufValue): void {
  switch (value.type) {
    case 'u32':
      sink.u32(GGUF_TYPE.u32);
      sink.u32(value.value);
      return;
    case 'i32':
      sink.u32(GGUF_TYPE.i32);
      sink.i32(value.value);
      return;
    case 'f32':
      sink.u32(GGUF_TYPE.f32);
      sink.f32(value.value);
      return;
    case 'bool':
      sink.u32(GGUF_TYPE.bool);
      sink.push(Buffer.from([value.value ? 1 : 0]));
      return;
    case 'string':
      sink.u32(GGUF_TYPE.string);
      sink.string(value.value);
      return;
    case 'string[]':
      sink.u32(GGUF_TYPE.array);
      sink.u32(GGUF_TYPE.string);
      sink.u64(value.value.length);
      for (const item of value.value) sink.string(item);
      return;
    case 'f32[]':
      sink.u32(GGUF_TYPE.array);
      sink.u32(GGUF_TYPE.f32);
      sink.u64(value.value.length);
      for (const item of value.value) sink.f32(item);
      return;
    case 'i32[]':
      sink.u32(GGUF_TYPE.array);
      sink.u32(GGUF_TYPE.i32);
      sink.u64(value.value.length);
      for (const item of value.value) sink.i32(item);
      return;
  }
}

function alignUp(value: number, alignmentBytes: number): number {
  return Math.ceil(value / alignmentBytes) * alignmentBytes;
}

/**
 * Writes a GGUF v3 file: header, key/values (in the order given), tensor
 * infos, padding to `general.alignment`, then each tensor's F32 data, each
 * starting on an aligned offset. `general.alignment` is added to the metadata
 * so readers need not assume the default.
 */
export async function writeGguf(
  outPath: string,
  metadata: ReadonlyMap<string, GgufValue>,
  tensors: readonly GgufTensor[],
): Promise<void> {
  const kvs = new Map(metadata);
  kvs.set('general.alignment', { type: 'u32', value: GGUF_ALIGNMENT_BYTES });

  const header = new ByteSink();
  header.push(Buffer.from('GGUF', 'ascii'));
  header.u32(3);
  header.u64(tensors.length);
  header.u64(kvs.size);
  for (const [key, value] of kvs) {
    header.string(key);
    writeValue(header, value);
  }

  // Offsets are relative to the start of the data section.
  let dataOffsetBytes = 0;
  const offsetsBytes: number[] = [];
  for (const tensor of tensors) {
    const elements = tensor.shape.reduce((a, b) => a * b, 1);
    if (elements !== tensor.data.length) {
      throw new Error(
        `tensor ${tensor.name}: shape ${tensor.shape.join('x')} holds ${elements} values, data has ${tensor.data.length}`,
      );
    }
    offsetsBytes.push(dataOffsetBytes);
    header.string(tensor.name);
    header.u32(tensor.shape.length);
    for (const dim of tensor.shape) header.u64(dim);
    header.u32(GGML_TYPE_F32);
    header.u64(dataOffsetBytes);
    dataOffsetBytes = alignUp(dataOffsetBytes + tensor.data.byteLength, GGUF_ALIGNMENT_BYTES);
  }
  header.padTo(GGUF_ALIGNMENT_BYTES);

  const file = await open(outPath, 'w');
  try {
    await file.write(header.toBuffer());
    let writtenBytes = 0;
    for (const [i, tensor] of tensors.entries()) {
      const startBytes = offsetsBytes[i]!;
      if (startBytes > writtenBytes) await file.write(Buffer.alloc(startBytes - writtenBytes));
      // Float32Array is host-endian; GGUF is little-endian, as is every machine llmgw runs on.
      await file.write(Buffer.from(tensor.data.buffer, tensor.data.byteOffset, tensor.data.byteLength));
      writtenBytes = startBytes + tensor.data.byteLength;
    }
    if (dataOffsetBytes > writtenBytes) await file.write(Buffer.alloc(dataOffsetBytes - writtenBytes));
  } finally {
    await file.close();
  }
}
