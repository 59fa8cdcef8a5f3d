// The last rule of a pass: place what the count and drain rules asked for,
// at most a capped number per pass, and turn the answers into creations,
// retries, rejections and blocked drains. The cap is its own rule because
// it is what keeps a rack going dark from turning into a stampede of
// fetches onto the nodes that remain; everything not placed under it waits
// for the next pass, counted as throttled.
import { placeMany, type PlacementNode, type PlacementRequest, type ReplicaFootprint } from '../placement/index.js';
import {
  type BlockedDrain,
  type ModelRejections,
  type PlanAction,
  type PlanModel,
  toPlacementProfile,
  weightsKeyOf,
} from './plan-types.js';
import type { ReplicaRecord } from './types.js';

/** One replica a rule wants placed, with what the answer means. */
export interface PendingRequest {
  readonly request: PlacementRequest;
  /** 'scale': a missing replica (or a retry); 'drain': a replacement for a replica on a draining node. */
  readonly purpose: 'scale' | 'drain';
  readonly model: PlanModel;
  readonly modelKey: string;
  /** For a retry: the failed replica placed again. */
  readonly retryOf?: ReplicaRecord;
  /** For a drain: the replica being moved off. */
  readonly replaces?: ReplicaRecord;
}

/**
 * A model's placement request, built on first use and then shared: a pass
 * with nothing to place for a model hashes no source and maps no profile.
 * `excludeNodes` (absent or empty = none) keeps a replacement off the nodes
 * its replica is leaving.
 */
export function requestBuilder(
  model: PlanModel,
  live: readonly ReplicaRecord[],
): (excludeNodes?: readonly string[]) => PlacementRequest {
  let base: Omit<PlacementRequest, 'excludeNodes'> | undefined;
  return (excludeNodes) => {
    base ??= {
      model: model.name,
      weightsKey: weightsKeyOf(model.source),
      profiles: model.profiles.map(toPlacementProfile),
      existingReplicas: live.map((r): ReplicaFootprint => ({
        nodeIds: r.shards.map((s) => s.nodeId),
        ...(r.fabric === null ? {} : { fabric: r.fabric }),
      })),
    };
    return excludeNodes?.length ? { ...base, excludeNodes } : base;
  };
}

export interface Placed {
  /** Creations and retries, in the order of the requests placed. */
  readonly actions: PlanAction[];
  /** `held` plus every model a request failed for; a scale failure replaces a drain one, never the other way. */
  readonly rejections: Map<string, ModelRejections>;
  readonly blockedDrains: BlockedDrain[];
  /** Requests left for a later pass by the cap; 0 = none. */
  readonly throttled: number;
}

/**
 * Places `pending` in order on `nodes` (each answer sees the capacity the
 * ones before it took) and stops after the `cap`-th success. The cap counts
 * placements, not attempts, so models that fit nowhere cannot use up a pass;
 * cutting the answers after the cap-th success is safe because each answer
 * depends only on the requests before it. `held` = rejections kept from the
 * previous pass for models not tried again.
 */
export function placeWithCap(
  nodes: readonly PlacementNode[],
  pending: readonly PendingRequest[],
  cap: number,
  now: number,
  held: ReadonlyMap<string, ModelRejections> = new Map(),
): Placed {
  // An idle pass asks for nothing: building placement's index of 10,000 nodes for it was a sixth of the pass (bench/fleet.mjs).
  const results =
    pending.length === 0
      ? []
      : placeMany(
          { nodes },
          pending.map((p) => p.request),
        );
  let placedCount = 0;
  let cut = pending.length;
  for (let i = 0; i < results.length; i++) {
    if (results[i]!.ok && ++placedCount === cap) {
      cut = i + 1;
      break;
    }
  }
  const attempted = pending.slice(0, cut);

  const actions: PlanAction[] = [];
  const rejections = new Map(held);
  const blockedDrains: BlockedDrain[] = [];
  // Once anything is placed, a later failure may be the capacity it took, not the fleet: such a rejection is not held.
  let claimed = false;
  attempted.forEach((p, i) => {
    const result = results[i]!;
    if (result.ok) {
      claimed = true;
      const placement = result.placement;
      const where = placement.shards.map((s) => s.nodeId).join(', ');
      if (p.retryOf) {
        actions.push({
          kind: 'retry',
          replicaId: p.retryOf.id,
          model: p.model.name,
          profile: placement.profile,
          placement,
          reason: `retry ${p.retryOf.failures} after: ${p.retryOf.error ?? 'a failure'}; placed on ${where}`,
        });
      } else if (p.replaces) {
        actions.push({
          kind: 'create',
          model: p.model.name,
          profile: placement.profile,
          placement,
          replaces: p.replaces.id,
          reason: `replacement for ${p.replaces.id}, whose node is draining; placed on ${where}`,
        });
      } else {
        actions.push({
          kind: 'create',
          model: p.model.name,
          profile: placement.profile,
          placement,
          replaces: null,
          reason: `model ${p.model.name} is below its wanted replicas; placed on ${where}`,
        });
      }
      return;
    }
    if (!rejections.has(p.model.name) || p.purpose === 'scale') {
      rejections.set(p.model.name, {
        model: p.model.name,
        purpose: p.purpose,
        rejections: result.rejections,
        notes: result.notes,
        nodeCount: result.nodeCount,
        modelKey: p.modelKey,
        atMs: now,
        contended: claimed,
      });
    }
    if (p.replaces) {
      const nodeIds = p.replaces.shards.map((s) => s.nodeId);
      blockedDrains.push({
        replicaId: p.replaces.id,
        model: p.model.name,
        nodeIds,
        reason: `replica ${p.replaces.id} stays on draining node ${nodeIds.join(', ')}: no other node can take a replacement (see explain-placement for ${p.model.name})`,
      });
    }
  });
  return { actions, rejections, blockedDrains, throttled: pending.length - cut };
}
