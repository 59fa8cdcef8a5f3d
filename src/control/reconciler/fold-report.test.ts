import { describe, expect, it } from 'vitest';
import type { ShardStatus } from '../../protocol/index.js';
import { derivedState, foldReport, ShardIndex } from './fold-report.js';
import { nodeUsageOf } from './node-usage.js';
import type { ReplicaRecord, ReplicaState, ShardRecord, ShardState } from './types.js';

const NOW = 5_000;

function shard(id: string, over: Partial<ShardRecord> = {}): ShardRecord {
  return { id, nodeId: 'n1', rank: 0, gpuIndices: [0], state: 'starting', error: null, endpoint: null, ...over };
}

function replica(state: ReplicaState, shards: ShardRecord[], over: Partial<ReplicaRecord> = {}): ReplicaRecord {
  return {
    id: 'r',
    model: 'm',
    profile: 'p',
    pool: null,
    fabric: null,
    state,
    endpoint: null,
    error: null,
    createdAtMs: 0,
    lastUsedAtMs: null,
    failures: 0,
    nextRetryAtMs: null,
    stateSinceMs: 0,
    updatedAtMs: 0,
    replaces: null,
    shards,
    ...over,
  };
}

const status = (shard_id: string, state: ShardStatus['state'], over: Partial<ShardStatus> = {}): ShardStatus => ({
  shard_id,
  replica_id: 'r',
  state,
  ...over,
});

describe('foldReport', () => {
  it("makes a replica ready when every shard is, with rank 0's endpoint, its failures and error reset", () => {
    const r = replica('starting', [shard('s0'), shard('s1', { rank: 1, nodeId: 'n2', state: 'ready' })], {
      failures: 2,
      error: 'old',
    });
    const out = foldReport([r], 'n1', [status('s0', 'ready', { endpoint: 'http://n1:9000' })], NOW);
    expect(out.changed).toHaveLength(1);
    expect(out.records[0]).toMatchObject({
      state: 'ready',
      stateSinceMs: NOW,
      updatedAtMs: NOW,
      endpoint: 'http://n1:9000',
      failures: 0,
      error: null,
    });
    expect(out.wake, 'a state change runs a pass now').toBe(true);
  });

  it('reads a failed engine its agent restarts in place as starting again, not a failed replica', () => {
    const r = replica('ready', [shard('s0', { state: 'ready', endpoint: 'http://n1:9000' })]);
    const out = foldReport(
      [r],
      'n1',
      [status('s0', 'failed', { restarting: true, error: 'crashed', endpoint: 'http://n1:9000' })],
      NOW,
    );
    expect(out.records[0]!.shards[0]).toMatchObject({ state: 'starting', endpoint: null, error: 'crashed' });
    expect(out.records[0]!.state).toBe('starting');
  });

  it("wakes a pass for a failed shard even when the replica's state stays", () => {
    const r = replica('starting', [shard('s0'), shard('s1', { rank: 1 })]);
    const out = foldReport([r], 'n1', [status('s0', 'failed', { error: 'oom' }), status('s1', 'starting')], NOW);
    expect(out.records[0]!.state).toBe('starting');
    expect(out.records[0]!.shards[0]).toMatchObject({ state: 'failed', error: 'oom' });
    expect(out.wake).toBe(true);
  });

  it("keeps a failed shard's error when the agent reports none, and clears it otherwise", () => {
    const failed = replica('starting', [shard('s0', { state: 'failed', error: 'oom' })]);
    expect(foldReport([failed], 'n1', [status('s0', 'failed')], NOW).changed, 'nothing new').toEqual([]);
    expect(foldReport([failed], 'n1', [status('s0', 'starting')], NOW).records[0]!.shards[0]!.error).toBeNull();
  });

  const unreported: { state: ReplicaState; shard: ShardState; stopped: boolean }[] = [
    { state: 'stopping', shard: 'stopping', stopped: true },
    { state: 'failed', shard: 'failed', stopped: true },
    { state: 'ready', shard: 'ready', stopped: false },
    { state: 'draining', shard: 'ready', stopped: false },
  ];
  for (const c of unreported) {
    it(`${c.stopped ? 'stops' : 'keeps'} an unreported shard of a ${c.state} replica`, () => {
      const out = foldReport(
        [replica(c.state, [shard('s0', { state: c.shard, endpoint: 'http://x' })])],
        'n1',
        [],
        NOW,
      );
      expect(out.records[0]!.shards[0]!.state).toBe(c.stopped ? 'stopped' : c.shard);
      expect(out.records[0]!.state, "only counting replicas take their shards' state").toBe(c.state);
      expect(out.wake).toBe(false);
    });
  }

  it('takes a shard reported under another replica id as not reported', () => {
    const r = replica('stopping', [shard('s0', { state: 'stopping' })]);
    expect(
      foldReport([r], 'n1', [{ ...status('s0', 'ready'), replica_id: 'other' }], NOW).records[0]!.shards[0]!.state,
    ).toBe('stopped');
  });

  it('leaves shards on other nodes, and an unknown state, as they were', () => {
    const elsewhere = replica('starting', [shard('s0', { nodeId: 'n2' })]);
    const out = foldReport([elsewhere], 'n1', [status('s0', 'ready')], NOW);
    expect(out.records[0], 'the same object').toBe(elsewhere);
    const here = replica('starting', [shard('s0')]);
    expect(foldReport([here], 'n1', [status('s0', 'hibernating' as ShardStatus['state'])], NOW).changed).toEqual([]);
  });
});

