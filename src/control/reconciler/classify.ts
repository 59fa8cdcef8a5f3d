// The first rules of a pass: sort every replica into what becomes of it
// before any counting (Nomad's reconciler does the same with its tainted
// nodes: lost, migrating, untainted). A stopping replica is forgotten or
// waited for, one on a lost node is marked lost, one with a failed shard is
// marked failed with backoff, one that can no longer run where it is is
// stopped; the rest survive to be counted. Then survivors and failed ones are
// grouped by model, and those of models gone from the catalog are let go.
// Pure: the same records, nodes and `now` give the same answer.
import { checkReplicas, type PlacementNode, type ReplicaProblem } from '../placement/index.js';
import { type CompiledPlanOptions, formatMs, type PlanAction, type PlanModel, retryDelayMs } from './plan-types.js';
import { transitionReplica } from './transitions.js';
import { COUNTING_STATES, type ReplicaRecord } from './types.js';

/**
 * What placement finds wrong with each replica that should be running where
 * it is (counting and draining ones), by replica id; no entry = nothing.
 */
export function problemsByReplica(
  replicas: readonly ReplicaRecord[],
  nodes: readonly PlacementNode[],
): Map<string, ReplicaProblem[]> {
  const running = replicas.filter((r) => COUNTING_STATES.has(r.state) || r.state === 'draining');
  const problems = new Map<string, ReplicaProblem[]>();
  for (const p of checkReplicas(
    { nodes },
    running.map((r) => ({
      id: r.id,
      model: r.model,
      ...(r.fabric === null ? {} : { fabric: r.fabric }),
      shards: r.shards,
    })),
  )) {
    const list = problems.get(p.replica!) ?? [];
    list.push(p);
    problems.set(p.replica!, list);
  }
  return problems;
}

export interface Classified {
  /** Forgets, markLost, markFailed and stops, in replica id order. */
  readonly actions: PlanAction[];
  /** Replicas that keep running where they are: the ones the count rules weigh. */
  readonly survivors: ReplicaRecord[];
  /** Failed replicas, those marked failed by this pass included (as they will read once the plan is applied). */
  readonly failed: ReplicaRecord[];
  /** Replicas whose GPUs are still taken this pass: survivors, and those stopping, lost or stopped until their agents let go. */
  readonly holdsGpus: ReplicaRecord[];
}

/**
 * Sorts replicas (visited in the order given; planPass gives id order) by
 * what this pass does to them. A stale node moves nothing: only `lost` and
 * `node_missing` problems mark a replica lost.
 */
export function classifyReplicas(
  replicas: readonly ReplicaRecord[],
  nodes: readonly PlacementNode[],
  now: number,
  opts: Pick<CompiledPlanOptions, 'stopGraceMs' | 'retryBaseMs' | 'retryMaxMs'>,
): Classified {
  const nodesById = new Map(nodes.map((n) => [n.id, n]));
  const problems = problemsByReplica(replicas, nodes);
  const actions: PlanAction[] = [];
  const survivors: ReplicaRecord[] = [];
  const failed: ReplicaRecord[] = [];
  const holdsGpus: ReplicaRecord[] = [];
  for (const r of replicas) {
    if (r.state === 'stopping') {
      const gone = r.shards.every((s) => s.state === 'stopped' || isGone(nodesById.get(s.nodeId)));
      if (gone) actions.push({ kind: 'forget', replicaId: r.id, reason: 'every shard has stopped' });
      else if (now - r.stateSinceMs >= opts.stopGraceMs) {
        actions.push({
          kind: 'forget',
          replicaId: r.id,
          reason: `its agents did not confirm the stop within ${formatMs(opts.stopGraceMs)}`,
        });
      } else holdsGpus.push(r);
      continue;
    }
    if (r.state === 'failed') {
      failed.push(r);
      continue;
    }
    const own = problems.get(r.id) ?? [];
    const lost = own.filter((p) => p.code === 'lost' || p.code === 'node_missing');
    if (lost.length > 0) {
      const lostNodes = [...new Set(lost.map((p) => p.node!))].sort();
      const error = lostNodes.map((n) => `node ${n} lost`).join('; ');
      actions.push({
        kind: 'markLost',
        replicaId: r.id,
        shards: r.shards.filter((s) => lostNodes.includes(s.nodeId)).map((s) => s.id),
        error,
        reason: `${error}: the replica is replaced elsewhere`,
      });
      holdsGpus.push(r);
      continue;
    }
    const failedShard = r.shards.find((s) => s.state === 'failed');
    // A draining replica is on its way out: a failed shard there is not worth a retry.
    if (failedShard && r.state !== 'draining') {
      const failures = r.failures + 1;
      const delayMs = retryDelayMs(failures, opts);
      const error = `shard ${failedShard.rank} on node ${failedShard.nodeId} failed${failedShard.error ? `: ${failedShard.error}` : ''}`;
      actions.push({
        kind: 'markFailed',
        replicaId: r.id,
        error,
        failures,
        nextRetryAtMs: now + delayMs,
        reason: `${error}; failure ${failures} in a row, placed again in ${formatMs(delayMs)}`,
      });
      failed.push(transitionReplica(r, 'failed', 'fail', now, { error, failures, nextRetryAtMs: now + delayMs }));
      continue;
    }
    const broken = own.filter((p) => p.code !== 'draining');
    if (broken.length > 0) {
      actions.push({
        kind: 'stop',
        replicaId: r.id,
        reason: `cannot keep running where it is: ${broken.map((p) => (p.node ? `node ${p.node}: ${p.reason}` : p.reason)).join('; ')}`,
      });
      holdsGpus.push(r);
      continue;
    }
    survivors.push(r);
    holdsGpus.push(r);
  }
  return { actions, survivors, failed, holdsGpus };
}

