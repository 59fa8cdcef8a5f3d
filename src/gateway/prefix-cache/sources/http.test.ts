// The HTTP stream source against a server written here: each connection is
// answered with the lines a test queues, so reconnects and a hole in the
// numbering can be made on purpose.
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { KvEventBatch } from '../../../protocol/kv-events.js';
import { waitFor } from '../../../../test/support/wait.js';
import { parseKvBatchLine } from './http.js';
import { openKvSource, type KvSource, type KvSourceStatus } from './index.js';

const line = (seq: number, events: unknown[]) => `${JSON.stringify({ seq, blockSize: 2, events })}\n`;
const stored = (hash: string) => ({ kind: 'stored', blocks: [{ hash, tokens: [1, 2] }] });

let server: Server | undefined;
let source: KvSource | undefined;
afterEach(async () => {
  await source?.close();
  server?.closeAllConnections();
  server?.close();
});

describe('the HTTP KV event stream source', () => {
  it('reads lines, reconnects when the stream ends, and clears on a hole in the numbering', async () => {
    const open: ServerResponse[] = [];
    server = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/x-ndjson' });
      open.push(res);
    });
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const batches: KvEventBatch[] = [];
    const statuses: KvSourceStatus[] = [];
    source = openKvSource(
      { id: 'b1', endpoint: url, kvEvents: { kind: 'http', path: '/kv-events' } },
      { onBatch: (b) => batches.push(b), onStatus: (s) => statuses.push(s), retryMs: 20 },
    );
    await waitFor('a connection', () => open.length === 1, 10_000);
    // A snapshot in two writes, cut mid-line, then a change and a hole.
    const first = line(4, [{ kind: 'cleared' }, stored('a')]);
    open[0]!.write(first.slice(0, 10));
    open[0]!.write(first.slice(10) + line(5, [stored('b')]) + line(7, [stored('c')]));
    await waitFor('three batches', () => batches.length === 3, 10_000);
    expect(batches.map((b) => [b.seq, b.events.map((e) => e.kind)])).toEqual([
      [4, ['cleared', 'stored']],
      [5, ['stored']],
      [7, ['cleared', 'stored']],
    ]);
    expect(statuses).toContainEqual({ kind: 'gap', from: 6, to: 6, recovered: false });
    open[0]!.end();
    await waitFor('a second connection', () => open.length === 2, 10_000);
    open[1]!.write(line(8, [stored('d')]));
    await waitFor('the batch after the reconnect', () => batches.length === 4, 10_000);
    expect(batches[3]!.events[0], 'a new connection never continues the old one').toEqual({ kind: 'cleared' });
  });

  it('refuses lines that are not KvEventBatch, naming the problem', () => {
    expect(parseKvBatchLine(line(1, [{ kind: 'removed', hashes: ['x'] }]))).toEqual({
      seq: 1,
      blockSize: 2,
      events: [{ kind: 'removed', hashes: ['x'] }],
    });
    expect(() => parseKvBatchLine('{')).toThrow(/not JSON/);
    expect(() => parseKvBatchLine('{"seq":1,"blockSize":0,"events":[]}')).toThrow(/blockSize/);
    expect(() => parseKvBatchLine(line(1, [{ kind: 'moved' }]))).toThrow(/unknown event kind "moved"/);
    expect(() => parseKvBatchLine(line(1, [{ kind: 'stored', blocks: [{ hash: 1, tokens: [] }] }]))).toThrow(
      /block wants/,
    );
  });
});
