// How ctl words the answers to questions 5-8 without a server: the cause
// first, the numbers beside it, and a plan's rejected nodes grouped by
// reason so a large fleet reads in a few lines.
import { describe, expect, it } from 'vitest';
import { Output } from './render.js';
import { renderDisks, renderPlan, renderRequest } from './why-operations.js';

function capture(): { out: Output; text: () => string } {
  let text = '';
  return { out: new Output((s) => (text += s), { tty: false, width: 200 }), text: () => text };
}

describe('ctl why', () => {
  it("groups a plan's rejected nodes by reason, naming five and counting the rest", () => {
    const { out, text } = capture();
    const rejected = [
      ...Array.from({ length: 7 }, (_, i) => ({
        node: `l${i}`,
        reasons: ['needs 4 GPUs of class h100-80gb; none is free (2 are l40s-48gb)'],
      })),
      { node: 'c1', reasons: ['node is cordoned, so it takes no new replicas; uncordon it to allow them'] },
    ];
    renderPlan(out, {
      name: 'big',
      wanted: 1,
      placed: [{ profile: 'h100', shards: [{ node: 'h1', rank: 0, gpus: [0, 1, 2, 3] }] }],
      fit: [{ profile: 'h100', engine: 'vllm', shards: 1, fits: ['h1'], rejected }],
    });
    const t = text();
    expect(t).toContain('1/1 replica(s) would be placed');
    expect(t).toContain('profile h100: h1 (GPUs 0,1,2,3)');
    expect(t).toContain('profile h100 (vllm): 1 node(s) fit: h1');
    expect(t).toContain('l0, l1, l2, l3, l4 and 2 more: needs 4 GPUs of class h100-80gb');
    expect(t).toContain('c1: node is cordoned');
  });

  it('says who served a request, or that none did and why', () => {
    const { out, text } = capture();
    renderRequest(out, {
      id: 'req_1',
      at: '2026-12-04T12:00:00.000Z',
      model: 'm',
      endpoint: 'chat',
      stream: false,
      status: 503,
      outcome: 'no_replica',
      cause: 'model `m` has 0 ready replicas: 1 fetching',
      attempts: [],
      duration_ms: 4,
    });
    expect(text()).toContain('no replica');
    expect(text()).toContain('model `m` has 0 ready replicas: 1 fetching');
    expect(text()).toContain('none: no replica was tried');
  });

  it('shows an unknown size as unknown, never as zero', () => {
    const { out, text } = capture();
    renderDisks(out, {
      node: 'n1',
      disks: [
        {
          mount_point: '/data',
          shared: false,
          paths: [],
          weights: [],
          wanted_bytes: 0,
          orphan_bytes: 0,
          unused_model_dir_bytes: 0,
        },
      ],
      elsewhere: [],
      summary: ['/data: use unknown'],
    });
    expect(text()).toContain('used - of -, free -');
    expect(text()).toContain('other files -');
  });
});
