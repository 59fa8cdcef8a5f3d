// The replica state machine: every move the reconciler's rules make is in
// REPLICA_TRANSITIONS, and one that is not fails loudly. Guards against a
// rule that writes a state by hand (an inline spread) and moves a replica
// where it cannot go, such as a stopping one back to ready, which would
// keep routing to engines its agents were told to stop.
import { describe, expect, it } from 'vitest';
import type { ShardStatus } from '../../protocol/index.js';
import { isLlmgwError } from '../../errors/index.js';
import type { PlacementNode } from '../placement/index.js';
import { applyPlan } from './apply.js';
import { foldReport } from './fold-report.js';
import { planPass, type PlanModel } from './plan.js';
import { canTransition, REPLICA_TRANSITIONS, transitionReplica } from './transitions.js';
import { REPLICA_STATES, type ReplicaRecord, type ReplicaState } from './types.js';
import {
  placementNode as node,
  planModel as model,
  replicaRecord,
  shardRecord as shard,
} from '../../../test/support/reconciler-records.js';

const NOW = 1_000_000;

function replica(id: string, state: ReplicaState, over: Partial<ReplicaRecord> = {}): ReplicaRecord {
  const shardState = state === 'draining' || state === 'failed' ? 'ready' : state === 'stopping' ? 'stopping' : state;
  return replicaRecord(id, {
    state,
    nextRetryAtMs: state === 'failed' ? 0 : null,
    shards: [shard({ id: `${id}-s0`, state: shardState })],
    ...over,
  });
}

/** Each state move between two lists of records, by id: "r1 ready→draining". */
function moves(before: readonly ReplicaRecord[], after: readonly ReplicaRecord[]): [ReplicaState, ReplicaState][] {
  const was = new Map(before.map((r) => [r.id, r.state]));
  return after.flatMap((r) => {
    const from = was.get(r.id);
    return from !== undefined && from !== r.state ? [[from, r.state] as [ReplicaState, ReplicaState]] : [];
  });
}

/** True when some reason of the table allows from → to. */
const inTable = (from: ReplicaState, to: ReplicaState) => (REPLICA_TRANSITIONS[from][to]?.length ?? 0) > 0;

