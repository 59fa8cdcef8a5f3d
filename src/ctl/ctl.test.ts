// runCtl in process against a canned admin API: what a node that reports
// little looks like (unknown, never zero), and that usage errors come back as
// exit code 2 instead of ending the process.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { PassThrough } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CollectSummary, EventsView, NodeView, ReplicaView } from '../api/index.js';
import { AdminApiUnreachableError } from '../api/index.js';
import { runCtl, unreachableMessage } from './index.js';

const sparse: NodeView = {
  id: 'quiet',
  state: 'ready',
  liveness: 'up',
  gpu_total: 0,
  gpu_free: 0,
  last_seen_ago: '',
  replicas: 0,
  gpu_probe_error: 'nvidia-smi: not found',
};
const full: NodeView = {
  id: 'gpu-3',
  state: 'cordoned',
  liveness: 'stale',
  gpu_total: 4,
  gpu_free: 2,
  memory_gb: 512,
  memory_free_gb: 480,
  disk_free_gb: 100,
  disk_total_gb: 900,
  gpu_classes: ['h100-80gb'],
  unhealthy_gpus: ['gpu 1: Xid 79 (fallen off the bus)'],
  last_seen_ago: '20s',
  agent_version: '0.1.0',
  replicas: 1,
  drain_blocked: ['replica r-1a2b of chat has nowhere to go: no other node has a free h100-80gb'],
};
const replica: ReplicaView = {
  id: 'r-1a2b',
  model: 'chat',
  profile: 'vllm',
  state: 'ready',
  age_seconds: 60,
  idle_seconds: -1,
  endpoint: 'http://10.0.0.3:20000',
  shards: [{ id: 's1', node: 'gpu-3', rank: 0, gpus: [0], state: 'ready' }],
};

const loaded: ReplicaView = {
  ...replica,
  id: 'r-3c4d',
  endpoint: 'http://10.0.0.4:20000',
  shards: [{ id: 's2', node: 'gpu-4', rank: 0, gpus: [0], state: 'ready' }],
  load: { running: 4, waiting: 3, kv_usage: 0.437, cache_hit_rate: 0.912, age_ms: 800 },
};

const GiB = 2 ** 30;
const collected: CollectSummary = {
  nodes: [
    {
      node: 'gpu-3',
      asked: [
        { path: '/c/a', cache_name: 'a', size_bytes: 70 * GiB },
        { path: '/c/b', cache_name: 'b', size_bytes: 71 * GiB },
      ],
      asked_bytes: 141 * GiB,
      removed: [{ path: '/c/a', bytes_freed: 70 * GiB }],
      refused: [{ path: '/c/b', check: 'in-use', reason: 'in use by replica r-1a2b' }],
    },
    {
      node: 'gpu-4',
      asked: [{ path: '/c/z', cache_name: 'z' }],
      asked_bytes: 0,
      removed: [],
      refused: [],
      unreachable: 'cannot reach the node at 10.0.0.4:9000: connect ECONNREFUSED',
    },
  ],
  asked: 3,
  removed: 1,
  refused: 1,
  unreachable: 1,
  bytes_freed: 70 * GiB,
};

const events: EventsView = {
  events: [
    {
      id: 7,
      at: '2026-05-01T12:03:04.123Z',
      kind: 'drain',
      model: 'chat',
      node: 'gpu-3',
      replica: 'r-9',
      message: 'replica r-9 drains: idle',
    },
    {
      id: 6,
      at: '2026-05-01T12:00:00.000Z',
      kind: 'scale',
      model: 'chat',
      from: 1,
      to: 4,
      message: 'chat: 1 → 4 replica(s): busy',
    },
  ],
};

let server: Server;
const asked: string[] = [];
let url: string;

