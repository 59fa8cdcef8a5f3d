// KV cache events: what an engine's prefix cache holds, in one shape for
// every engine llmgw runs. vLLM and SGLang publish their own events over
// ZeroMQ (msgpack), llama.cpp is polled, the builtin and sim engines push
// them over HTTP; each source turns what its engine says into these, and the
// gateway's prefix-cache index reads nothing else. Separate from the agent's
// load samples (how busy an engine is) because this says what it holds.
//
// Blocks are identified two ways. `hash` is the engine's own id for a block
// (vLLM's and SGLang's block hashes, as decimal strings since they are 64-bit
// integers; an opaque string elsewhere): removals name it, so the index keeps
// it only to find what to drop. `tokens` are the token ids the block holds:
// the index chains its own hash over them (parent's chain hash, then the
// block's tokens), so the same prompt prefix gets the same key on every
// engine whatever the engine hashes with.

import { z } from 'zod';

/** The token ids of one cached block, with the engine's id for it. */
export interface KvBlock {
  /** The engine's id for the block; unique within one replica. */
  readonly hash: string;
  /** The token ids the block holds, in order; block_size of them except perhaps the last block of a prompt. */
  readonly tokens: readonly number[];
}

export type KvEvent =
  /** Blocks newly cached, in prompt order; `parent` is the engine id of the block before the first one (absent: they start a prompt). */
  | { readonly kind: 'stored'; readonly parent?: string; readonly blocks: readonly KvBlock[] }
  /** Blocks evicted, by the engine's ids. */
  | { readonly kind: 'removed'; readonly hashes: readonly string[] }
  /** The engine dropped its whole cache (a reset, a restart). */
  | { readonly kind: 'cleared' };

/** One message from an engine: events in the order they happened. */
export interface KvEventBatch {
  /** Counts up by one per batch from one source; a gap means events were lost and the index must resync. */
  readonly seq: number;
  /** Epoch ms the engine stamped the batch with; absent = unknown. */
  readonly atMs?: number;
  /** Tokens per full block for this engine; every source knows it (vLLM's --block-size, llama.cpp's chosen chunk). */
  readonly blockSize: number;
  readonly events: readonly KvEvent[];
}

/**
 * Where a replica's engine tells what it holds, as the agent reports it and
 * the replica directory hands it to the gateway. Absent on a replica = its
 * engine tells nothing, and routing for it stays as it was.
 * - zmq: vLLM's and SGLang's publisher. `endpoint` is the PUB socket to
 *   connect to (tcp://host:port), `replayEndpoint` its ROUTER for missed
 *   batches (absent = no replay: a gap clears), `topic` what to subscribe
 *   to (absent = every topic).
 * - http: a long-lived GET on the engine's base URL + `path` answering JSON
 *   lines of KvEventBatch (builtin and sim), sent with the engine's secret.
 * - slots: llama.cpp's GET /slots on the engine's base URL, polled; each
 *   slot's cached prompt is cut into blocks of `blockSize` tokens.
 */
export type KvEventsEndpoint =
  | { readonly kind: 'zmq'; readonly endpoint: string; readonly replayEndpoint?: string; readonly topic?: string }
  | { readonly kind: 'http'; readonly path: string }
  | { readonly kind: 'slots'; readonly blockSize: number };

/** KvEventsEndpoint on the wire (an agent's shard status); unknown kinds from a newer agent fail only this field. */
export const KvEventsEndpointSchema: z.ZodType<KvEventsEndpoint> = z.discriminatedUnion('kind', [
  z.object({
    kind: z.literal('zmq'),
    endpoint: z.string().regex(/^tcp:\/\/./, 'want tcp://host:port'),
    replayEndpoint: z
      .string()
      .regex(/^tcp:\/\/./, 'want tcp://host:port')
      .optional(),
    topic: z.string().optional(),
  }),
  z.object({ kind: z.literal('http'), path: z.string().startsWith('/') }),
  z.object({ kind: z.literal('slots'), blockSize: z.number().int().min(1).max(4096) }),
]);
