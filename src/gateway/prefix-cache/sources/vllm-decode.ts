// vLLM's and SGLang's KV event payloads (msgpack, as msgspec encodes their
// structs) turned into the common KvEventBatch. Pure and separate from the
// ZeroMQ source so that the schema, which drifts between releases, is tested
// against frames built by hand without a socket.
//
// The shapes read (vllm/distributed/kv_events.py; sglang/srt/disaggregation/kv_events.py):
// - A batch is KVEventBatch(ts, events, data_parallel_rank?). vLLM up to late
//   2025 and SGLang encode it array-like: [ts, events, dp_rank?]; later vLLM
//   dropped array_like, so it is a map {ts, events, data_parallel_rank}.
// - An event is a tagged struct: array-like ["BlockStored", block_hashes,
//   parent_block_hash, token_ids, block_size, lora_id, medium?, lora_name?, …]
//   / ["BlockRemoved", block_hashes, medium?] / ["AllBlocksCleared"], or as a
//   map with the tag under "type" and the same field names.
// - A block hash is a 64-bit integer (older vLLM, SGLang) or bytes (vLLM's
//   sha256 hashes); ints become decimal strings, bytes lowercase hex.
//
// What is left out on purpose: events for another medium than the GPU (vLLM's
// CPU offload tier keeps the same block under the same hash, so counting both
// would let one removal hide the other), and blocks stored for a LoRA adapter
// (their hashes differ from the base model's for the same tokens, and
// requests for the base model cannot use them). A removal of a hash the
// index never stored is harmless.
import { decode } from '@msgpack/msgpack';
import { LlmgwError } from '../../../errors/index.js';
import type { KvBlock, KvEvent, KvEventBatch } from '../../../protocol/kv-events.js';

/** The medium vLLM names its GPU blocks with; absent or null means the GPU too. */
const GPU_MEDIUM = 'GPU';

function bad(detail: string): LlmgwError {
  return new LlmgwError('LLMGW_UPSTREAM', `the engine's KV event payload is not one llmgw can read: ${detail}`);
}

/** A block hash as the common shape keeps it. */
export function blockHashText(v: unknown): string {
  if (typeof v === 'number' && Number.isInteger(v)) return String(v);
  if (typeof v === 'bigint') return v.toString();
  if (v instanceof Uint8Array) return Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('hex');
  throw bad(`a block hash is ${typeof v === 'object' ? JSON.stringify(v) : typeof v}, want an integer or bytes`);
}

function tokenIds(v: unknown): number[] {
  if (!Array.isArray(v)) throw bad('token_ids is not a list');
  return v.map((t) => {
    if (typeof t === 'number' && Number.isInteger(t)) return t;
    if (typeof t === 'bigint') return Number(t);
    throw bad('a token id is not an integer');
  });
}

function hashList(v: unknown, field: string): string[] {
  if (!Array.isArray(v)) throw bad(`${field} is not a list`);
  return v.map(blockHashText);
}

/** A non-GPU medium (vLLM's CPU tier); null/absent is the GPU. */
function otherMedium(medium: unknown): boolean {
  return typeof medium === 'string' && medium !== GPU_MEDIUM;
}

interface StoredFields {
  hashes: unknown;
  parent: unknown;
  tokens: unknown;
  blockSize: unknown;
  loraId: unknown;
  medium: unknown;
  loraName: unknown;
}

function stored(f: StoredFields, fallbackBlockSize: number): { event: KvEvent; blockSize: number } | null {
  if (otherMedium(f.medium)) return null;
  if ((f.loraId !== null && f.loraId !== undefined) || (f.loraName !== null && f.loraName !== undefined)) return null;
  const hashes = hashList(f.hashes, 'block_hashes');
  const tokens = tokenIds(f.tokens);
  const size =
    typeof f.blockSize === 'number' && Number.isInteger(f.blockSize) && f.blockSize > 0
      ? f.blockSize
      : fallbackBlockSize;
  // Each hash names block_size tokens in order; the last block of a prompt may hold fewer.
  if (hashes.length === 0 || tokens.length > hashes.length * size || tokens.length <= (hashes.length - 1) * size)
    throw bad(`BlockStored has ${hashes.length} block hashes for ${tokens.length} tokens at block size ${size}`);
  const blocks: KvBlock[] = hashes.map((hash, i) => ({ hash, tokens: tokens.slice(i * size, (i + 1) * size) }));
  const parent = f.parent === null || f.parent === undefined ? undefined : blockHashText(f.parent);
  return {
    event: parent === undefined ? { kind: 'stored', blocks } : { kind: 'stored', parent, blocks },
    blockSize: size,
  };
}

