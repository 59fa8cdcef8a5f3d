// ctl's "why" renderings: the cause in words, then the numbers, and
// "not reported" never printed as zero.
import { describe, expect, it } from 'vitest';
import { Output } from './render.js';
import { renderLastCollect, renderModelWhy, renderNodeWhy } from './why.js';

function capture(): { out: Output; text: () => string } {
  let text = '';
  return { out: new Output((s) => (text += s), { tty: false }), text: () => text };
}

describe('ctl why', () => {
  it("prints a model's cause, then each replica that does not serve with its failures and retry", () => {
    const { out, text } = capture();
    renderModelWhy(out, {
      model: 'chat',
      placed: true,
      min_replicas: 1,
      ready_replicas: 0,
      summary: [
        'model chat is not running yet: 1 replica is placed and not ready',
        'replica r-1 failed 2 times in a row on n1: exit 2',
      ],
      not_running: [
        {
          replica: 'r-1',
          profile: 'cpu',
          state: 'failed',
          nodes: ['n1'],
          since_seconds: 75,
          reason: 'failed 2 times in a row on n1: exit 2',
          failures: 2,
          retry_in_seconds: 9,
        },
      ],
    });
    expect(text()).toContain('why  0 ready, min 1');
    expect(text()).toContain('  model chat is not running yet');
    expect(text()).toMatch(/│ r-1 +│ cpu +│ failed │ n1 +│ 1m15s │ 2 +│ 9s +│ failed 2 times/);
  });

  it('prints what a drain waits for, and model by model why an idle node runs nothing', () => {
    const { out, text } = capture();
    renderNodeWhy(out, {
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
          replica: 'r-1',
          model: 'chat',
          state: 'ready',
          since_seconds: 5,
          waits_for: 'a node to take its replacement, and none can: 0/2 nodes fit profile p: 1 is cordoned',
        },
      ],
    });
    expect(text()).toMatch(/│ r-1 +│ chat +│ ready +│ 5s +│ - +│ - +│ - +│ a node to take its replacement/);
    const idle = capture();
    renderNodeWhy(idle.out, {
      node: { id: 'n2', state: 'ready', liveness: 'up', gpu_total: 0, gpu_free: 0, last_seen_ago: '1s', replicas: 0 },
      replicas: [],
      summary: [
        'node n2 runs no replica:',
        'every model that could run here already has the replicas it wants on other nodes or wants none: chat on n1',
      ],
      idle: {
        reasons: [],
        models: [
          {
            model: 'chat',
            fits: true,
            replicas: 1,
            nodes: ['n1'],
            min_replicas: 1,
            reason: 'fits (profile p), but its 1 replica runs on n1',
          },
        ],
      },
    });
    expect(idle.text()).toContain('chat on n1');
    expect(idle.text()).toMatch(/│ chat +│ yes +│ 1 +│ n1 +│ 1 +│ fits \(profile p\)/);
  });

  it('prints what each node removed, refused and why, or why it was not asked', () => {
    const { out, text } = capture();
    renderLastCollect(out, {
      nodes: [],
      total_bytes: 0,
      last_collect: [
        {
          node: 'n1',
          at: '2026-12-04T10:00:00.000Z',
          actor: 'admin-token (ops)',
          removed: ['/c/a'],
          refused: [{ path: '/c/b', check: 'in_use', reason: '/c/b is in use by s-1' }],
        },
        {
          node: 'n2',
          at: '2026-12-04T10:00:00.000Z',
          actor: 'admin-token (ops)',
          removed: [],
          refused: [],
          unreachable: 'cannot reach the node at 127.0.0.1:9: ECONNREFUSED',
        },
      ],
    });
    expect(text()).toMatch(/│ n1 +│ 2026-12-04 10:00:00Z │ admin-token \(ops\) │ removed +│ \/c\/a/);
    expect(text()).toMatch(/refused \(in_use\) │ \/c\/b │ \/c\/b is in use by s-1/);
    expect(text()).toMatch(/│ n2 .*not asked .*cannot reach the node at 127\.0\.0\.1:9/);
    const none = capture();
    renderLastCollect(none.out, { nodes: [], total_bytes: 0 });
    expect(none.text(), 'no store: nothing to say, not "none"').toBe('');
  });
});
