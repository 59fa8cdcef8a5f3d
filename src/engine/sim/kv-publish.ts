// Where the sim's KV cache events go: numbered batches kept in a short
// replay buffer, sent to every HTTP reader (JSON lines of KvEventBatch, each
// stream opening with a snapshot) and, when asked, over ZeroMQ exactly as
// vLLM's and SGLang's publishers send them (PUB [topic, 8-byte big-endian
// seq, msgpack payload], a ROUTER answering replay requests), so the
// gateway's decoders are exercised end to end by a fleet of sims. Separate
// from the cache (pure) and the server (requests) because it is the I/O.
//
// The msgpack payload is array-like, as msgspec encodes vLLM's structs up to
// late 2025 and SGLang's still: [ts, events, dp_rank] with events
// ["BlockStored", hashes, parent, token_ids, block_size, lora_id, medium],
// ["BlockRemoved", hashes, medium], ["AllBlocksCleared"]; SGLang's carry no
// medium and its batch no rank. Hashes are 63-bit integers.
import { encode } from '@msgpack/msgpack';
import type { ServerResponse } from 'node:http';
import type { Router } from 'zeromq';
import type { KvEvent, KvEventBatch } from '../../protocol/kv-events.js';
import type { SimEngineOptions, SimFlavor } from './options.js';

/** Batches kept for replay (vLLM keeps 10,000 steps; a sim needs far fewer). */
const REPLAY_BATCHES = 1024;

/** A batch in vLLM's (or SGLang's) msgpack wire form. */
export function encodeVllmKvBatch(batch: KvEventBatch, flavor: SimFlavor): Uint8Array {
  const sglang = flavor === 'sglang';
  const events = batch.events.map((e: KvEvent): unknown[] => {
    switch (e.kind) {
      case 'stored': {
        const fields: unknown[] = [
          'BlockStored',
          e.blocks.map((b) => BigInt(b.hash)),
          e.parent === undefined ? null : BigInt(e.parent),
          e.blocks.flatMap((b) => b.tokens),
          batch.blockSize,
          null,
        ];
        return sglang ? fields : [...fields, 'GPU'];
      }
      case 'removed':
        return sglang
          ? ['BlockRemoved', e.hashes.map((h) => BigInt(h))]
          : ['BlockRemoved', e.hashes.map((h) => BigInt(h)), 'GPU'];
      case 'cleared':
        return ['AllBlocksCleared'];
    }
  });
  const ts = (batch.atMs ?? Date.now()) / 1000;
  return encode(sglang ? [ts, events] : [ts, events, 0], { useBigInt64: true });
}

function seqBytes(seq: number): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigInt64BE(BigInt(seq));
  return b;
}

/** The ZeroMQ side, once bound. */
export interface ZmqKvPublisher {
  /** The PUB address bound, with the port the OS picked for a wildcard one. */
  readonly endpoint: string;
  readonly replayEndpoint: string | undefined;
  send(batch: KvEventBatch): void;
  close(): void;
}

/** Where to bind ZeroMQ: vLLM's kv-events-config fields. */
export interface ZmqKvBind {
  readonly endpoint: string;
  readonly replayEndpoint?: string;
  readonly topic: string;
}

export async function bindZmqKvPublisher(
  bind: ZmqKvBind,
  flavor: SimFlavor,
  history: () => readonly { seq: number; payload: Uint8Array }[],
): Promise<ZmqKvPublisher> {
  // Loaded only here: a sim that publishes nothing over ZeroMQ never loads the native addon.
  const zmq = await import('zeromq');
  const { Publisher } = zmq;
  const pub = new Publisher({ linger: 0 });
  await pub.bind(bind.endpoint);
  let router: Router | undefined;
  if (bind.replayEndpoint !== undefined) {
    router = new zmq.Router({ linger: 0 });
    await router.bind(bind.replayEndpoint);
    void serveReplay(router, history);
  }
  const topic = Buffer.from(bind.topic, 'utf8');
  // ZeroMQ sends one message at a time per socket; later batches wait their turn, in order.
  let sending: Promise<void> = Promise.resolve();
  return {
    endpoint: pub.lastEndpoint ?? bind.endpoint,
    replayEndpoint: router?.lastEndpoint ?? undefined,
    send(batch) {
      const payload = encodeVllmKvBatch(batch, flavor);
      sending = sending.then(() => pub.send([topic, seqBytes(batch.seq), payload])).catch(() => {});
    },
    close() {
      pub.close();
      router?.close();
    },
  };
}