describe('derivedState', () => {
  const cases: [ShardState[], ReplicaState][] = [
    [['ready', 'ready'], 'ready'],
    [['ready', 'pending'], 'pending'],
    [['fetching', 'pending'], 'pending'],
    [['fetching', 'ready'], 'fetching'],
    [['starting', 'ready'], 'starting'],
    [['failed', 'ready'], 'starting'],
    [[], 'starting'],
  ];
  for (const [shards, want] of cases) {
    it(`[${shards.join(', ')}] → ${want}`, () => {
      expect(derivedState(shards.map((state, rank) => shard(`s${rank}`, { rank, state })))).toBe(want);
    });
  }
});

// At 10,000 nodes a heartbeat that walked every replica cost 1.3 ms, 2,000
// times a second (bench/fleet.mjs): the index makes it its own node's work.
// These hold the indexed fold to the full walk's answers.
describe('foldReport over a ShardIndex', () => {
  // Three-node fleet: r0 on n1, r1 on n2 and n1 (two shards), r2 on n3, r3 stopping on n1.
  const records: ReplicaRecord[] = [
    replica('starting', [shard('a0')], { id: 'r0' }),
    replica('starting', [shard('b0', { nodeId: 'n2' }), shard('b1', { nodeId: 'n1', rank: 1 })], { id: 'r1' }),
    replica('ready', [shard('c0', { nodeId: 'n3', state: 'ready' })], { id: 'r2' }),
    replica('stopping', [shard('d0', { state: 'ready' })], { id: 'r3' }),
  ];
  const reports: [string, ShardStatus[]][] = [
    [
      'n1',
      [
        { shard_id: 'a0', replica_id: 'r0', state: 'ready', endpoint: 'http://n1:1' },
        { shard_id: 'b1', replica_id: 'r1', state: 'ready' },
      ],
    ],
    ['n2', [{ shard_id: 'b0', replica_id: 'r1', state: 'failed', error: 'oom' }]],
    ['n3', [{ shard_id: 'c0', replica_id: 'r2', state: 'ready' }]],
    ['n4', []],
  ];

  it("indexes each node's records once, by position", () => {
    const index = new ShardIndex();
    expect(index.on(records, 'n1')).toEqual([0, 1, 3]);
    expect(index.on(records, 'n2')).toEqual([1]);
    expect(index.on(records, 'n9')).toEqual([]);
  });

  it('gives the same records, changes and wake as a walk over every record', () => {
    const index = new ShardIndex();
    for (const [node, statuses] of reports) {
      const full = foldReport(records, node, statuses, NOW);
      const indexed = foldReport(records, node, statuses, NOW, index.on(records, node));
      expect(indexed.records, `node ${node}`).toEqual(full.records);
      expect(indexed.changed, `node ${node}`).toEqual(full.changed);
      expect(indexed.wake, `node ${node}`).toBe(full.wake);
    }
    expect(
      foldReport(records, 'n3', reports[2]![1], NOW, index.on(records, 'n3')).records,
      'nothing changed: the same array',
    ).toBe(records);
  });

  it('keeps an index carried to a folded list, and rebuilds one for any other list', () => {
    const index = new ShardIndex();
    const folded = foldReport(records, 'n1', reports[0]![1], NOW, index.on(records, 'n1'));
    index.carry(records, folded.records);
    expect(index.on(folded.records, 'n1')).toEqual([0, 1, 3]);
    // A new list (a pass added a replica first in id order) is not the carried one: its positions are read afresh.
    const grown = [replica('pending', [shard('z0', { nodeId: 'n2' })], { id: 'r' }), ...folded.records];
    expect(index.on(grown, 'n2')).toEqual([0, 2]);
  });
});

describe('nodeUsageOf', () => {
  it('counts a replica once per node it has live shards on, with the GPUs they hold; failed replicas and stopped shards hold nothing', () => {
    const usage = nodeUsageOf([
      replica(
        'ready',
        [
          shard('a0', { gpuIndices: [0, 1] }),
          shard('a1', { nodeId: 'n1', rank: 1, gpuIndices: [2] }),
          shard('a2', { nodeId: 'n2', rank: 2, gpuIndices: [0] }),
        ],
        { id: 'r0' },
      ),
      replica('failed', [shard('b0', { gpuIndices: [5] })], { id: 'r1' }),
      replica(
        'stopping',
        [shard('c0', { gpuIndices: [6], state: 'stopped' }), shard('c1', { nodeId: 'n3', gpuIndices: [7] })],
        { id: 'r2' },
      ),
    ]);
    expect([...usage.keys()].sort()).toEqual(['n1', 'n2', 'n3']);
    expect(usage.get('n1')).toEqual({ replicas: 1, gpusInUse: new Set([0, 1, 2]) });
    expect(usage.get('n2')).toEqual({ replicas: 1, gpusInUse: new Set([0]) });
    expect(usage.get('n3')).toEqual({ replicas: 1, gpusInUse: new Set([7]) });
  });
});
