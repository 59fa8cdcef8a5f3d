// Frames built by hand to the engines' published schemas (vLLM's
// vllm/distributed/kv_events.py, array-like up to late 2025 and a map since;
// SGLang's sglang/srt/disaggregation/kv_events.py, array-like), encoded with
// msgpack as msgspec would: no engine runs here.
import { encode } from '@msgpack/msgpack';
import { describe, expect, it } from 'vitest';
import { isLlmgwError } from '../../../errors/index.js';
import { decodeVllmKvPayload, readSeqFrame, seqFrame } from './vllm-decode.js';

const BIG = 0x7fff_ffff_ffff_fff0n;
const pack = (v: unknown) => encode(v, { useBigInt64: true });

describe("vLLM's and SGLang's KV event payloads", () => {
  it('reads an array-like vLLM batch: stored with its parent, removed, cleared, and 64-bit hashes exactly', () => {
    const payload = pack([
      1_700_000_000.25,
      [
        ['BlockStored', [BIG, 2n], 7, [1, 2, 3, 4, 5, 6], 3, null, 'GPU'],
        ['BlockRemoved', [BIG], 'GPU'],
        ['AllBlocksCleared'],
      ],
      0,
    ]);
    const batch = decodeVllmKvPayload(payload, 5, 16);
    expect(batch).toEqual({
      seq: 5,
      atMs: 1_700_000_000_250,
      blockSize: 3,
      events: [
        {
          kind: 'stored',
          parent: '7',
          blocks: [
            { hash: BIG.toString(), tokens: [1, 2, 3] },
            { hash: '2', tokens: [4, 5, 6] },
          ],
        },
        { kind: 'removed', hashes: [BIG.toString()] },
        { kind: 'cleared' },
      ],
    });
  });

  it("reads SGLang's shorter events (no medium, a batch with no rank) and a null parent", () => {
    const payload = pack([
      12.5,
      [
        ['BlockStored', [11], null, [9, 9], 2, null],
        ['BlockRemoved', [11]],
      ],
    ]);
    expect(decodeVllmKvPayload(payload, 0, 16).events).toEqual([
      { kind: 'stored', blocks: [{ hash: '11', tokens: [9, 9] }] },
      { kind: 'removed', hashes: ['11'] },
    ]);
  });

  it("reads newer vLLM's map form, with the tag under type, bytes hashes as hex and defaults left out", () => {
    const hash = Uint8Array.from([0xde, 0xad, 0xbe, 0xef]);
    const payload = pack({
      ts: 3,
      events: [
        {
          type: 'BlockStored',
          block_hashes: [hash],
          parent_block_hash: null,
          token_ids: [1, 2, 3, 4],
          block_size: 4,
          lora_id: null,
          medium: 'GPU',
          lora_name: null,
        },
        { type: 'BlockRemoved', block_hashes: [hash], medium: null },
        { type: 'AllBlocksCleared' },
      ],
      data_parallel_rank: 0,
    });
    expect(decodeVllmKvPayload(payload, 1, 16).events).toEqual([
      { kind: 'stored', blocks: [{ hash: 'deadbeef', tokens: [1, 2, 3, 4] }] },
      { kind: 'removed', hashes: ['deadbeef'] },
      { kind: 'cleared' },
    ]);
  });

  it('lets the last block of a prompt be short, and uses the fallback block size when none is given', () => {
    const payload = pack([0, [['BlockStored', [1, 2], null, [1, 2, 3, 4, 5], 4, null, null]]]);
    const batch = decodeVllmKvPayload(payload, 0, 16);
    expect(batch.events[0]).toMatchObject({ blocks: [{ tokens: [1, 2, 3, 4] }, { tokens: [5] }] });
    expect(decodeVllmKvPayload(pack([0, [['AllBlocksCleared']]]), 0, 32).blockSize).toBe(32);
  });

  it("skips the CPU tier's blocks, LoRA blocks and event kinds it does not know", () => {
    const payload = pack([
      0,
      [
        ['BlockStored', [1], null, [1, 2], 2, null, 'CPU'],
        ['BlockRemoved', [1], 'CPU'],
        ['BlockStored', [2], null, [1, 2], 2, 3, 'GPU'],
        ['BlockStored', [3], null, [1, 2], 2, null, 'GPU', 'my-adapter'],
        ['SomethingNew', 1, 2],
      ],
    ]);
    expect(decodeVllmKvPayload(payload, 0, 16).events).toEqual([]);
  });

  it('refuses what is not the schema with LLMGW_UPSTREAM naming the problem', () => {
    const cases: [Uint8Array, RegExp][] = [
      [Uint8Array.from([0xc1]), /not msgpack/],
      [pack('hello'), /neither a list nor a map/],
      [pack([0, 'x']), /no list of events/],
      [pack([0, [['BlockStored', [1, 2], null, [1, 2], 2, null]]]), /2 block hashes for 2 tokens at block size 2/],
      [pack([0, [['BlockStored', [1.5], null, [1, 2], 2, null]]]), /block hash/],
      [pack([0, [[7]]]), /no tag/],
    ];
    for (const [payload, message] of cases) {
      let thrown: unknown;
      try {
        decodeVllmKvPayload(payload, 0, 16);
      } catch (err) {
        thrown = err;
      }
      expect(isLlmgwError(thrown) && thrown.code, String(message)).toBe('LLMGW_UPSTREAM');
      expect((thrown as Error).message).toMatch(message);
    }
  });

  it('reads the 8-byte big-endian sequence frame, the replay end marker -1 included', () => {
    expect(readSeqFrame(Buffer.from([0, 0, 0, 0, 0, 0, 1, 2]))).toBe(258);
    expect(readSeqFrame(Buffer.alloc(8, 0xff))).toBe(-1);
    expect(readSeqFrame(seqFrame(123_456_789))).toBe(123_456_789);
    expect(() => readSeqFrame(Buffer.alloc(4))).toThrow(/4 bytes, want 8/);
  });
});
