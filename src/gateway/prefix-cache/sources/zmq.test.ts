// The ZeroMQ source against a publisher made here to vLLM's wire protocol
// (PUB [topic, 8-byte seq, msgpack]; ROUTER replay [empty, seq] →
// [empty, seq, payload]… [empty, -1, empty]), over real sockets on loopback.
// An XPUB stands in for vLLM's PUB so the test can wait for the subscription
// instead of sleeping (the subscriber sees no difference).
import { encode } from '@msgpack/msgpack';
import { afterEach, describe, expect, it } from 'vitest';
import { Router, XPublisher } from 'zeromq';
import type { KvEventBatch } from '../../../protocol/kv-events.js';
import { waitFor } from '../../../../test/support/wait.js';
import { openKvSource, type KvSource, type KvSourceStatus } from './index.js';
import { seqFrame } from './vllm-decode.js';

class FakeVllm {
  readonly pub = new XPublisher({ linger: 0 });
  readonly router = new Router({ linger: 0 });
  readonly history = new Map<number, Uint8Array>();
  subscribed = 0;
  endpoint = '';
  replayEndpoint = '';

  async bind(endpoint = 'tcp://127.0.0.1:*'): Promise<void> {
    await this.pub.bind(endpoint);
    await this.router.bind('tcp://127.0.0.1:*');
    this.endpoint = this.pub.lastEndpoint!;
    this.replayEndpoint = this.router.lastEndpoint!;
    void (async () => {
      for await (const [frame] of this.pub) if (frame?.[0] === 1) this.subscribed++;
    })();
    void (async () => {
      for await (const [id, , start] of this.router) {
        const from = Number(start!.readBigInt64BE(0));
        for (const [seq, payload] of [...this.history].sort((a, b) => a[0] - b[0]))
          if (seq >= from) await this.router.send([id!, Buffer.alloc(0), seqFrame(seq), payload]);
        await this.router.send([id!, Buffer.alloc(0), seqFrame(-1), Buffer.alloc(0)]);
      }
    })();
  }

  /** A batch storing one block whose hash is `hash`; `live` false = kept for replay only (lost on the PUB). */
  async send(seq: number, hash: number, live = true): Promise<void> {
    const payload = encode([seq, [['BlockStored', [hash], null, [hash, hash], 2, null, 'GPU']], 0]);
    this.history.set(seq, payload);
    if (live) await this.pub.send(['', seqFrame(seq), payload]);
  }

  close(): void {
    this.pub.close();
    this.router.close();
  }
}

const fakes: FakeVllm[] = [];
const sources: KvSource[] = [];
afterEach(async () => {
  await Promise.all(sources.splice(0).map((s) => s.close()));
  for (const f of fakes.splice(0)) f.close();
});

async function setup(replay: boolean) {
  const fake = new FakeVllm();
  fakes.push(fake);
  await fake.bind();
  const batches: KvEventBatch[] = [];
  const statuses: KvSourceStatus[] = [];
  const source = openKvSource(
    {
      id: 'r1',
      endpoint: 'http://unused',
      kvEvents: replay
        ? { kind: 'zmq', endpoint: fake.endpoint, replayEndpoint: fake.replayEndpoint }
        : { kind: 'zmq', endpoint: fake.endpoint },
    },
    { onBatch: (b) => batches.push(b), onStatus: (s) => statuses.push(s), retryMs: 50, maxRetryMs: 200 },
  );
  sources.push(source);
  await waitFor('the source to subscribe', () => fake.subscribed > 0, 10_000);
  return { fake, batches, statuses };
}

/** Each delivered batch as [seq, opens with 'cleared'?]. */
const shape = (batches: KvEventBatch[]) => batches.map((b) => [b.seq, b.events[0]?.kind === 'cleared']);

describe('the ZeroMQ KV event source', () => {
  it('delivers batches in order, the first one opening with cleared', async () => {
    const { fake, batches } = await setup(false);
    for (let seq = 0; seq < 3; seq++) await fake.send(seq, 100 + seq);
    await waitFor('three batches', () => batches.length === 3, 10_000);
    expect(shape(batches)).toEqual([
      [0, true],
      [1, false],
      [2, false],
    ]);
    expect(batches[1]!.events).toEqual([{ kind: 'stored', blocks: [{ hash: '101', tokens: [101, 101] }] }]);
  });

  it('fills a gap from the replay socket, so nothing is cleared', async () => {
    const { fake, batches, statuses } = await setup(true);
    await fake.send(0, 100);
    await fake.send(1, 101, false);
    await fake.send(2, 102, false);
    await fake.send(3, 103);
    await waitFor('four batches', () => batches.length === 4, 10_000);
    expect(shape(batches)).toEqual([
      [0, true],
      [1, false],
      [2, false],
      [3, false],
    ]);
    expect(statuses).toContainEqual({ kind: 'gap', from: 1, to: 2, recovered: true });
  });

  it('clears on a gap it cannot fill (no replay socket)', async () => {
    const { fake, batches, statuses } = await setup(false);
    await fake.send(0, 100);
    await fake.send(1, 101, false);
    await fake.send(2, 102);
    await waitFor('two batches', () => batches.length === 2, 10_000);
    expect(shape(batches)).toEqual([
      [0, true],
      [2, true],
    ]);
    expect(statuses).toContainEqual({ kind: 'gap', from: 1, to: 1, recovered: false });
  });

  it('clears when the engine numbers from 0 again (a restart)', async () => {
    const { fake, batches, statuses } = await setup(false);
    await fake.send(0, 100);
    await fake.send(1, 101);
    await fake.send(0, 200);
    await waitFor('three batches', () => batches.length === 3, 10_000);
    expect(shape(batches)).toEqual([
      [0, true],
      [1, false],
      [0, true],
    ]);
    expect(statuses).toContainEqual({ kind: 'restarted' });
  });

  it('reconnects to an engine that comes back on the same address, and clears first', async () => {
    const { fake, batches, statuses } = await setup(false);
    await fake.send(0, 100);
    await waitFor('the first batch', () => batches.length === 1, 10_000);
    fake.close();
    await waitFor('the source to see the engine go', () => statuses.some((s) => s.kind === 'down'), 10_000);
    const back = new FakeVllm();
    fakes.push(back);
    await back.bind(fake.endpoint);
    await waitFor('the source to subscribe again', () => back.subscribed > 0, 10_000);
    await back.send(5, 105);
    await waitFor('a batch from the new engine', () => batches.length === 2, 10_000);
    expect(shape(batches)).toEqual([
      [0, true],
      [5, true],
    ]);
  });
});
