// The live pace reads the right things for decidePace: ready local replicas
// (not draining, not remote), the router's in-flight per replica, fresh
// engine samples only, the model's capacity or else its target_inflight,
// and the interactive requests waiting; and it keeps the last decision for
// the admin API and the gauges.
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import type { ReplicaUse, RouterReplica } from '../../gateway/ports/index.js';
import { LiveBatchPace, type PacedModel } from './live-pace.js';

const NOW = 50_000;

function setup(over: { model?: Partial<PacedModel>; replicas?: RouterReplica[]; waiting?: number } = {}) {
  const model: PacedModel = { name: 'chat', scaling: { targetInflight: 4 }, ...over.model };
  const replicas: RouterReplica[] = over.replicas ?? [
    { id: 'a', endpoint: 'http://a', draining: false },
    { id: 'b', endpoint: 'http://b', draining: false },
  ];
  const use = new Map<string, ReplicaUse>([['a', { inFlight: 2, lastUsedAtMs: 1 }]]);
  const registry = new Registry();
  const pace = new LiveBatchPace({
    catalog: { resolve: (n) => (n === 'chat' || n === 'chat-alias' ? model : undefined) },
    replicas: { ready: (n) => (n === 'chat' ? replicas : []) },
    use: () => use,
    interactiveWaiting: () => over.waiting ?? 0,
    batchInFlight: () => 2,
    now: () => NOW,
    // The figures below were written for a quarter kept free.
    options: { headroomFraction: 0.25 },
    registry,
  });
  return { pace, registry };
}

describe('the live batch pace', () => {
  it("uses target_inflight per replica without a capacity, and the router's in-flight count", () => {
    // 2 replicas × 4 = 8 places, 2 busy, headroom ceil(8 × 0.25) = 2: 4 may start.
    const { pace } = setup();
    expect(pace.slots('chat')).toBe(4);
    expect(pace.report('chat')).toEqual({
      reason: 'spare',
      message: '4 spare places: 6 of 8 free, 2 kept for interactive requests',
      inFlight: 2,
    });
  });

  it('takes capacity.per_replica when the model declares one, and answers for an alias', () => {
    const { pace } = setup({ model: { capacity: { perReplica: 8 } } });
    // 16 places, 2 busy, headroom 4.
    expect(pace.slots('chat-alias')).toBe(10);
  });

  it('leaves out draining and remote replicas, and uses only fresh engine samples', () => {
    const { pace } = setup({
      replicas: [
        { id: 'a', endpoint: 'http://a', draining: false, load: { running: 4, waiting: 0, sampledAtMs: NOW - 1_000 } },
        { id: 'b', endpoint: 'http://b', draining: true },
        { id: 'c', endpoint: 'http://c', draining: false, remote: { kind: 'endpoint', provider: 'x' } as never },
        // A sample a minute old says nothing of now: the router's count (0) stands.
        { id: 'd', endpoint: 'http://d', draining: false, load: { running: 4, waiting: 3, sampledAtMs: NOW - 60_000 } },
      ],
    });
    // a: 4 places, 4 running by its engine = 0 free; d: 4 free. 8 places, headroom 2: 2 may start.
    expect(pace.slots('chat')).toBe(2);
  });

  it('pauses while interactive requests wait, and says so in the gauge', async () => {
    const { pace, registry } = setup({ waiting: 3 });
    expect(pace.slots('chat')).toBe(0);
    expect(pace.report('chat')?.reason).toBe('paused');
    const text = await registry.metrics();
    expect(text).toContain('llmgw_batch_paused{model="chat"} 1');
    expect(text).toContain('llmgw_batch_spare_slots{model="chat"} 0');
  });

  it('starts nothing for a model the catalog does not have', () => {
    const { pace } = setup();
    expect(pace.slots('gone')).toBe(0);
    expect(pace.report('gone')?.reason).toBe('no-replica');
  });
});
