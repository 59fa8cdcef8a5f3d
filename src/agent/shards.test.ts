// What the agent's shard runner reports in its heartbeat, on its own with a
// stand-in supervisor: an engine told to stop is reported until it is gone.
import { waitFor } from '../../test/support/wait.js';
import { describe, expect, it } from 'vitest';
import { ShardAssignmentSchema } from '../protocol/agent-api.js';
import type { ShardLaunch } from './engines/index.js';
import type { WeightCache } from './cache/index.js';
import type { Fetcher } from './fetch/index.js';
import { AgentShardRunner } from './shards.js';
import type { Supervisor } from './supervisor/index.js';
import type { ShardStatus } from './supervisor/shard.js';

const engine = (shardId: string, state: ShardStatus['state']): ShardStatus => ({
  shardId,
  replicaId: `rep-${shardId}`,
  engine: 'vllm',
  state,
  restarts: 0,
  failuresInARow: 0,
  adopted: false,
});

describe('shard runner status', () => {
  it('reports an engine that is no longer wanted as stopping until it has exited, so its GPUs are not given to another', async () => {
    let running: ShardStatus[] = [engine('sh-old', 'stopping'), engine('sh-done', 'stopped')];
    const supervisor = { status: () => running, desired: async () => undefined } as unknown as Supervisor;
    const fetcher = { downloads: () => [], fetch: async () => ({ path: '/w' }) } as unknown as Fetcher;
    const cache = { nameFor: () => 'w' } as unknown as WeightCache;
    const runner = new AgentShardRunner({
      fetcher,
      cache,
      supervisor,
      engineHost: '127.0.0.1',
      logger: { info: () => undefined, warn: () => undefined },
    });
    await runner.desired([]);
    expect(runner.status()).toEqual([{ shard_id: 'sh-old', replica_id: 'rep-sh-old', state: 'stopping', restarts: 0 }]);
    running = [];
    expect(runner.status(), 'gone: no longer reported, which the control plane reads as stopped').toEqual([]);
  });

  it('carries the engine load of ready shards only, as the scraper last read it', async () => {
    const running: ShardStatus[] = [
      { ...engine('sh-ready', 'ready'), endpoint: 'http://127.0.0.1:20000' },
      engine('sh-starting', 'starting'),
    ];
    const supervisor = { status: () => running, desired: async () => undefined } as unknown as Supervisor;
    const fetcher = { downloads: () => [], fetch: async () => ({ path: '/w' }) } as unknown as Fetcher;
    const cache = { nameFor: () => 'w', markUsed: async () => undefined } as unknown as WeightCache;
    const asked: string[] = [];
    const runner = new AgentShardRunner({
      fetcher,
      cache,
      supervisor,
      engineHost: '127.0.0.1',
      logger: { info: () => undefined, warn: () => undefined },
      load: (id) => (asked.push(id), { running: 1, waiting: 2, age_ms: 30 }),
    });
    const assignment = (id: string) =>
      ShardAssignmentSchema.parse({
        shard_id: id,
        replica_id: `rep-${id}`,
        model: 'm',
        source: 'file:///w',
        profile: { name: 'p', engine: 'sim', gpus: 0, shards: 1 },
        rank: 0,
        gpu_indices: [],
      });
    await runner.desired([assignment('sh-ready'), assignment('sh-starting')]);
    await waitFor(
      'the weights to be ready',
      async () => (runner.status().every((s) => s.state !== 'fetching') ? true : undefined),
      5_000,
    );
    const byId = new Map(runner.status().map((s) => [s.shard_id, s]));
    expect(byId.get('sh-ready')?.load).toEqual({ running: 1, waiting: 2, age_ms: 30 });
    expect(byId.get('sh-starting'), 'a starting engine has no load to report').not.toHaveProperty('load');
    expect(asked, 'the scraper is asked only for ready shards (asking marks the sample as heard)').not.toContain(
      'sh-starting',
    );
  });

  it("hands the replica's secret to the engine launch, and none when an older control plane sent none", async () => {
    const launches: ShardLaunch[][] = [];
    const supervisor = {
      status: () => [],
      desired: async (l: ShardLaunch[]) => void launches.push(l),
    } as unknown as Supervisor;
    const fetcher = { downloads: () => [], fetch: async () => ({ path: '/w' }) } as unknown as Fetcher;
    const cache = { nameFor: () => 'w', markUsed: async () => undefined } as unknown as WeightCache;
    const runner = new AgentShardRunner({
      fetcher,
      cache,
      supervisor,
      engineHost: '127.0.0.1',
      logger: { info: () => undefined, warn: () => undefined },
    });
    const assignment = (id: string, secret?: string) =>
      ShardAssignmentSchema.parse({
        shard_id: id,
        replica_id: `rep-${id}`,
        model: 'm',
        source: 'file:///w',
        profile: { name: 'p', engine: 'sim', gpus: 0, shards: 1 },
        rank: 0,
        gpu_indices: [],
        ...(secret ? { engine_secret: secret } : {}),
      });
    await runner.desired([assignment('a', 'replica-secret'), assignment('b')]);
    const last = await waitFor('both shards launched', async () => launches.find((l) => l.length === 2), 5_000);
    expect(last.find((l) => l.shardId === 'a')?.apiKey).toBe('replica-secret');
    expect(
      last.find((l) => l.shardId === 'b'),
      'no secret: no key asked',
    ).not.toHaveProperty('apiKey');
  });

  it('names the file:// weights wanted shards use in place, once per path, with the source as written', async () => {
    const supervisor = { status: () => [], desired: async () => undefined } as unknown as Supervisor;
    const fetcher = {
      downloads: () => [],
      fetch: async (source: string) => ({
        path: source.startsWith('file://') ? new URL(source).pathname.replace(/\/+$/, '') : '/cache/abc',
      }),
    } as unknown as Fetcher;
    const cache = { nameFor: () => 'abc', markUsed: async () => undefined } as unknown as WeightCache;
    const runner = new AgentShardRunner({
      fetcher,
      cache,
      supervisor,
      engineHost: '127.0.0.1',
      logger: { info: () => undefined, warn: () => undefined },
    });
    const assignment = (id: string, source: string) =>
      ShardAssignmentSchema.parse({
        shard_id: id,
        replica_id: `rep-${id}`,
        model: 'm',
        source,
        profile: { name: 'p', engine: 'sim', gpus: 0, shards: 1 },
        rank: 0,
        gpu_indices: [],
      });
    expect(runner.inPlace(), 'nothing wanted yet').toEqual([]);
    await runner.desired([
      assignment('a', 'file:///data/demo.gguf'),
      assignment('b', 'file:///data/demo.gguf'),
      assignment('c', 'hf://org/repo'),
    ]);
    const inPlace = await waitFor(
      'the file:// weights ready',
      async () => (runner.inPlace().length > 0 ? runner.inPlace() : undefined),
      5_000,
    );
    expect(inPlace, "fetched weights are the cache's to report, not in-place ones").toEqual([
      { path: '/data/demo.gguf', source: 'file:///data/demo.gguf' },
    ]);
    await runner.desired([assignment('c', 'hf://org/repo')]);
    expect(runner.inPlace(), 'no longer wanted: no longer named').toEqual([]);
  });
});
