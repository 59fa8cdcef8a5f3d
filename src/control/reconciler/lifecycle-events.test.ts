import { describe, expect, it } from 'vitest';
import { placedEvents, readyEvents } from './lifecycle-events.js';
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
