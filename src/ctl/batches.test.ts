// `ctl batches` against a canned admin API: the list's progress and finish,
// one batch with its pace, and a cancel that asks first at a terminal and
// goes through with --yes.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { PassThrough } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BatchAdminView } from '../api/index.js';
import { runCtl } from './index.js';

const NOW = Date.now();
const running: BatchAdminView = {
  id: 'batch_1',
  owner: 'team:ml',
  key_id: 'k1',
  endpoint: '/v1/chat/completions',
  models: ['chat'],
  status: 'in_progress',
  total: 2000,
  completed: 480,
  failed: 20,
  running: 6,
  // Hours, with half a minute to spare either way: the rendering reads its own clock, a little after NOW.
  created_at: NOW - 3 * 3_600_000,
  started_at: NOW - 2 * 3_600_000 - 30_000,
  ended_at: null,
  expires_at: NOW + 86_000_000,
  lines_per_second: 5,
  estimated_finish_at: NOW + 3 * 3_600_000 + 30_000,
  pace: [{ model: 'chat', reason: 'paused', message: 'paused: 3 interactive requests waiting', in_flight: 6 }],
};
const ended: BatchAdminView = {
  ...running,
  id: 'batch_0',
  models: [],
  status: 'completed',
  completed: 10,
  failed: 0,
  total: 10,
  running: 0,
  ended_at: NOW - 3_600_000 - 30_000,
  estimated_finish_at: null,
};
delete (ended as Partial<BatchAdminView>).pace;

let server: Server;
let url: string;
const posted: string[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    const path = req.url!.split('?')[0]!;
    let body: unknown;
    if (req.method === 'POST' && path === '/api/v1/batches/batch_1/cancel') {
      posted.push(path);
      body = { ...running, status: 'cancelling' };
    } else if (path === '/api/v1/batches') body = { batches: [running, ended] };
    else if (path === '/api/v1/batches/batch_1') body = running;
    if (body === undefined) res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"no batch"}');
    else res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(() => new Promise<void>((r) => server.close(() => r())));

async function ctl(...argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  let out = '';
  let err = '';
  stdout.setEncoding('utf8').on('data', (s: string) => (out += s));
  stderr.setEncoding('utf8').on('data', (s: string) => (err += s));
  const code = await runCtl(argv, {
    stdout,
    stderr,
    stdin: new PassThrough(),
    env: { LLMGW_ADMIN_URL: url },
    cwd: '/',
  });
  return { code, stdout: out, stderr: err };
}

describe('ctl batches', () => {
  it('lists each batch with done/failed/total, rate and estimated finish; a batch all paused reads paused', async () => {
    const r = await ctl('batches');
    expect(r.code, r.stderr).toBe(0);
    const line = r.stdout.split('\n').find((l) => l.includes('batch_1'))!;
    const cells = line.split('│').map((c) => c.trim());
    expect(cells.slice(1, 6)).toEqual(['batch_1', 'team:ml', 'chat', 'paused', '480/20/2000']);
    expect(cells[6]).toMatch(/^2h0m ago \(/);
    expect(cells[7]).toBe('5/s');
    expect(cells[8]).toMatch(/^~in 3h0m \(/);
    const old = r.stdout.split('\n').find((l) => l.includes('batch_0'))!;
    expect(old).toMatch(/completed\s+│ 10\/0\/10 .*ended 1h0m ago/);
  });

  it('shows one batch with its pace in words', async () => {
    const r = await ctl('batches', 'batch_1');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('500 of 2000 done (25%), 20 failed, 6 running');
    expect(r.stdout).toContain('pace      chat: paused: 3 interactive requests waiting (6 in flight from here)');
  });

  it('cancels with --yes, and says what the control plane answered', async () => {
    const r = await ctl('batches', 'cancel', 'batch_1', '--yes');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.trim()).toBe('batch batch_1 is cancelling');
    expect(posted).toEqual(['/api/v1/batches/batch_1/cancel']);
  });

  it('fails with the API’s words for a batch that does not exist', async () => {
    const r = await ctl('batches', 'batch_nope');
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('no batch');
  });
});