beforeAll(async () => {
  server = createServer((req, res) => {
    const path = req.url!.split('?')[0];
    asked.push(req.url!);
    const body =
      path === '/api/v1/nodes'
        ? [sparse, full]
        : path === '/api/v1/replicas'
          ? [replica, loaded]
          : path === '/api/v1/weights/orphans'
            ? { nodes: [], total_bytes: 0 }
            : path === '/api/v1/weights/collect'
              ? collected
              : path === '/api/v1/events'
                ? events
                : path === '/api/v1/replicas/r-1a2b/log'
                  ? { replica: 'r-1a2b', shard: 'r-1a2b-0', rank: 0, node: 'gpu-3', lines: ['ready'] }
                  : undefined;
    // A page of one when asked for one, with the page headers a paging control plane sends; else the plain list, as an older one answers.
    if (path === '/api/v1/nodes' && new URL(req.url!, 'http://x').searchParams.get('limit') === '1') {
      res
        .writeHead(200, {
          'content-type': 'application/json',
          'x-total-count': '2',
          link: '</api/v1/nodes?state=ready&limit=1&after=quiet>; rel="next"',
        })
        .end(JSON.stringify([sparse]));
      return;
    }
    if (body === undefined) res.writeHead(404).end('{"error":"no route"}');
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

describe('runCtl', () => {
  it('ends --watch with 0 on a Ctrl-C that comes during its first render, not only between renders', async () => {
    let interrupt: (() => void) | null = null;
    const rendering = asked.length;
    const stdout = new PassThrough();
    stdout.resume();
    const code = await runCtl(['nodes', '--watch'], {
      stdout,
      stderr: new PassThrough(),
      stdin: new PassThrough(),
      env: { LLMGW_ADMIN_URL: url },
      cwd: '/',
      onInterrupt: (handler) => {
        interrupt = handler;
        // Ctrl-C before the first answer arrives: the first render is still under way.
        expect(asked.length, 'Ctrl-C is held before the first render asks anything').toBe(rendering);
        handler();
        return () => undefined;
      },
    });
    expect(interrupt).not.toBeNull();
    expect(code).toBe(0);
  });

  it('shows what a node did not report as unknown, never as zero', async () => {
    const r = await ctl('nodes');
    expect(r.code, r.stderr).toBe(0);
    const quiet = r.stdout.split('\n').find((l) => l.includes(' quiet '))!;
    expect(quiet).toContain('unknown');
    expect(quiet).toContain('never');
    expect(quiet).not.toMatch(/\b0\/0\b|0 GiB/);
    const full = r.stdout.split('\n').find((l) => l.includes(' gpu-3 '))!;
    expect(full).toContain('2/4 (1 unhealthy)');
    expect(full).toContain('100/900 GiB');
    expect(full, 'RAM as free of total, as disk').toContain('480/512 GiB');
    expect(full, 'a drain that cannot finish shows on the node').toContain('cordoned (blocked)');
  });

  it('pages the node list: asks for the page, says how many of how many, and how to get the next one with the same filters', async () => {
    const r = await ctl('nodes', '--limit', '1', '--state', 'ready', '--label', 'rack=r1', '-q', 'qu');
    expect(r.code, r.stderr).toBe(0);
    const query = new URL(asked[asked.length - 1]!, 'http://x').searchParams;
    expect(query.getAll('state')).toEqual(['ready']);
    expect(query.getAll('label')).toEqual(['rack=r1']);
    expect(query.get('q')).toBe('qu');
    expect(r.stdout).toContain(' quiet ');
    expect(r.stdout).not.toContain(' gpu-3 ');
    expect(r.stdout).toContain(
      'showing 1 of 2 nodes; next page: llmgw ctl nodes --state ready --label rack=r1 -q qu --after quiet --limit 1; every one: llmgw ctl nodes --state ready --label rack=r1 -q qu --all',
    );
    const json = await ctl('-o', 'json', 'nodes', '--limit', '1');
    expect(JSON.parse(json.stdout), "-o json is the page, the API's own JSON").toEqual([sparse]);
    expect(json.stderr, 'and says on stderr that there is more').toContain('showing 1 of 2 nodes');
  });

  it('asks for a page by default and every node with --all, and refuses a bad --limit as usage', async () => {
    await ctl('nodes');
    expect(new URL(asked[asked.length - 1]!, 'http://x').searchParams.get('limit')).toBe('100');
    await ctl('nodes', '--all');
    expect(new URL(asked[asked.length - 1]!, 'http://x').search, '--all asks for the plain list').toBe('');
    const bad = await ctl('nodes', '--limit', '0');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--limit: "0" is not a whole number from 1 to 1000');
    expect((await ctl('nodes', '--all', '--limit', '5')).code).toBe(2);
  });

  it('says when a control plane older than paging ignored the filters', async () => {
    const r = await ctl('nodes', '--state', 'cordoned');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toContain('does not filter or page the node list');
  });

  it("shows each replica's engine queue and KV use, and unknown where the engine reported none", async () => {
    const r = await ctl('replicas');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/WAIT\/RUN/);
    const withLoad = r.stdout.split('\n').find((l) => l.includes('r-3c4d'))!;
    expect(withLoad, 'waiting/running, then KV use in per cent').toMatch(/│ 3\/4 +│ 44% +│/);
    const without = r.stdout.split('\n').find((l) => l.includes('r-1a2b'))!;
    expect(without, 'not reported is not zero').toMatch(/│ - +│ - +│/);
  });

  it("shows each replica's prefix cache hit rate, and unknown where the engine reported none", async () => {
    const r = await ctl('replicas');
    expect(r.stdout).toMatch(/│ KV +│ CACHE HIT +│/);
    const withLoad = r.stdout.split('\n').find((l) => l.includes('r-3c4d'))!;
    expect(withLoad, 'KV use, then the hit rate in per cent').toMatch(/│ 44% +│ 91% +│/);
    const without = r.stdout.split('\n').find((l) => l.includes('r-1a2b'))!;
    expect(without, 'not reported is not zero').toMatch(/│ - +│ - +│ - +│/);
  });

  it("shows one node's GPUs with their health and who uses them", async () => {
    const r = await ctl('node', 'gpu-3');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/│ 0 +│ h100-80gb │ ok +│ r-1a2b \(chat\)/);
    expect(r.stdout).toMatch(/│ 1 +│ h100-80gb │ unhealthy: Xid 79/);
    expect(r.stdout).toContain('drain blocked: replica r-1a2b of chat has nowhere to go');
    expect((await ctl('node', 'nope')).code).toBe(1);
  });

  it('reports per node what collect asked, removed and refused, and fails when a node could not be asked', async () => {
    const r = await ctl('weights', '--collect');
    expect(r.code, 'a node that could not be asked makes collect fail').toBe(1);
    expect(r.stdout).toContain(
      'node gpu-3: asked to remove 2 (141 GiB), removed 1, refused 1: in use by replica r-1a2b',
    );
    expect(r.stdout).toContain(
      'node gpu-4: asked to remove 1 (size unknown), not reachable: cannot reach the node at 10.0.0.4:9000',
    );
    expect(r.stderr).toContain('1 node(s) could not be asked');
  });

  it('lists events oldest first with scaling changes as from → to, and passes the filters on', async () => {
    const r = await ctl('events', '--model', 'chat', '--limit', '5');
    expect(r.code, r.stderr).toBe(0);
    expect(asked.at(-1)).toBe('/api/v1/events?model=chat&limit=5');
    const lines = r.stdout.split('\n');
    const scale = lines.findIndex((l) => l.includes('1 → 4'));
    const drain = lines.findIndex((l) => l.includes('drains: idle'));
    expect(scale, r.stdout).toBeGreaterThan(0);
    expect(drain, 'the newest is at the bottom').toBeGreaterThan(scale);
    expect(lines[drain]).toContain('2026-05-01 12:03:04Z');
    const json = await ctl('-o', 'json', 'events');
    expect(JSON.parse(json.stdout), "-o json is the API's own answer").toEqual(events);
    expect((await ctl('events', '--limit', 'lots')).code).toBe(2);
  });

  it("asks for a log's lines only when told how many: the control plane keeps the one default", async () => {
    const plain = await ctl('logs', 'r-1a2b');
    expect(plain.code, plain.stderr).toBe(0);
    expect(plain.stdout).toContain('ready');
    expect(asked.at(-1)).toBe('/api/v1/replicas/r-1a2b/log');
    expect((await ctl('logs', 'r-1a2b', '-n', '20')).code).toBe(0);
    expect(asked.at(-1)).toBe('/api/v1/replicas/r-1a2b/log?lines=20');
    expect((await ctl('logs', 'r-1a2b', '-n', '0')).code, 'refused before asking').toBe(2);
    expect(asked.at(-1)).toBe('/api/v1/replicas/r-1a2b/log?lines=20');
  });

  it('returns 2 for usage errors instead of exiting the process', async () => {
    expect((await ctl('nodes', '--nope')).code).toBe(2);
    expect((await ctl('-o', 'yaml', 'nodes')).code).toBe(2);
    expect((await ctl('drain', 'n1', '--wait', '--timeout', 'soon')).code).toBe(2);
    expect((await ctl('--help')).code).toBe(0);
  });
});

describe('fetch progress in a table cell', () => {
  it('draws a bar with the percent when the size is known, and none when it is not', async () => {
    const { fetchCell } = await import('./read.js');
    expect(
      fetchCell({ bytes_done: 43 * 2 ** 20, total_bytes: 100 * 2 ** 20, percent: 43, bytes_per_second: 2 ** 20 }),
    ).toMatch(/^\[####------\] 43% 43 MiB of 100 MiB at 1(\.0)? MiB\/s$/);
    expect(fetchCell({ bytes_done: 5 * 2 ** 20 })).not.toContain('[');
  });
});

describe('when the admin API does not answer', () => {
  // Guards against "is `llmgw control` running?" as the whole answer to someone who ran `llmgw up` elsewhere.
  it('says where ctl looked for a running `llmgw up` before it tried the default address', () => {
    const err = new AdminApiUnreachableError('http://127.0.0.1:8081', 'connection refused', null);
    const base = { adminUrl: 'http://127.0.0.1:8081', token: null, actor: 'a', ca: null };
    const looked = ['/w/.llmgw/control.json: none', '/h/.local/state/llmgw/up.json: none'];
    const text = unreachableMessage(err, { ...base, source: 'default', looked });
    expect(text).toContain('cannot reach the admin API at http://127.0.0.1:8081 (connection refused)');
    expect(text).toContain(`No running \`llmgw up\` was found: ${looked.join('; ')}.`);
    expect(text).toContain('--data-dir');
    expect(
      unreachableMessage(err, { ...base, source: '/w/.llmgw/control.json', looked: [] }),
      'a control.json naming a stopped up',
    ).toContain(
      'which /w/.llmgw/control.json names: is the `llmgw up` or `llmgw control` that wrote it still running?',
    );
    expect(unreachableMessage(err, { ...base, source: 'LLMGW_ADMIN_URL', looked: [] })).toBe(err.message);
  });
});