/** One model's replicas as the count rules read them. */
export interface ModelGroup {
  /** Counting replicas (pending, fetching, starting, ready). */
  readonly live: ReplicaRecord[];
  /** Replicas marked draining: they finish what they serve, then stop. */
  readonly draining: ReplicaRecord[];
  readonly failed: ReplicaRecord[];
}

export interface Grouped {
  /** Stops for survivors of models (or profiles) gone from the catalog, then forgets for failed ones. */
  readonly actions: PlanAction[];
  /** By model name; a catalog model with no replicas has no entry. */
  readonly groups: Map<string, ModelGroup>;
}

/**
 * Groups survivors and failed replicas by model. A survivor whose model or
 * profile the catalog no longer has is stopped (nothing could tell its agent
 * how to run it any more); a failed one of a removed model is forgotten.
 */
export function groupByModel(
  survivors: readonly ReplicaRecord[],
  failed: readonly ReplicaRecord[],
  models: readonly PlanModel[],
): Grouped {
  const modelsByName = new Map(models.map((m) => [m.name, m]));
  const actions: PlanAction[] = [];
  const groups = new Map<string, { live: ReplicaRecord[]; draining: ReplicaRecord[]; failed: ReplicaRecord[] }>();
  const group = (model: string) => {
    let g = groups.get(model);
    if (!g) groups.set(model, (g = { live: [], draining: [], failed: [] }));
    return g;
  };
  for (const r of survivors) {
    const m = modelsByName.get(r.model);
    if (!m) actions.push({ kind: 'stop', replicaId: r.id, reason: `model ${r.model} is no longer in the catalog` });
    else if (!m.profiles.some((p) => p.name === r.profile)) {
      actions.push({ kind: 'stop', replicaId: r.id, reason: `model ${r.model} no longer has profile ${r.profile}` });
    } else if (r.state === 'draining') group(r.model).draining.push(r);
    else group(r.model).live.push(r);
  }
  for (const r of failed) {
    if (!modelsByName.has(r.model))
      actions.push({ kind: 'forget', replicaId: r.id, reason: `model ${r.model} is no longer in the catalog` });
    else group(r.model).failed.push(r);
  }
  return { actions, groups };
}

function isGone(node: PlacementNode | undefined): boolean {
  return node === undefined || node.liveness === 'lost';
}

/** A model's live replicas split by the draining nodes they sit on (Nomad's "migrate" set). */
export interface DrainSplit {
  /** Live replicas with a shard on a draining node, in the order given. */
  readonly outgoing: ReplicaRecord[];
  /** A replaced replica's id → the live replica placed to replace it. */
  readonly replacementOf: Map<string, ReplicaRecord>;
  /** Ids of outgoing replicas whose replacement is already placed. */
  readonly movingOut: Set<string>;
  /** Live replicas as counted against wanted: a replica being moved and its replacement fill one slot between them. */
  readonly effective: number;
}

/** True when a shard of the replica is on one of `drainingNodes` (node ids). */
export function isOnDraining(r: ReplicaRecord, drainingNodes: ReadonlySet<string>): boolean {
  return r.shards.some((s) => drainingNodes.has(s.nodeId));
}

export function filterByDraining(live: readonly ReplicaRecord[], drainingNodes: ReadonlySet<string>): DrainSplit {
  const replacementOf = new Map<string, ReplicaRecord>();
  for (const r of live) if (r.replaces !== null) replacementOf.set(r.replaces, r);
  const outgoing = live.filter((r) => isOnDraining(r, drainingNodes));
  const movingOut = new Set(outgoing.filter((r) => replacementOf.has(r.id)).map((r) => r.id));
  return { outgoing, replacementOf, movingOut, effective: live.length - movingOut.size };
}
