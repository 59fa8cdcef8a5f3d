// Turning a plan into the next set of records, and records into what each
// agent should run. Both are pure (ids come from a function passed in), so
// the reconciler's I/O is only "persist what changed, publish what agents
// run", and the property tests can run many passes without a store.
import { randomBytes } from 'node:crypto';
import type { ShardAssignment } from '../../protocol/index.js';
import type { Placement, PlacementNode } from '../placement/index.js';
import type { Plan, PlanModel, PlanProfile } from './plan.js';
import { transitionReplica } from './transitions.js';
import type { ReplicaRecord, ShardRecord } from './types.js';

/** What an agent needs of a model beyond what placement reads; the catalog's Model has it. */
export interface AssignableModel extends PlanModel {
  readonly aliases: readonly string[];
  readonly profiles: readonly AssignableProfile[];
}

export interface AssignableProfile extends PlanProfile {
  readonly args: readonly string[];
  readonly env: Readonly<Record<string, string>>;
}

export interface ApplyResult {
  /** Every record after the plan, id order. */
  readonly records: ReplicaRecord[];
  /** Records created or changed by the plan (to persist). */
  readonly changed: ReplicaRecord[];
  /** Ids of records the plan forgot (to delete). */
  readonly removed: string[];
}

export interface ApplyContext {
  readonly now: number;
  /** A new unique id; called once per created replica and once per shard. */
  readonly newId: (kind: 'replica' | 'shard') => string;
  /** A new engine secret, called once per created replica; absent = newEngineSecret (32 random bytes behind ENGINE_SECRET_PREFIX). */
  readonly newSecret?: () => string;
}

/**
 * What every engine secret starts with. Never `-`: base64url alone starts
 * with `-` one time in 64, and an engine's option parser (argparse in vLLM and
 * SGLang, util.parseArgs in the builtin engine) reads `--api-key -xyz` as a
 * missing value and refuses to start, so that replica could never run. It
 * also says what a leaked string is, as the key and join-token prefixes do.
 */
export const ENGINE_SECRET_PREFIX = 'llmgw-es-';

/** 32 random bytes, base64url, behind ENGINE_SECRET_PREFIX: an engine's API key that nobody can guess and no shell, header or option parser mangles. */
export function newEngineSecret(): string {
  return ENGINE_SECRET_PREFIX + randomBytes(32).toString('base64url');
}

export function applyPlan(records: readonly ReplicaRecord[], plan: Plan, ctx: ApplyContext): ApplyResult {
  const byId = new Map(records.map((r) => [r.id, r]));
  const changed = new Set<string>();
  const removed: string[] = [];
  const { now } = ctx;
  const update = (id: string, f: (r: ReplicaRecord) => ReplicaRecord): void => {
    const r = byId.get(id);
    if (!r) return;
    byId.set(id, { ...f(r), updatedAtMs: now });
    changed.add(id);
  };
  const shardsOf = (placement: Placement): ShardRecord[] =>
    placement.shards.map((s) => ({
      id: ctx.newId('shard'),
      nodeId: s.nodeId,
      rank: s.rank,
      gpuIndices: [...s.gpuIndices],
      state: 'pending',
      error: null,
      endpoint: null,
    }));

  for (const a of plan.actions) {
    switch (a.kind) {
      case 'create': {
        const id = ctx.newId('replica');
        byId.set(id, {
          id,
          model: a.model,
          profile: a.profile,
          pool: a.placement.pool ?? null,
          fabric: a.placement.fabric ?? null,
          state: 'pending',
          endpoint: null,
          error: null,
          createdAtMs: now,
          lastUsedAtMs: null,
          failures: 0,
          nextRetryAtMs: null,
          stateSinceMs: now,
          updatedAtMs: now,
          replaces: a.replaces,
          engineSecret: (ctx.newSecret ?? newEngineSecret)(),
          shards: shardsOf(a.placement),
        });
        changed.add(id);
        break;
      }
      case 'retry':
        update(a.replicaId, (r) =>
          transitionReplica(r, 'pending', 'retry', now, {
            profile: a.profile,
            pool: a.placement.pool ?? null,
            fabric: a.placement.fabric ?? null,
            endpoint: null,
            nextRetryAtMs: null,
            shards: shardsOf(a.placement),
          }),
        );
        break;
      case 'drain':
        update(a.replicaId, (r) => transitionReplica(r, 'draining', 'drain', now));
        break;
      case 'stop':
        update(a.replicaId, (r) => transitionReplica(r, 'stopping', 'stop', now));
        break;
      case 'markFailed':
        update(a.replicaId, (r) =>
          transitionReplica(r, 'failed', 'fail', now, {
            error: a.error,
            failures: a.failures,
            nextRetryAtMs: a.nextRetryAtMs,
            endpoint: null,
          }),
        );
        break;
      case 'markLost': {
        const lost = new Set(a.shards);
        update(a.replicaId, (r) =>
          transitionReplica(r, 'stopping', 'lost', now, {
            error: a.error,
            endpoint: null,
            // A lost node's shards are gone with it; nobody will report them stopped.
            shards: r.shards.map((s) => (lost.has(s.id) ? { ...s, state: 'stopped', endpoint: null } : s)),
          }),
        );
        break;
      }
      case 'forget':
        if (byId.delete(a.replicaId)) {
          removed.push(a.replicaId);
          changed.delete(a.replicaId);
        }
        break;
    }
  }
  const all = [...byId.values()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  return { records: all, changed: all.filter((r) => changed.has(r.id)), removed };
}

/**
 * What each node should run: one entry per shard of every replica that
 * should be running (pending through ready, and draining, which still
 * serves what it has). Stopping and failed replicas are left out, which is
 * how an agent is told to stop them. Every node in `nodeIds` gets an entry,
 * empty when it runs nothing, so a node whose last shard went is told so.
 */
export function assignmentsByNode(
  records: readonly ReplicaRecord[],
  models: ReadonlyMap<string, AssignableModel>,
  nodes: ReadonlyMap<string, Pick<PlacementNode, 'fabrics'>>,
  nodeIds: readonly string[],
): Map<string, ShardAssignment[]> {
  const out = new Map<string, ShardAssignment[]>(nodeIds.map((id) => [id, []]));
  for (const r of records) {
    if (r.state === 'stopping' || r.state === 'failed') continue;
    const model = models.get(r.model);
    const profile = model?.profiles.find((p) => p.name === r.profile);
    if (!model || !profile) continue;
    const peers =
      r.shards.length > 1
        ? r.shards.map((s) => {
            const address =
              r.fabric === null ? undefined : nodes.get(s.nodeId)?.fabrics.find((f) => f.name === r.fabric)?.address;
            return { rank: s.rank, node_id: s.nodeId, ...(address === undefined ? {} : { address }) };
          })
        : [];
    for (const s of r.shards) {
      let list = out.get(s.nodeId);
      if (!list) out.set(s.nodeId, (list = []));
      list.push({
        shard_id: s.id,
        replica_id: r.id,
        model: model.name,
        aliases: [...model.aliases],
        source: model.source,
        profile: {
          name: profile.name,
          engine: profile.engine,
          gpus: profile.gpus,
          shards: profile.shards,
          args: [...profile.args],
          env: { ...profile.env },
        },
        rank: s.rank,
        gpu_indices: [...s.gpuIndices],
        peers,
        ...(r.engineSecret ? { engine_secret: r.engineSecret } : {}),
      });
    }
  }
  for (const list of out.values())
    list.sort((a, b) => (a.shard_id < b.shard_id ? -1 : a.shard_id > b.shard_id ? 1 : 0));
  return out;
}
