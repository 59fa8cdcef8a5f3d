// What the shard-report queue writes for the other instances, and what it
// does not write again.
import { describe, expect, it } from 'vitest';
import type { ShardStatus } from '../../protocol/index.js';
import { ShardReportQueue } from './report-queue.js';

const ready: ShardStatus[] = [
  { shard_id: 'sh-1', replica_id: 'rep-1', state: 'ready', endpoint: 'http://10.0.0.1:20000' },
];
const loaded: ShardStatus[] = [{ ...ready[0]!, load: { running: 2, waiting: 0, age_ms: 100 } }];

describe('ShardReportQueue', () => {
  it("writes a node's report once while it says the same, and again when it changes", () => {
    const q = new ShardReportQueue();
    expect(q.offer('n1', [], 1)).toBe(true);
    expect(q.offer('n2', ready, 1)).toBe(true);
    expect(q.take().map((r) => r.nodeId)).toEqual(['n1', 'n2']);
    expect(q.offer('n1', [], 2), 'the same empty list again').toBe(false);
    expect(q.offer('n2', ready, 2), 'the same shard states again').toBe(false);
    expect(q.take()).toEqual([]);
    expect(q.offer('n2', [], 3), 'a shard gone is news').toBe(true);
    expect(q.offer('n2', ready, 4), 'and so is its return, though it equals what was written before').toBe(true);
    expect(q.take()).toEqual([{ nodeId: 'n2', shards: ready, atMs: 4 }]);
  });

  it('always writes a report with load samples: they are dated and go stale', () => {
    const q = new ShardReportQueue();
    expect(q.offer('n1', loaded, 1)).toBe(true);
    expect(q.offer('n1', loaded, 2)).toBe(true);
    expect(q.take()).toEqual([{ nodeId: 'n1', shards: loaded, atMs: 2 }]);
  });

  it('queues a batch the store did not take again, unless something newer came meanwhile', () => {
    const q = new ShardReportQueue();
    q.offer('n1', ready, 1);
    q.offer('n2', ready, 1);
    const failed = q.take();
    q.offer('n2', [], 2);
    q.putBack(failed);
    expect(q.take()).toEqual([
      { nodeId: 'n2', shards: [], atMs: 2 },
      { nodeId: 'n1', shards: ready, atMs: 1 },
    ]);
    expect(q.offer('n1', ready, 3), 'what was put back counts as written').toBe(false);
  });
});
