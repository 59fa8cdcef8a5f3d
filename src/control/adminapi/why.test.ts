// The operator's "why" answers over plain snapshots: each situation built
// from records and nodes, and the answer must name its cause.
import { describe, expect, it } from 'vitest';
import type { PlacementNode } from '../placement/index.js';
import type { ModelRejections, ReplicaRecord } from '../reconciler/index.js';
import { drainWaits, modelWhy, nodeIdle, type WhyModel } from './why.js';

const NOW = 10_000_000;

function model(name: string, over: Partial<WhyModel['profiles'][number]> = {}, min = 1): WhyModel {
  return {
    name,
    source: `hf://org/${name}`,
    scaling: { min, max: 4 },
    profiles: [
      {
        name: 'p',
        engine: 'sim',
        gpus: 0,
        shards: 1,
        gpuClasses: [],
        gpuMemoryGiB: null,
        memoryGiB: null,
        diskGiB: null,
        pool: null,
        ...over,
      },
    ],
  };
}

function replica(
  id: string,
  m: string,
  state: ReplicaRecord['state'],
  node: string,
  over: Partial<ReplicaRecord> = {},
): ReplicaRecord {
  return {
    id,
    model: m,
    profile: 'p',
    pool: null,
    fabric: null,
    state,
    endpoint: null,
    error: null,
    createdAtMs: NOW - 60_000,
    lastUsedAtMs: null,
    failures: 0,
    nextRetryAtMs: null,
    stateSinceMs: NOW - 30_000,
    updatedAtMs: NOW,
    replaces: null,
    shards: [
      {
        id: `${id}-0`,
        nodeId: node,
        rank: 0,
        gpuIndices: [],
        state: state === 'failed' ? 'failed' : 'ready',
        error: null,
        endpoint: null,
      },
    ],
    ...over,
  };
}

/** The last pass's rejections of `model` over two nodes, as placement records them. */
function rejectionsOf(
  model: string,
  purpose: ModelRejections['purpose'],
  rejections: ModelRejections['rejections'],
): ModelRejections {
  return { model, purpose, rejections, notes: [], nodeCount: 2, modelKey: '', atMs: NOW, contended: false };
}

function node(id: string, over: Partial<PlacementNode> = {}): PlacementNode {
  return {
    id,
    labels: {},
    adminState: 'ready',
    liveness: 'up',
    gpus: [],
    gpusInUse: [],
    weightsHeld: [],
    fabrics: [],
    engines: ['sim', 'vllm'],
    ...over,
  };
}

describe('why is this model not running', () => {
  it('names the profile no node fits, with the node counts', () => {
    const rejections = rejectionsOf('big', 'scale', [
      { profile: 'p', node: 'n1', code: 'no_gpus', dimension: 'gpus', reason: 'needs 2 GPUs; the node has none' },
      { profile: 'p', node: 'n2', code: 'cordoned', dimension: 'node', reason: 'node n2 is cordoned' },
    ]);
    const why = modelWhy({ model: model('big', { gpus: 2 }), replicas: [], rejections, nowMs: NOW });
    expect(why.ready_replicas).toBe(0);
    expect(why.summary[0], 'the first sentence says it does not run and why').toMatch(
      /big is not running and not placed: no node can run/,
    );
    expect(why.profiles).toEqual([expect.objectContaining({ profile: 'p', nodes_fit: 0, node_count: 2 })]);
    expect(why.summary.join('\n')).toMatch(
      /0\/2 nodes fit profile p: .*1 has no GPUs.*1 is cordoned|0\/2 nodes fit profile p: .*1 is cordoned.*1 has no GPUs/,
    );
  });

  it('names a failing engine with its last error, failure count and the time to the next try', () => {
    const failed = replica('r1', 'chat', 'failed', 'n1', {
      error: 'engine exited with code 2: unknown flag --bogus',
      failures: 3,
      nextRetryAtMs: NOW + 20_000,
    });
    const why = modelWhy({ model: model('chat'), replicas: [failed], rejections: undefined, nowMs: NOW });
    expect(why.not_running).toEqual([
      expect.objectContaining({ replica: 'r1', state: 'failed', failures: 3, retry_in_seconds: 20, nodes: ['n1'] }),
    ]);
    expect(why.summary.join('\n')).toContain(
      'failed 3 times in a row on n1: engine exited with code 2: unknown flag --bogus; tried again in 20 s',
    );
  });

  it("calls a starting replica whose engine already exited crash-looping, with the engine's error", () => {
    const starting = replica('r1', 'crash', 'starting', 'n3');
    const why = modelWhy({
      model: model('crash'),
      replicas: [
        {
          ...starting,
          shards: [
            {
              ...starting.shards[0]!,
              state: 'starting',
              error: 'engine exited with code 2: --bogus-flag: unknown flag',
            },
          ],
        },
      ],
      rejections: undefined,
      nowMs: NOW,
    });
    expect(why.not_running?.[0]?.reason).toBe(
      'is crash-looping on n3: its engine exits before it is ready and the agent starts it again; last error: engine exited with code 2: --bogus-flag: unknown flag',
    );
  });

  it('says how far a fetch has got', () => {
    const fetching = replica('r1', 'chat', 'fetching', 'n1');
    const why = modelWhy({
      model: model('chat'),
      replicas: [{ ...fetching, shards: [{ ...fetching.shards[0]!, state: 'fetching' }] }],
      rejections: undefined,
      fetch: () => ({ bytes_done: 2 ** 30, total_bytes: 4 * 2 ** 30 }),
      nowMs: NOW,
    });
    expect(why.summary[0]).toMatch(/not running yet: 1 replica is placed and not ready/);
    expect(why.not_running?.[0]?.reason).toMatch(/fetching its weights on n1: 1(\.0)? GiB of 4(\.0)? GiB \(25%\)/);
  });

  it("says a running model's drain replacement has nowhere to go", () => {
    const rejections = rejectionsOf('chat', 'drain', [
      { profile: 'p', node: 'n2', code: 'cordoned', dimension: 'node', reason: 'node n2 is cordoned' },
    ]);
    const why = modelWhy({
      model: model('chat'),
      replicas: [replica('r1', 'chat', 'ready', 'n1')],
      rejections,
      nowMs: NOW,
    });
    expect(why.summary.slice(0, 3)).toEqual([
      'model chat is running: 1 ready replica (min 1)',
      'but no node can take the replacement for its replica on a draining node:',
      '1/2 nodes fit profile p: 1 is cordoned',
    ]);
  });

  it('says a model at min 0 with no demand wants none, and a running one runs', () => {
    expect(
      modelWhy({ model: model('idle', {}, 0), replicas: [], rejections: undefined, nowMs: NOW }).summary[0],
    ).toMatch(/wants none: min 0/);
    const running = modelWhy({
      model: model('chat'),
      replicas: [replica('r1', 'chat', 'ready', 'n1')],
      rejections: undefined,
      nowMs: NOW,
    });
    expect(running.summary[0]).toBe('model chat is running: 1 ready replica (min 1)');
    expect(running.not_running).toBeUndefined();
  });
});

