// What the agent's shard runner reports in its heartbeat, on its own with a
// stand-in supervisor: an engine told to stop is reported until it is gone.
import { describe, expect, it } from 'vitest';
import type { WeightCache } from './cache/index.js';
import type { Fetcher } from './fetch/index.js';
import { AgentShardRunner } from './shards.js';
import type { Supervisor } from './supervisor/index.js';
import type { ShardStatus } from './supervisor/shard.js';

const engine = (shardId: string, state: ShardStatus['state']): ShardStatus => ({ shardId, replicaId: `rep-${shardId}`, engine: 'vllm', state, restarts: 0, failuresInARow: 0, adopted: false });

describe('shard runner status', () => {
  it('reports an engine that is no longer wanted as stopping until it has exited, so its GPUs are not given to another', async () => {
    let running: ShardStatus[] = [engine('sh-old', 'stopping'), engine('sh-done', 'stopped')];
    const supervisor = { status: () => running, desired: async () => undefined } as unknown as Supervisor;
    const fetcher = { downloads: () => [], fetch: async () => ({ path: '/w' }) } as unknown as Fetcher;
    const cache = { nameFor: () => 'w' } as unknown as WeightCache;
    const runner = new AgentShardRunner({ fetcher, cache, supervisor, engineHost: '127.0.0.1', logger: { info: () => undefined, warn: () => undefined } });
    await runner.desired([]);
    expect(runner.status()).toEqual([{ shard_id: 'sh-old', replica_id: 'rep-sh-old', state: 'stopping', restarts: 0 }]);
    running = [];
    expect(runner.status(), 'gone: no longer reported, which the control plane reads as stopped').toEqual([]);
  });
});
