// One reconciler pass as a pure function: the catalog, a snapshot of the
// fleet, the replica records and `now` in; a plan out. It reads no clock,
// does no I/O and draws no random numbers, so the same input always gives
// the same plan: the property tests run it over thousands of made-up fleets,
// and an operator's "why did it do that" has one answer. Applying the plan
// (ids, the store, the agents) is the reconciler's, in apply.ts and
// reconciler.ts.
//
// planPass only composes the rules, each a pure function with its own tests
// (the way Nomad's reconciler reads: filter, compute stops, placements,
// migrations). In the order a pass applies them:
//  - classifyReplicas (classify.ts): a stopping replica is forgotten once its
//    agents no longer run it (or a grace period passes); one with a shard on
//    a lost node (or a node gone from the inventory) is marked lost and
//    replaced, while a stale node moves nothing; one whose agent reported a
//    shard failed is marked failed, with backoff; one that can no longer run
//    where it is (GPU gone or unhealthy, engine gone, fabric broken, GPU
//    given twice) is stopped and replaced.
//  - holdGpus (hold-gpus.ts): every GPU a replica still holds is taken in
//    the snapshot placement sees.
//  - groupByModel (classify.ts): replicas of models (or profiles) no longer
//    in the catalog are stopped, their failed ones forgotten.
//  - Per model, by name: filterByDraining (classify.ts) counts a replica
//    being moved and its replacement as one; reconcileCounts (counts.ts)
//    compares wanted (the scaler's number through the `wanted` seam, clamped
//    to [min, max]; scaling.min without one) with the replicas that count,
//    asks for missing ones (failed ones retried first, once their backoff is
//    over) and stops or drains extras; moveOffDraining and finishDrains
//    (move-off-draining.ts) move replicas off draining nodes
//    make-before-break, at most maxParallel of a model at a time.
//  - placeWithCap (place-with-cap.ts): creations in one pass are capped, so
//    that a rack going dark does not turn into a stampede of fetches onto
//    the nodes that remain.
import { createHash } from 'node:crypto';
import { GiB } from '../../units/index.js';
import type { PlacementNode } from '../placement/index.js';
import { classifyReplicas, filterByDraining, groupByModel } from './classify.js';
import { reconcileCounts } from './counts.js';
import { holdGpus } from './hold-gpus.js';
import { finishDrains, moveOffDraining } from './move-off-draining.js';
import { type PendingRequest, placeWithCap, requestBuilder } from './place-with-cap.js';
import {
  byId,
  compilePlanOptions,
  modelKeyOf,
  type ModelRejections,
  type Plan,
  type PlanAction,
  type PlanInput,
  type PlanOptions,
  wantedCount,
} from './plan-types.js';

export {
  compilePlanOptions,
  formatMs,
  retryDelayMs,
  toPlacementProfile,
  wantedCount,
  weightsKeyOf,
  type BlockedDrain,
  type CompiledPlanOptions,
  type ModelRejections,
  type Plan,
  type PlanAction,
  type PlanInput,
  type PlanModel,
  type PlanOptions,
  type PlanProfile,
} from './plan-types.js';

export function planPass(input: PlanInput, options: PlanOptions = {}): Plan {
  const opts = compilePlanOptions(options);
  const { now } = input;
  const replicas = [...input.replicas].sort(byId);

  const classified = classifyReplicas(replicas, input.nodes, now, opts);
  const nodes = holdGpus(input.nodes, classified.holdsGpus);
  const grouped = groupByModel(classified.survivors, classified.failed, input.models);
  const actions: PlanAction[] = [...classified.actions, ...grouped.actions];

  // The snapshot key is only needed when something was or is blocked; an idle pass never hashes the fleet.
  let snapshotKey: string | undefined;
  const snapshotKeyNow = (): string => (snapshotKey ??= snapshotKeyOf(nodes));
  const prev = input.previous;
  const sameFleet = (): boolean =>
    prev !== undefined && prev.snapshotKey !== '' && prev.snapshotKey === snapshotKeyNow();

  const drainingNodes = new Set(input.nodes.filter((n) => n.adminState === 'draining').map((n) => n.id));
  const held = new Map<string, ModelRejections>();
  const scaleRequests: PendingRequest[] = [];
  const drainRequests: PendingRequest[] = [];
  const models = [...input.models].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  for (const model of models) {
    const group = grouped.groups.get(model.name) ?? { live: [], draining: [], failed: [] };
    const split = filterByDraining(group.live, drainingNodes);
    const request = requestBuilder(model, group.live);
    let modelKeyMemo: string | undefined;
    const modelKey = (): string => (modelKeyMemo ??= modelKeyOf(model));

    const counted = reconcileCounts({
      model,
      wanted: wantedCount(model, input.wanted?.get(model.name)),
      group,
      split,
      drainingNodes,
      scaled: input.wanted?.has(model.name) === true,
      inFlight: input.inFlight,
      now,
      held: prev?.rejections.get(model.name),
      blockedRetryMs: opts.blockedRetryMs,
      modelKey,
      sameFleet,
      request,
    });
    if (counted.held) held.set(model.name, counted.held);
    scaleRequests.push(...counted.requests);
    const moved = moveOffDraining({
      model,
      group,
      split,
      drainingNodes,
      stopped: counted.stopped,
      maxParallel: opts.maxParallel,
      modelKey,
      request,
    });
    drainRequests.push(...moved.requests);
    actions.push(...counted.actions, ...moved.actions, ...finishDrains(group, input.inFlight, now, opts));
  }

  // Missing replicas before replacements: a model below wanted serves less than one still running on a draining node.
  const cap = opts.maxCreatesPerPass ?? Math.max(10, Math.ceil(input.nodes.length / 10));
  const placed = placeWithCap(nodes, [...scaleRequests, ...drainRequests], cap, now, held);
  actions.push(...placed.actions);
  const { rejections } = placed;
  return {
    actions,
    rejections,
    blockedDrains: placed.blockedDrains,
    throttled: placed.throttled,
    snapshotKey: rejections.size > 0 ? snapshotKeyNow() : '',
    atMs: now,
  };
}

/**
 * What placement reads of each node, hashed. Free RAM and disk are rounded to
 * GiB so the key does not change with every log line written; a change
 * inside one GiB is picked up by blockedRetryMs.
 */
export function snapshotKeyOf(nodes: readonly PlacementNode[]): string {
  const hash = createHash('sha256');
  for (const n of nodes) {
    const weights = [...n.weightsHeld].sort().join(',');
    const gpus =
      n.gpus === undefined
        ? '?'
        : n.gpus.map((g) => `${g.index}:${g.class ?? ''}:${g.memoryTotalMiB ?? ''}:${g.healthy ? 1 : 0}`).join(',');
    const labels = Object.entries(n.labels)
      .sort(([a], [b]) => (a < b ? -1 : 1))
      .map(([k, v]) => `${k}=${v}`)
      .join(',');
    hash.update(
      [
        n.id,
        n.adminState,
        n.liveness,
        // An approval changes what may be placed as much as an uncordon does.
        n.pendingApproval ? 'pending' : 'approved',
        gpus,
        [...n.gpusInUse].sort((a, b) => a - b).join(','),
        n.memoryFreeBytes === undefined ? '?' : Math.round(n.memoryFreeBytes / GiB),
        n.localDiskFreeBytes === undefined ? '?' : Math.round(n.localDiskFreeBytes / GiB),
        weights,
        n.fabrics.map((f) => f.name).join(','),
        [...n.engines].sort().join(','),
        labels,
      ].join('|') + '\n',
    );
  }
  return hash.digest('hex');
}