describe('why is this node idle', () => {
  it('says every model it could run has its replicas elsewhere, and why it cannot run the others', () => {
    const idle = nodeIdle({
      node: node('n2'),
      lastSeenAgo: '1s',
      models: [model('chat'), model('big', { gpus: 2 })],
      replicas: [replica('r1', 'chat', 'ready', 'n1')],
    });
    expect(idle.reasons[0]).toMatch(/already has the replicas it wants on other nodes or wants none: chat on n1/);
    const chat = idle.models.find((m) => m.model === 'chat')!;
    expect(chat).toMatchObject({ fits: true, replicas: 1, nodes: ['n1'], min_replicas: 1 });
    const big = idle.models.find((m) => m.model === 'big')!;
    expect(big.fits).toBe(false);
    expect(big.reason, "placement's own sentence, about this node").toMatch(/cannot run here: .*GPU/);
  });

  it("puts the node's own state first: cordoned, lost, waiting for approval", () => {
    const idle = nodeIdle({
      node: node('n3', { adminState: 'cordoned', liveness: 'lost', pendingApproval: true }),
      lastSeenAgo: '5m0s',
      models: [model('chat')],
      replicas: [],
    });
    expect(idle.reasons.slice(0, 3)).toEqual([
      'node n3 is lost: no heartbeat for 5m0s, so nothing is placed on it',
      'node n3 is cordoned: it takes no new replicas (llmgw ctl nodes uncordon n3)',
      "node n3 waits for an admin's approval and takes no replicas (llmgw ctl nodes approve n3)",
    ]);
  });

  it('says so when the catalog is empty', () => {
    expect(nodeIdle({ node: node('n1'), lastSeenAgo: '1s', models: [], replicas: [] }).reasons).toEqual([
      'the catalog has no model (llmgw ctl models add FILE)',
    ]);
  });
});

describe('what is this drain waiting for', () => {
  const base = {
    nodeId: 'n1',
    drainDeadlineMs: 300_000,
    blockedDrains: [],
    rejections: () => undefined,
    models: [model('chat')],
    nowMs: NOW,
  };

  it('a replacement that is starting elsewhere', () => {
    const old = replica('r1', 'chat', 'ready', 'n1');
    const fresh = replica('r2', 'chat', 'starting', 'n2', { replaces: 'r1' });
    const [w] = drainWaits({ ...base, replicas: [old, fresh] });
    expect(w).toMatchObject({ replica: 'r1', replacement: 'r2', replacement_state: 'starting' });
    expect(w!.waits_for).toMatch(/its replacement r2 on n2 to be ready \(it is starting\)/);
  });

  it('requests in flight, with the time left to the deadline', () => {
    const draining = replica('r1', 'chat', 'draining', 'n1', { stateSinceMs: NOW - 100_000 });
    const [w] = drainWaits({ ...base, replicas: [draining], inFlight: () => 2 });
    expect(w).toMatchObject({ in_flight: 2, deadline_in_seconds: 200 });
    expect(w!.waits_for).toBe('2 requests in flight to finish; the drain deadline stops it in 200 s regardless');
  });

  it('a node to take the replacement, naming why none can', () => {
    const old = replica('r1', 'chat', 'ready', 'n1');
    const rejections = rejectionsOf('chat', 'drain', [
      { profile: 'p', node: 'n1', code: 'excluded', dimension: 'node', reason: 'excluded' },
      { profile: 'p', node: 'n2', code: 'cordoned', dimension: 'node', reason: 'node n2 is cordoned' },
    ]);
    const [w] = drainWaits({
      ...base,
      replicas: [old],
      blockedDrains: [{ replicaId: 'r1', model: 'chat', nodeIds: ['n1'], reason: 'blocked' }],
      rejections: () => rejections,
    });
    expect(w!.waits_for).toMatch(
      /a node to take its replacement, and none can: 0\/2 nodes fit profile p: .*1 is cordoned/,
    );
  });

  it('nothing once the node is empty', () => {
    expect(drainWaits({ ...base, replicas: [replica('r1', 'chat', 'ready', 'n2')] })).toEqual([]);
  });
});
