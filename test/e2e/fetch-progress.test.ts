// Weights on their way are visible: a replica whose shard is fetching shows
// how far the download is in ReplicaView, and a source the server does not
// have fails the replica with the reason in words.
import { createServer, type Server } from 'node:http';
import { mkdtempSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { killEnginesOf, startControl, startLlmgw, stopAll } from '../support/processes.js';
import { waitFor } from '../support/wait.js';

const JOIN = 'e2e-join-token-0123456789abcdef';
const ADMIN = 'e2e-admin-token-0123456789abcdef';
const headers = { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' };
const SIZE = 4 << 20;
let server: Server;
let release: () => void = () => {};
const stateDirs: string[] = [];

afterAll(async () => {
  release();
  await stopAll();
  killEnginesOf(stateDirs);
  server?.close();
});

interface ReplicaView {
  state: string;
  error?: string;
  shards: { state: string; fetch?: { bytes_done: number; total_bytes?: number; percent?: number } }[];
}

describe('fetch progress and fetch errors in ReplicaView', () => {
  it("shows a fetching replica's progress, and a missing source as the replica's error", async () => {
    // Serves half the file at once, the rest only when the test says so.
    const released = new Promise<void>((resolve) => (release = resolve));
    server = createServer((req, res) => {
      if (req.url !== '/weights.gguf') {
        res.writeHead(404).end('not here');
        return;
      }
      res.writeHead(200, { 'content-length': String(SIZE), 'accept-ranges': 'bytes' });
      res.write(Buffer.alloc(SIZE / 2, 1));
      void released.then(() => res.end(Buffer.alloc(SIZE / 2, 1)));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

    const dir = mkdtempSync(join(tmpdir(), 'llmgw-e2e-fetch-'));
    const control = await startControl([
      '--store',
      `sqlite:${join(dir, 'db')}`,
      '--join-token',
      JOIN,
      '--admin-token',
      ADMIN,
      '--reconcile-interval',
      '300ms',
      '--allow-http-sources',
      '--log-level',
      'warn',
    ]);
    stateDirs.push(join(dir, 'f1'));
    startLlmgw([
      'agent',
      '--control',
      control.urls.agent,
      '--join-token',
      JOIN,
      '--node-id',
      'f1',
      '--state-dir',
      join(dir, 'f1'),
      '--simulate',
      'gpus=0,ram=16g',
      '--heartbeat-interval',
      '300ms',
      '--port-range',
      '24500-24549',
      '--allow-http-sources',
      '--log-level',
      'warn',
    ]);
    await waitFor(
      'the node up',
      async () =>
        ((await (await fetch(`${control.urls.admin}/api/v1/nodes`, { headers })).json()) as unknown[]).length === 1 ||
        undefined,
    );

    const add = (name: string, source: string) =>
      fetch(`${control.urls.admin}/api/v1/models`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ name, source, profiles: [{ engine: 'sim' }] }),
      });
    const added = await add('slow', `${base}/weights.gguf`);
    expect(added.status, await added.clone().text()).toBe(200);
    const fetching = await waitFor('progress in the replica view', async () => {
      const [r] = (await (
        await fetch(`${control.urls.admin}/api/v1/replicas?model=slow`, { headers })
      ).json()) as ReplicaView[];
      const f = r?.shards[0]?.fetch;
      return r?.state === 'fetching' && f && f.bytes_done >= SIZE / 2 ? r : undefined;
    });
    expect(fetching.shards[0]!.fetch).toMatchObject({ total_bytes: SIZE, percent: 50 });
    release();
    await waitFor('the replica ready once the bytes arrive', async () => {
      const [r] = (await (
        await fetch(`${control.urls.admin}/api/v1/replicas?model=slow`, { headers })
      ).json()) as ReplicaView[];
      return r?.state === 'ready' || undefined;
    });

    expect((await add('missing', `${base}/no-such-file.gguf`)).status).toBe(200);
    const failed = await waitFor('the replica failed with the reason', async () => {
      const [r] = (await (
        await fetch(`${control.urls.admin}/api/v1/replicas?model=missing`, { headers })
      ).json()) as ReplicaView[];
      return r?.state === 'failed' && r.error ? r : undefined;
    });
    expect(failed.error).toMatch(/404/);
  });
});
