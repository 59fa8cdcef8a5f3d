// The ZeroMQ source: vLLM's and SGLang's KV event publisher, read with a SUB
// socket. Each message is [topic, 8-byte big-endian seq, msgpack payload];
// the seq counts up by one from 0 per engine process. Kept apart from the
// decoder (vllm-decode.ts) because this part is the socket life: ZeroMQ
// reconnects by itself, so what is ours is noticing what was lost.
//
// On gaps: a seq past the next one expected means batches were dropped (the
// publisher's high-water mark, a reconnect). With a replay endpoint the
// missing batches are asked of the engine's ROUTER socket ([empty, start
// seq] → [empty, seq, payload]… then [empty, -1, empty]) while the live
// socket waits unread; whatever replay cannot fill is delivered as a batch
// opening with 'cleared'. A seq below the one expected means the engine
// started again, and so does a disconnect (the engine may come back under
// the same address with a new cache): the next batch opens with 'cleared'.
// After a first contact or a reconnect, the replay is asked from 0, so an
// engine that still buffers its whole history is read whole.
import { Dealer, Subscriber } from 'zeromq';
import type { KvEvent, KvEventBatch, KvEventsEndpoint } from '../../../protocol/kv-events.js';
import type { CompiledKvSourceOptions, KvSource } from './index.js';
import { decodeVllmKvPayload, readSeqFrame, seqFrame } from './vllm-decode.js';

type ZmqEndpoint = Extract<KvEventsEndpoint, { kind: 'zmq' }>;

/** A batch with 'cleared' put first, as the source contract says a lost stretch is shown. */
function clearedFirst(batch: KvEventBatch): KvEventBatch {
  const events: KvEvent[] = [{ kind: 'cleared' }, ...batch.events];
  return { ...batch, events };
}

export function openZmqKvSource(replicaId: string, spec: ZmqEndpoint, o: CompiledKvSourceOptions): KvSource {
  const sub = new Subscriber({ linger: 0, reconnectInterval: o.retryMs, reconnectMaxInterval: o.maxRetryMs });
  let closed = false;
  /** The seq the next live batch should carry; null = nothing read since opening or the last disconnect. */
  let expected: number | null = null;
  const replays = new Set<Dealer>();

  sub.events.on('connect', () => {
    if (!closed) o.onStatus({ kind: 'live' });
  });
  sub.events.on('disconnect', () => {
    if (closed) return;
    expected = null;
    o.onStatus({ kind: 'down', detail: `the engine's publisher at ${spec.endpoint} went away`, retryInMs: o.retryMs });
  });
  sub.connect(spec.endpoint);
  sub.subscribe(spec.topic ?? '');

  const deliver = (batch: KvEventBatch) => {
    if (!closed) o.onBatch(batch);
  };

  /** Batches from..to (inclusive) from the replay socket, in order; those it lacks are simply not there. */
  async function replay(from: number, to: number): Promise<KvEventBatch[]> {
    if (spec.replayEndpoint === undefined) return [];
    const dealer = new Dealer({ linger: 0, receiveTimeout: o.replayTimeoutMs });
    replays.add(dealer);
    const got: KvEventBatch[] = [];
    try {
      dealer.connect(spec.replayEndpoint);
      await dealer.send([Buffer.alloc(0), seqFrame(from)]);
      for (;;) {
        const frames = await dealer.receive();
        // [empty delimiter, seq, payload]; the end marker's seq is -1.
        const seq = readSeqFrame(frames[1]!);
        if (seq < 0) break;
        if (seq >= from && seq <= to) got.push(decodeVllmKvPayload(frames[2]!, seq, o.blockSize));
      }
    } catch (err) {
      // A replay that times out or breaks is a replay that did not happen: what it lacks is cleared.
      if (!closed)
        o.onStatus({
          kind: 'down',
          detail: `replay from ${spec.replayEndpoint} failed (${(err as Error).message})`,
          retryInMs: 0,
        });
    } finally {
      replays.delete(dealer);
      dealer.close();
    }
    // Only a run that starts at `from` and has no hole is usable as such.
    const run: KvEventBatch[] = [];
    for (const b of got) if (b.seq === from + run.length) run.push(b);
    return run;
  }

  /** Delivers `batch` after whatever replay recovers of from..batch.seq-1; `fresh` = the index holds nothing trusted. */
  async function catchUp(from: number, batch: KvEventBatch, fresh: boolean): Promise<void> {
    const missing = batch.seq - from;
    const replayed = missing > 0 ? await replay(from, batch.seq - 1) : [];
    const recovered = replayed.length === missing;
    if (missing > 0) o.onStatus({ kind: 'gap', from, to: batch.seq - 1, recovered });
    const run = [...replayed, batch];
    let first = true;
    for (const b of run) {
      deliver(first && (fresh || !recovered) ? clearedFirst(b) : b);
      first = false;
    }
  }

  async function read(): Promise<void> {
    for await (const frames of sub) {
      if (closed) return;
      let batch: KvEventBatch;
      try {
        const seq = readSeqFrame(frames[1] ?? Buffer.alloc(0));
        batch = decodeVllmKvPayload(frames[2] ?? Buffer.alloc(0), seq, o.blockSize);
      } catch (err) {
        // An unreadable message is a lost one: the next readable one starts clean.
        o.onStatus({ kind: 'down', detail: (err as Error).message, retryInMs: 0 });
        expected = null;
        continue;
      }
      if (expected === null) await catchUp(0, batch, true);
      else if (batch.seq === expected) deliver(batch);
      else if (batch.seq < expected) {
        o.onStatus({ kind: 'restarted' });
        await catchUp(0, batch, true);
      } else await catchUp(expected, batch, false);
      expected = batch.seq + 1;
    }
  }

  const reading = read().catch((err: unknown) => {
    if (!closed) o.onStatus({ kind: 'down', detail: (err as Error).message, retryInMs: o.retryMs });
  });

  return {
    replicaId,
    async close() {
      if (closed) return;
      closed = true;
      for (const d of replays) d.close();
      sub.close();
      await reading;
    },
  };
}
