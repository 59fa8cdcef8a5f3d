// Rendering on its own, without a control plane: unknown values read as a
// word and never as 0, fetch progress with and without a known size, events
// when a source exists and when none does, and text from agents escaped.
import { render } from 'preact-render-to-string';
import { describe, expect, it } from 'vitest';
import type { NodeView, ReplicaView } from '../../api/types.js';
import { LineChart } from './components.js';
import { localPath } from './routes.js';
import { EventsPanel } from './pages/events.js';
import { NodesPage } from './pages/nodes.js';
import { ReplicaTable } from './pages/replicas.js';
import { LastCollectPanel, ModelWhyPanel, NodeWhyPanel } from './pages/why.js';

const ctx = { csrfToken: 'tok', here: '/nodes' };

const replica = (over: Partial<ReplicaView>): ReplicaView => ({
  id: 'r1',
  model: 'chat',
  profile: 'sim',
  state: 'fetching',
  age_seconds: 30,
  idle_seconds: -1,
  shards: [
    {
      id: 's1',
      node: 'n1',
      rank: 0,
      gpus: [0],
      state: 'fetching',
      fetch: { bytes_done: 512 * 2 ** 20, total_bytes: 2 ** 30, percent: 50 },
    },
  ],
  ...over,
});

describe('dashboard rendering', () => {
  it('shows idle -1 as unknown and fetch progress as a share of the size', () => {
    const html = render(<ReplicaTable replicas={[replica({})]} />);
    expect(html).toMatch(/data-field="idle"><span class="unknown"[^>]*>-</);
    expect(html).toContain('50% of 1.0 GiB');
  });

  it("shows a replica's prefix cache hit rate in per cent, and unknown where the engine reports none", () => {
    const load = { running: 1, waiting: 0, kv_usage: 0.5, age_ms: 100 };
    const html = render(
      <ReplicaTable
        replicas={[
          replica({ id: 'r1', state: 'ready', load: { ...load, cache_hit_rate: 0.874 } }),
          replica({ id: 'r2', state: 'ready', load }),
        ]}
      />,
    );
    const row = (id: string) => html.slice(html.indexOf(`data-replica="${id}"`));
    expect(row('r1')).toMatch(/^[^]*?data-field="cache-hit">87%</);
    expect(row('r2'), 'not reported is not 0%').toMatch(/^[^]*?data-field="cache-hit"><span class="unknown"/);
  });

  it('shows a fetch of unknown size as unknown, not as 0%', () => {
    const r = replica({
      shards: [{ id: 's1', node: 'n1', rank: 0, gpus: [], state: 'fetching', fetch: { bytes_done: 1024 } }],
    });
    const html = render(<ReplicaTable replicas={[r]} />);
    expect(html).toContain('1.0 KiB');
    expect(html).toContain('fetched of <span class="unknown" title="not reported">unknown</span>');
    expect(html).not.toContain('0%');
  });

  it('escapes a replica error and a hostname an agent reported', () => {
    const html = render(
      <ReplicaTable replicas={[replica({ state: 'failed', error: '<img src=x onerror=alert(1)>' })]} />,
    );
    expect(html).not.toContain('<img');
    const node: NodeView = {
      id: 'n1',
      hostname: '"><svg onload=alert(1)>',
      state: 'ready',
      liveness: 'up',
      gpu_total: 0,
      gpu_free: 0,
      last_seen_ago: '',
      replicas: 0,
    };
    const nodes = render(<NodesPage nodes={[node]} ctx={ctx} />);
    expect(nodes).not.toContain('<svg');
    expect(nodes).toContain('none reported');
    expect(nodes).toContain('never');
  });

  it('shows a pending node and a GPU change visibly on the nodes page', () => {
    const node: NodeView = {
      id: 'n1',
      state: 'ready',
      liveness: 'up',
      gpu_total: 2,
      gpu_free: 2,
      last_seen_ago: '1s',
      replicas: 0,
      approval: 'pending',
      hardware_change: 'GPUs changed from 1 gpu: a to 2 gpus: a, a',
    };
    const html = render(<NodesPage nodes={[node]} ctx={ctx} />);
    expect(html).toContain('data-field="approval"');
    expect(html).toContain('pending approval');
    expect(html).toContain('GPUs changed from 1 gpu: a to 2 gpus: a, a');
    const plain = render(
      <NodesPage nodes={[{ ...node, approval: undefined, hardware_change: undefined }]} ctx={ctx} />,
    );
    expect(plain).not.toContain('pending approval');
  });

  it('says no events are recorded when there is no source, and lists them escaped when there is', () => {
    expect(render(<EventsPanel events={null} />)).toContain('No events recorded.');
    const html = render(<EventsPanel events={[{ atMs: 0, kind: 'replica.failed', message: '<b>boom</b>' }]} />);
    expect(html).toContain('1970-01-01T00:00:00.000Z');
    expect(html).toContain('&lt;b>boom&lt;/b>');
  });

  it('draws a chart with gaps where a point is unknown, and says so when there is too little to draw', () => {
    const series = new Map([
      [
        'a',
        [
          { atMs: 0, value: 1 },
          { atMs: 1000, value: 2 },
          { atMs: 2000, value: null },
          { atMs: 3000, value: 1 },
        ],
      ],
    ]);
    const html = render(<LineChart title="rps" series={series} format={String} />);
    expect(html.match(/<polyline/g)).toHaveLength(1);
    expect(html.match(/<circle/g)).toHaveLength(1);
    expect(render(<LineChart title="rps" series={new Map()} format={String} />)).toContain('not enough samples yet');
  });

  it('goes back only to a path on this site', () => {
    expect(localPath('/nodes?x=1')).toBe('/nodes?x=1');
    for (const bad of [
      '//evil.example',
      '/\\evil.example',
      'https://evil.example',
      'nodes',
      '/a\r\nSet-Cookie: x=1',
      undefined,
    ])
      expect(localPath(bad)).toBeUndefined();
    // Browsers drop tabs and newlines and read a backslash as `/`: each of these could leave for another host.
    for (const bad of [
      '/\t/evil.example/x',
      '/\n/evil.example',
      '/\\/evil',
      '/.//evil.example',
      '/x\u0000',
      '/x\u007f',
      '/x\u0085',
      '/a\\b',
    ])
      expect(localPath(bad), JSON.stringify(bad)).toBeUndefined();
    expect(
      localPath('/nodes/a%2Fb?back=%2F%2Fx#top'),
      'escapes stay as sent: they are not separators to a browser',
    ).toBe('/nodes/a%2Fb?back=%2F%2Fx#top');
  });

  it('shows each why answer cause first, with its numbers, escaped, and nothing from an older control plane', () => {
    const model = render(
      <ModelWhyPanel
        explain={{
          model: 'big',
          placed: false,
          min_replicas: 1,
          ready_replicas: 0,
          profiles: [
            { profile: 'gpu', nodes_fit: 0, node_count: 2, line: '0/2 nodes fit profile gpu: 2 have no GPUs' },
          ],
          summary: [
            'model big is not running and not placed: no node can run any of its profiles (2 nodes checked)',
            '0/2 nodes fit profile gpu: 2 have no GPUs',
          ],
          not_running: [
            {
              replica: 'r1',
              profile: 'gpu',
              state: 'failed',
              nodes: ['n1'],
              since_seconds: 4,
              reason: 'failed on n1: <script>x</script>',
              failures: 1,
            },
          ],
        }}
      />,
    );
    expect(model).toContain('<strong>model big is not running and not placed');
    expect(model).toContain('profile gpu: 0/2 nodes fit');
    expect(model).not.toContain('<script>');
    expect(
      render(<ModelWhyPanel explain={{ model: 'old', placed: true }} />),
      'an older control plane sends no summary',
    ).toBe('');
    const node = render(
      <NodeWhyPanel
        why={{
          node: {
            id: 'n1',
            state: 'draining',
            liveness: 'up',
            gpu_total: 0,
            gpu_free: 0,
            last_seen_ago: '1s',
            replicas: 1,
          },
          replicas: [],
          summary: ['node n1 is draining and waits for 1 replica:'],
          drain_waits: [
            {
              replica: 'r1',
              model: 'chat',
              state: 'draining',
              since_seconds: 10,
              in_flight: 2,
              deadline_in_seconds: 290,
              waits_for: '2 requests in flight to finish',
            },
          ],
        }}
      />,
    );
    expect(node).toContain('id="drain-waits"');
    expect(node).toMatch(/<td>2<\/td>/);
    expect(node).toContain('2 requests in flight to finish');
    expect(render(<LastCollectPanel last={undefined} />), 'no store: no panel').toBe('');
    expect(render(<LastCollectPanel last={[]} />)).toContain('No collect has asked any node yet.');
    const last = render(
      <LastCollectPanel
        last={[
          {
            node: 'n2',
            at: '2026-12-04T00:00:00.000Z',
            actor: 'e2e',
            removed: [],
            refused: [],
            unreachable: 'cannot reach the node',
          },
        ]}
      />,
    );
    expect(last).toContain('data-what="unreachable"');
    expect(last).toContain('cannot reach the node');
  });
});