/** vLLM's replay protocol: [identity, empty, start seq] in; [identity, empty, seq, payload]… then seq -1 out. */
async function serveReplay(
  router: Router,
  history: () => readonly { seq: number; payload: Uint8Array }[],
): Promise<void> {
  try {
    for await (const frames of router) {
      if (frames.length !== 3) continue;
      const [identity, , start] = frames;
      const from = start!.byteLength === 8 ? Number(start!.readBigInt64BE(0)) : 0;
      for (const h of history())
        if (h.seq >= from) await router.send([identity!, Buffer.alloc(0), seqBytes(h.seq), h.payload]);
      await router.send([identity!, Buffer.alloc(0), seqBytes(-1), Buffer.alloc(0)]);
    }
  } catch {
    // Closed while answering: nothing to do.
  }
}

/** Numbers batches and hands them to every reader. */
export class KvEventHub {
  private seq = 0;
  private readonly streams = new Set<ServerResponse>();
  private readonly replay: { seq: number; payload: Uint8Array }[] = [];
  private zmq: ZmqKvPublisher | undefined;

  constructor(
    private readonly blockSize: number,
    private readonly flavor: SimFlavor,
  ) {}

  attachZmq(zmq: ZmqKvPublisher): void {
    this.zmq = zmq;
  }

  /** What the replay socket serves. */
  history(): readonly { seq: number; payload: Uint8Array }[] {
    return this.replay;
  }

  publish(events: readonly KvEvent[]): void {
    if (events.length === 0) return;
    const batch: KvEventBatch = { seq: this.seq++, atMs: Date.now(), blockSize: this.blockSize, events };
    if (this.zmq !== undefined) {
      this.replay.push({ seq: batch.seq, payload: encodeVllmKvBatch(batch, this.flavor) });
      if (this.replay.length > REPLAY_BATCHES) this.replay.shift();
      this.zmq.send(batch);
    }
    if (this.streams.size > 0) {
      const line = `${JSON.stringify(batch)}\n`;
      for (const res of this.streams) res.write(line);
    }
  }

  /** A new HTTP reader: the snapshot (numbered as the last batch sent, since it is the state after it), then every batch. */
  openStream(res: ServerResponse, snapshot: readonly KvEvent[], closing: boolean): void {
    res.writeHead(200, {
      'content-type': 'application/x-ndjson',
      'cache-control': 'no-cache',
      ...(closing ? { connection: 'close' } : {}),
    });
    const batch: KvEventBatch = { seq: this.seq - 1, atMs: Date.now(), blockSize: this.blockSize, events: snapshot };
    res.write(`${JSON.stringify(batch)}\n`);
    this.streams.add(res);
    res.once('close', () => this.streams.delete(res));
  }

  close(): void {
    for (const res of this.streams) res.end();
    this.streams.clear();
    this.zmq?.close();
  }
}

/**
 * The sim options that publish KV events as vLLM's and SGLang's
 * `--kv-events-config` JSON asks (publisher zmq, endpoint, replay_endpoint,
 * topic; vLLM also turns them on with enable_kv_cache_events alone), for the
 * stand-ins. {} when it asks none; a string when the JSON is unreadable, as
 * the engines refuse it too. `blockSize` NaN = the engine's flag not given.
 */
export function kvEventsConfigOptions(text: string | undefined, blockSize: number): SimEngineOptions | string {
  if (text === undefined) return {};
  let config: Record<string, unknown>;
  try {
    config = JSON.parse(text) as Record<string, unknown>;
  } catch (err) {
    return `--kv-events-config: not JSON (${(err as Error).message})`;
  }
  const publisher = config.publisher ?? (config.enable_kv_cache_events === true ? 'zmq' : 'null');
  if (publisher !== 'zmq') return {};
  return {
    kvEventsEndpoint: typeof config.endpoint === 'string' ? config.endpoint : 'tcp://*:5557',
    ...(typeof config.replay_endpoint === 'string' ? { kvEventsReplayEndpoint: config.replay_endpoint } : {}),
    ...(typeof config.topic === 'string' ? { kvEventsTopic: config.topic } : {}),
    ...(Number.isInteger(blockSize) && blockSize > 0 ? { kvBlockSize: blockSize } : {}),
  };
}

/** Cache blocks a stand-in publishing events simulates when its sim flags name none. */
export const STAND_IN_KV_CACHE_BLOCKS = 4096;
