// The llama.cpp source against a small server answering /slots and
// /tokenize as llama-server does (slot JSON with `prompt` and `generated`;
// /tokenize {content} → {tokens}), on loopback.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { KvEventBatch } from '../../../protocol/kv-events.js';
import { waitFor } from '../../../../test/support/wait.js';
import { openKvSource, type KvSource, type KvSourceStatus } from './index.js';
import { slotBlocks, slotDiff } from './slots.js';

/** One token per character: the char code. */
const ids = (text: string) => [...text].map((c) => c.charCodeAt(0));

class FakeLlamaServer {
  slots: { id: number; prompt?: string; generated?: string }[] = [];
  failing = false;
  polls = 0;
  auth: (string | undefined)[] = [];
  readonly server: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      this.auth.push(req.headers.authorization);
      if (this.failing) return res.writeHead(503).end();
      if (req.url === '/slots') {
        this.polls++;
        return res.end(JSON.stringify(this.slots.map((s) => ({ n_ctx: 4096, is_processing: false, ...s }))));
      }
      if (req.url === '/tokenize')
        return res.end(JSON.stringify({ tokens: ids((JSON.parse(body) as { content: string }).content) }));
      res.writeHead(404).end();
    });
  });

  async listen(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }
}

const servers: FakeLlamaServer[] = [];
const sources: KvSource[] = [];
afterEach(async () => {
  await Promise.all(sources.splice(0).map((s) => s.close()));
  for (const s of servers.splice(0)) s.server.close();
});

async function setup() {
  const fake = new FakeLlamaServer();
  servers.push(fake);
  const url = await fake.listen();
  const batches: KvEventBatch[] = [];
  const statuses: KvSourceStatus[] = [];
  sources.push(
    openKvSource(
      { id: 'l1', endpoint: url, engineSecret: 's3', kvEvents: { kind: 'slots', blockSize: 2 } },
      { onBatch: (b) => batches.push(b), onStatus: (s) => statuses.push(s), pollMs: 20, retryMs: 20 },
    ),
  );
  return { fake, batches, statuses };
}

describe('the llama.cpp /slots source', () => {
  it('cuts a slot into whole blocks with ids unique per slot, and diffs two states by their common leading blocks', () => {
    const a = slotBlocks(0, [1, 2, 3, 4, 5], 2);
    expect(a.map((b) => b.tokens)).toEqual([
      [1, 2],
      [3, 4],
    ]);
    expect(slotBlocks(1, [1, 2], 2)[0]!.hash, 'the same tokens in another slot are another block').not.toBe(a[0]!.hash);
    const b = slotBlocks(0, [1, 2, 9, 9, 7, 7], 2);
    expect(slotDiff(a, b)).toEqual([
      { kind: 'removed', hashes: [a[1]!.hash] },
      { kind: 'stored', parent: a[0]!.hash, blocks: b.slice(1) },
    ]);
    expect(slotDiff(a, a)).toEqual([]);
  });

  it("turns each slot's cached prompt into stored and removed events, with the engine's key", async () => {
    const { fake, batches } = await setup();
    fake.slots = [{ id: 0, prompt: 'abcd', generated: 'ef' }, { id: 1 }];
    await waitFor('the first batch', () => batches.length >= 1, 10_000);
    expect(batches[0]!.events[0]).toEqual({ kind: 'cleared' });
    expect(batches[0]!.events[1]).toMatchObject({
      kind: 'stored',
      blocks: [{ tokens: ids('ab') }, { tokens: ids('cd') }, { tokens: ids('ef') }],
    });
    expect(fake.auth).toContain('Bearer s3');
    // The slot's next task keeps the first block and replaces the rest.
    fake.slots = [{ id: 0, prompt: 'abXY' }, { id: 1 }];
    await waitFor('the change', () => batches.length >= 2, 10_000);
    const kinds = batches[1]!.events.map((e) => e.kind);
    expect(kinds).toEqual(['removed', 'stored']);
    expect(batches[1]!.events[0]).toMatchObject({ hashes: { length: 2 } });
    expect(batches[1]!.seq).toBe(batches[0]!.seq + 1);
    const polls = fake.polls;
    await waitFor('more polls', () => fake.polls > polls + 2, 10_000);
    expect(batches, 'an unchanged state sends nothing').toHaveLength(2);
  });

  it('after a failed poll, starts again with cleared and everything it sees', async () => {
    const { fake, batches, statuses } = await setup();
    fake.slots = [{ id: 0, prompt: 'abcd' }];
    await waitFor('the first batch', () => batches.length >= 1, 10_000);
    fake.failing = true;
    await waitFor('a failed poll', () => statuses.some((s) => s.kind === 'down'), 10_000);
    fake.failing = false;
    await waitFor('the batch after it', () => batches.length >= 2, 10_000);
    expect(batches[1]!.events[0]).toEqual({ kind: 'cleared' });
    expect(batches[1]!.events[1]).toMatchObject({ kind: 'stored', blocks: { length: 2 } });
  });
});