describe('replica transitions', () => {
  it('are made only as the table allows by every plan rule, from every state a replica can be in', () => {
    // The situations that make the rules act: a lost node, a draining node with the replacement serving, a failed
    // shard, a model gone from the catalog, surplus by scale-down, a failed replica due for its retry, a drain done.
    const scenarios: {
      name: string;
      nodes: PlacementNode[];
      models: PlanModel[];
      extra?: ReplicaRecord[];
      wanted?: number;
    }[] = [
      { name: 'steady', nodes: [node('n1')], models: [model(1)] },
      { name: 'node lost', nodes: [node('n1', { liveness: 'lost' }), node('n2')], models: [model(1)] },
      { name: 'node gone', nodes: [node('n2')], models: [model(1)] },
      {
        name: 'node draining, replacement ready',
        nodes: [node('n1', { adminState: 'draining' }), node('n2')],
        models: [model(1)],
        extra: [replica('r2', 'ready', { replaces: 'r1', shards: [shard({ id: 'r2-s0', nodeId: 'n2' })] })],
      },
      { name: 'model removed', nodes: [node('n1')], models: [] },
      { name: 'surplus', nodes: [node('n1')], models: [model(0, 2)], wanted: 0 },
      {
        name: 'surplus beside a ready one',
        nodes: [node('n1')],
        models: [model(1)],
        extra: [replica('r0', 'ready', { shards: [shard({ id: 'r0-s0', gpuIndices: [1] })] })],
      },
    ];
    const seen = new Set<string>();
    for (const state of REPLICA_STATES) {
      for (const s of scenarios) {
        for (const failedShard of [false, true]) {
          const r = replica('r1', state, failedShard ? { shards: [shard({ id: 'r1-s0', state: 'failed' })] } : {});
          const records = [r, ...(s.extra ?? [])].sort((a, b) => (a.id < b.id ? -1 : 1));
          const where = `${s.name}${failedShard ? ', a failed shard' : ''}, replica ${state}`;
          for (const at of [NOW, NOW + 3_600_000]) {
            const plan = planPass(
              {
                now: at,
                models: s.models,
                nodes: s.nodes,
                replicas: records,
                ...(s.wanted === undefined ? {} : { wanted: new Map([['m', s.wanted]]) }),
              },
              {},
            );
            let ids = 0;
            let after: readonly ReplicaRecord[] = [];
            expect(() => {
              after = applyPlan(records, plan, { now: at, newId: (k) => `${k}${ids++}`, newSecret: () => 'x' }).records;
            }, where).not.toThrow();
            for (const [from, to] of moves(records, after)) {
              expect(inTable(from, to), `${where}: ${from} → ${to}`).toBe(true);
              seen.add(`${from}→${to}`);
            }
          }
        }
      }
    }
    // Folding reports: each counting stage to each other one, as shards report it.
    for (const from of ['pending', 'fetching', 'starting', 'ready'] as const) {
      for (const reported of ['pending', 'fetching', 'starting', 'ready'] as const) {
        const r = replica('r1', from);
        const status: ShardStatus = { shard_id: 'r1-s0', replica_id: 'r1', state: reported };
        const folded = foldReport([r], 'n1', [status], NOW);
        for (const [a, b] of moves([r], folded.records)) {
          expect(inTable(a, b), `report ${reported} on a ${from} replica`).toBe(true);
          seen.add(`${a}→${b}`);
        }
      }
    }
    // The moves the rules are known to make; a rule that stopped making one would leave its table entry unexercised.
    for (const move of [
      'ready→draining',
      'starting→draining',
      'ready→stopping',
      'draining→stopping',
      'ready→failed',
      'starting→failed',
      'failed→pending',
      'pending→ready',
      'ready→starting',
      'starting→ready',
    ]) {
      expect(seen, move).toContain(move);
    }
  });

  it('throws IllegalStateError naming the replica, from and to on a move the table does not allow', () => {
    const stopping = replica('r-7', 'stopping');
    let caught: unknown;
    try {
      transitionReplica(stopping, 'ready', 'report', NOW);
    } catch (err) {
      caught = err;
    }
    expect(isLlmgwError(caught) && caught.code, 'a typed error').toBe('LLMGW_ILLEGAL_STATE');
    expect((caught as Error).message).toMatch(/replica r-7 cannot go from stopping to ready \(report\)/);
    expect(() => transitionReplica(replica('r-8', 'failed'), 'draining', 'drain', NOW)).toThrow(
      /replica r-8 cannot go from failed to draining \(drain\); drain does not apply to a failed replica/,
    );
    expect(() => transitionReplica(replica('r-9', 'ready'), 'pending', 'retry', NOW)).toThrow(
      /replica r-9 cannot go from ready to pending \(retry\)/,
    );
    // Through a plan too: an action for a replica in the wrong state is refused, not written.
    expect(() =>
      applyPlan(
        [replica('r-10', 'failed')],
        { actions: [{ kind: 'drain', replicaId: 'r-10', reason: 'surplus' }] } as unknown as Parameters<
          typeof applyPlan
        >[1],
        { now: NOW, newId: (k) => k },
      ),
    ).toThrow(/replica r-10 cannot go from failed to draining/);
  });

  it('returns a new record with the state, its time and the fields that change with it, the old one untouched', () => {
    const r = replica('r1', 'starting');
    const failed = transitionReplica(r, 'failed', 'fail', NOW, { error: 'oom', failures: 1 });
    expect(failed).toMatchObject({ id: 'r1', state: 'failed', stateSinceMs: NOW, error: 'oom', failures: 1 });
    expect(r.state, 'records are values').toBe('starting');
    expect(canTransition('stopping', 'ready', 'report')).toBe(false);
    expect(Object.keys(REPLICA_TRANSITIONS).sort()).toEqual([...REPLICA_STATES].sort());
  });
});
