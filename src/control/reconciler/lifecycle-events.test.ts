import { describe, expect, it } from 'vitest';
import { placedEvents, placementFailedMessage, readyEvents } from './lifecycle-events.js';
import type { ModelRejections } from './plan-types.js';
import type { ReplicaRecord, ReplicaState } from './types.js';

function replica(id: string, state: ReplicaState, over: Partial<ReplicaRecord> = {}): ReplicaRecord {
  return {
    id,
    model: 'm',
    profile: 'gpu',
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
    shards: [{ id: `${id}-s0`, nodeId: 'n1', rank: 0, gpuIndices: [0], state: 'pending', error: null, endpoint: null }],
    ...over,
  };
}

describe('placedEvents', () => {
  const rejected = new Map([['m', { rejections: [{ reason: 'no node fits' }] }]]);

  it.each([
    {
      name: 'a first placement',
      retried: false,
      before: undefined,
      want: /^replica r1 of m placed on node n1 \(profile gpu\)$/,
    },
    {
      name: 'a placement after failing',
      retried: true,
      before: undefined,
      want: /^replica r1 of m placed again, after failing, on node n1/,
    },
    {
      name: 'a placement that ends a placement failure',
      retried: false,
      before: rejected,
      want: /placed on node n1 \(profile gpu\); the model could not be placed before \(no node fits\)$/,
    },
  ])('says what happened for $name', ({ retried, before, want }) => {
    const [event, ...rest] = placedEvents([replica('r1', 'pending')], new Set(retried ? ['r1'] : []), before);
    expect(rest).toEqual([]);
    expect(event).toMatchObject({
      kind: 'replica_placed',
      model: 'm',
      replica: 'r1',
      node: 'n1',
      message: expect.stringMatching(want),
    });
  });

  it('names every node of a multi-node replica once', () => {
    const r = replica('r2', 'pending', {
      shards: [0, 1, 2].map((rank) => ({
        id: `s${rank}`,
        nodeId: rank === 2 ? 'a' : 'b',
        rank,
        gpuIndices: [0],
        state: 'pending' as const,
        error: null,
        endpoint: null,
      })),
    });
    expect(placedEvents([r], new Set(), undefined)[0]!.message).toContain('on nodes b, a');
  });
});

describe('readyEvents', () => {
  const now = 100_000;

  it.each([
    {
      name: 'starting → ready',
      was: replica('r', 'starting', { createdAtMs: 40_000 }),
      want: /^replica r of m is ready on n1, 60s after it was placed$/,
    },
    {
      name: 'ready again after failures',
      was: replica('r', 'starting', { failures: 2, error: 'engine exited with code 1', stateSinceMs: 90_000 }),
      want: /is ready on n1, 10s after it was placed again; recovered after 2 failures \(last: engine exited with code 1\)$/,
    },
  ])('tells $name', ({ was, want }) => {
    const events = readyEvents(new Map([[was.id, was]]), [{ ...was, state: 'ready', failures: 0 }], now);
    expect(events).toEqual([
      expect.objectContaining({
        kind: 'replica_ready',
        model: 'm',
        replica: 'r',
        node: 'n1',
        message: expect.stringMatching(want),
      }),
    ]);
  });

  // Guards against "ready … 1208s after it was placed" after a restart: the replica was placed by the run before,
  // and its engine started again with this control plane.
  it('counts a replica placed by an earlier run from when this control plane started', () => {
    const was = replica('r', 'starting', { createdAtMs: 1_000 });
    const [event] = readyEvents(new Map([[was.id, was]]), [{ ...was, state: 'ready' }], now, 82_000);
    expect(event!.message).toBe(
      'replica r of m is ready on n1, 18s after the control plane started (it was placed in an earlier run)',
    );
    expect(readyEvents(new Map([[was.id, was]]), [{ ...was, state: 'ready' }], now, 500)[0]!.message).toMatch(
      /99s after it was placed$/,
    );
  });

  it.each([
    { name: 'a replica that was already ready', was: replica('r', 'ready'), now: 'ready' as const },
    { name: 'a draining replica reported ready', was: replica('r', 'draining'), now: 'ready' as const },
    { name: 'a replica still starting', was: replica('r', 'fetching'), now: 'starting' as const },
  ])('says nothing for $name', ({ was, now: state }) => {
    expect(readyEvents(new Map([[was.id, was]]), [{ ...was, state }], now)).toEqual([]);
  });

  it('says nothing of a record it did not know before', () => {
    expect(readyEvents(new Map(), [replica('new', 'ready')], now)).toEqual([]);
  });
});

describe('placementFailedMessage', () => {
  const rej = (over: Partial<ModelRejections>): ModelRejections =>
    ({ model: 'demo', purpose: 'scale', rejections: [], notes: [], nodeCount: 0, ...over }) as ModelRejections;

  // Guards against "a replica cannot be placed: 0 rejection(s)" on every first start, before the agent joined.
  it('says no node is there yet rather than counting zero rejections', () => {
    expect(placementFailedMessage(rej({}))).toBe('demo: a replica cannot be placed yet: no node has joined yet');
    expect(placementFailedMessage(rej({ nodeCount: 2, purpose: 'drain' }))).toBe(
      'demo: a replacement for a draining node cannot be placed yet: none of the 2 node(s) can take it yet',
    );
  });

  it('counts the rejections and names the first when there are some', () => {
    const rejections = [{ reason: 'node n1 has no free GPU' }, { reason: 'node n2 is draining' }];
    expect(placementFailedMessage(rej({ nodeCount: 2, rejections } as unknown as Partial<ModelRejections>))).toBe(
      'demo: a replica cannot be placed: 2 rejection(s); first: node n1 has no free GPU (see explain-placement)',
    );
  });
});