function decodeEvent(raw: unknown, fallbackBlockSize: number): { event: KvEvent; blockSize?: number } | null {
  if (Array.isArray(raw)) {
    const [tag, ...f] = raw as unknown[];
    switch (tag) {
      case 'BlockStored':
        return stored(
          { hashes: f[0], parent: f[1], tokens: f[2], blockSize: f[3], loraId: f[4], medium: f[5], loraName: f[6] },
          fallbackBlockSize,
        );
      case 'BlockRemoved':
        return otherMedium(f[1]) ? null : { event: { kind: 'removed', hashes: hashList(f[0], 'block_hashes') } };
      case 'AllBlocksCleared':
        return { event: { kind: 'cleared' } };
      default:
        // A newer engine's event this build does not know: skipped, as msgspec's own readers would refuse it.
        if (typeof tag === 'string') return null;
        throw bad('an event has no tag');
    }
  }
  if (typeof raw === 'object' && raw !== null) {
    const o = raw as Record<string, unknown>;
    switch (o.type) {
      case 'BlockStored':
        return stored(
          {
            hashes: o.block_hashes,
            parent: o.parent_block_hash,
            tokens: o.token_ids,
            blockSize: o.block_size,
            loraId: o.lora_id,
            medium: o.medium,
            loraName: o.lora_name,
          },
          fallbackBlockSize,
        );
      case 'BlockRemoved':
        return otherMedium(o.medium)
          ? null
          : { event: { kind: 'removed', hashes: hashList(o.block_hashes, 'block_hashes') } };
      case 'AllBlocksCleared':
        return { event: { kind: 'cleared' } };
      default:
        if (typeof o.type === 'string') return null;
        throw bad('an event has no "type"');
    }
  }
  throw bad('an event is neither a list nor a map');
}

/**
 * One ZeroMQ message's payload as a batch numbered `seq`. `fallbackBlockSize`
 * is the batch's block size when it stores nothing that says. Throws
 * LLMGW_UPSTREAM naming what is wrong.
 */
export function decodeVllmKvPayload(payload: Uint8Array, seq: number, fallbackBlockSize: number): KvEventBatch {
  let raw: unknown;
  try {
    raw = decode(payload, { useBigInt64: true });
  } catch (err) {
    throw bad(`not msgpack (${(err as Error).message})`);
  }
  let ts: unknown;
  let rawEvents: unknown;
  if (Array.isArray(raw)) [ts, rawEvents] = raw as unknown[];
  else if (typeof raw === 'object' && raw !== null) ({ ts, events: rawEvents } = raw as Record<string, unknown>);
  else throw bad('the batch is neither a list nor a map');
  if (!Array.isArray(rawEvents)) throw bad('the batch has no list of events');
  const events: KvEvent[] = [];
  let blockSize = fallbackBlockSize;
  for (const e of rawEvents) {
    const d = decodeEvent(e, fallbackBlockSize);
    if (d === null) continue;
    events.push(d.event);
    if (d.blockSize !== undefined) blockSize = d.blockSize;
  }
  const atMs = typeof ts === 'number' && Number.isFinite(ts) ? Math.round(ts * 1000) : undefined;
  return atMs === undefined ? { seq, blockSize, events } : { seq, atMs, blockSize, events };
}

/** The 8-byte big-endian sequence frame; -1 is the replay's end marker. */
export function readSeqFrame(frame: Uint8Array): number {
  if (frame.byteLength !== 8) throw bad(`the sequence frame is ${frame.byteLength} bytes, want 8`);
  return Number(Buffer.from(frame.buffer, frame.byteOffset, 8).readBigInt64BE(0));
}

export function seqFrame(seq: number): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigInt64BE(BigInt(seq));
  return b;
}
