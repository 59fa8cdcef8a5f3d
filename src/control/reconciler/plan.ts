// One reconciler pass as a pure function: the catalog, a snapshot of the
// fleet, the replica records and `now` in; a plan out. It reads no clock,
// does no I/O and draws no random numbers, so the same input always gives
// the same plan: the property tests run it over thousands of made-up fleets,
// and an operator's "why did it do that" has one answer. Applying the plan
// (ids, the store, the agents) is the reconciler's, in apply.ts and
// reconciler.ts.
//
// The rules, in the order a pass applies them:
//  - A stopping replica is forgotten once its agents no longer run it (or a
//    grace period passes, for agents that never answer again).
//  - A replica with a shard on a lost node (or a node gone from the
//    inventory) is marked lost and replaced. A stale node moves nothing: it
//    is given until it is lost.
//  - A replica whose agent reported a shard failed is marked failed, with
//    backoff before it is placed again; its last error is kept.
//  - A replica that can no longer run where it is (GPU gone or unhealthy,
//    engine gone, fabric broken, GPU given twice) is stopped and replaced.
//  - Wanted (the scaler's number through the `wanted` seam, clamped to
//    [min, max]; scaling.min without one) is compared with the replicas that
//    count; missing ones are created (failed ones retried first, when their
//    backoff is over). Extra ones: with a scaler's number, the idle ones go
//    first and a ready one is drained (it takes nothing new and is stopped
//    once what it serves is done); without one, extras are stopped at once,
//    newest first.
//  - A replica on a draining node is moved make-before-break: a replacement
//    is placed elsewhere; when it is ready the old one is marked draining;
//    when its in-flight requests are done (or the drain deadline passes) it
//    is stopped. At most maxParallel replicas of one model move at a time. A
//    drain that finds no room keeps the old replica and says why.
//  - Creations in one pass are capped, so that a rack going dark does not
//    turn into a stampede of fetches onto the nodes that remain.
import { createHash } from 'node:crypto';
import { cacheNameOf } from '../../protocol/index.js';
import { GiB, formatDurationMs as formatMs } from '../../units/index.js';
import {
  checkReplicas,
  placeMany,
  type Placement,
  type PlacementNode,
  type PlacementNote,
  type PlacementProfile,
  type PlacementRequest,
  type Rejection,
  type ReplicaFootprint,
  type ReplicaProblem,
} from '../placement/index.js';
import { COUNTING_STATES, type ReplicaRecord } from './types.js';

/** The parts of a compiled catalog model a pass reads; the catalog's Model has them all. */
export interface PlanModel {
  readonly name: string;
  readonly source: string;
  readonly scaling: { readonly min: number; readonly max: number };
  readonly profiles: readonly PlanProfile[];
}

export interface PlanProfile {
  readonly name: string;
  readonly engine: string;
  readonly gpus: number;
  readonly shards: number;
  readonly gpuClasses: readonly string[];
  readonly gpuMemoryGiB: number | null;
  readonly memoryGiB: number | null;
  readonly diskGiB: number | null;
  readonly pool: string | null;
}

export interface PlanInput {
  /** Epoch ms; passed in, never read. */
  readonly now: number;
  readonly models: readonly PlanModel[];
  /** The fleet; `gpusInUse` may be empty: the pass adds the GPUs its replicas hold. */
  readonly nodes: readonly PlacementNode[];
  readonly replicas: readonly ReplicaRecord[];
  /**
   * Requests in flight per replica id, from the router. Absent (or no entry)
   * = the router has reported none, and a draining replica is stopped on the
   * pass after it was marked draining, which is when a router would have
   * seen the mark.
   */
  readonly inFlight?: ReadonlyMap<string, number>;
  /**
   * The seam for demand-based scaling: wanted replicas per model name, from
   * whatever watches demand (src/control/scaling). Absent, or no entry for a
   * model = scaling.min. Always clamped to [min, max]. A model with an entry
   * is scaled down by draining its idlest replicas rather than stopping the
   * newest.
   */
  readonly wanted?: ReadonlyMap<string, number>;
  /**
   * The previous pass's plan. A model that could not be placed then is not
   * tried again while the fleet looks the same (same snapshot key) and its
   * definition has not changed, up to `blockedRetryMs`: a blocked model is
   * re-evaluated when capacity changes, not in a hot loop. Absent = try all.
   */
  readonly previous?: Pick<Plan, 'snapshotKey' | 'rejections' | 'atMs'>;
}

export interface PlanOptions {
  /** How long a draining replica may finish its in-flight requests before it is stopped anyway; default 5 minutes. */
  readonly drainDeadlineMs?: number;
  /** Replicas of one model moved off draining nodes at a time; default 1. */
  readonly maxParallel?: number;
  /** First retry delay of a failed replica; doubles per consecutive failure. Default 10 s. */
  readonly retryBaseMs?: number;
  /** The longest retry delay; default 10 minutes. */
  readonly retryMaxMs?: number;
  /** How long a stopping replica waits for its agents to confirm before it is forgotten; default 2 minutes. */
  readonly stopGraceMs?: number;
  /** Most replicas created (or retried) in one pass; absent = 10% of the fleet, at least 10. */
  readonly maxCreatesPerPass?: number;
  /** The longest a blocked model goes untried while the fleet looks unchanged; default 1 minute. */
  readonly blockedRetryMs?: number;
}

export interface CompiledPlanOptions {
  readonly drainDeadlineMs: number;
  readonly maxParallel: number;
  readonly retryBaseMs: number;
  readonly retryMaxMs: number;
  readonly stopGraceMs: number;
  readonly maxCreatesPerPass: number | null;
  readonly blockedRetryMs: number;
}

export function compilePlanOptions(options: PlanOptions = {}): CompiledPlanOptions {
  return {
    drainDeadlineMs: options.drainDeadlineMs ?? 5 * 60_000,
    maxParallel: Math.max(1, options.maxParallel ?? 1),
    retryBaseMs: options.retryBaseMs ?? 10_000,
    retryMaxMs: options.retryMaxMs ?? 10 * 60_000,
    stopGraceMs: options.stopGraceMs ?? 2 * 60_000,
    maxCreatesPerPass: options.maxCreatesPerPass ?? null,
    blockedRetryMs: options.blockedRetryMs ?? 60_000,
  };
}

export type PlanAction =
  | {
      readonly kind: 'create';
      readonly model: string;
      readonly profile: string;
      readonly placement: Placement;
      /** The replica this one replaces on a draining node; null = a new one. */
      readonly replaces: string | null;
      readonly reason: string;
    }
  | { readonly kind: 'retry'; readonly replicaId: string; readonly model: string; readonly profile: string; readonly placement: Placement; readonly reason: string }
  | { readonly kind: 'drain'; readonly replicaId: string; readonly reason: string }
  | { readonly kind: 'stop'; readonly replicaId: string; readonly reason: string }
  | { readonly kind: 'markFailed'; readonly replicaId: string; readonly error: string; readonly failures: number; readonly nextRetryAtMs: number; readonly reason: string }
  | { readonly kind: 'markLost'; readonly replicaId: string; readonly shards: readonly string[]; readonly error: string; readonly reason: string }
  | { readonly kind: 'forget'; readonly replicaId: string; readonly reason: string };

/** Why a model (or a move of one of its replicas) could not be placed this pass. */
export interface ModelRejections {
  readonly model: string;
  /** 'scale': a missing replica; 'drain': a replacement for a replica on a draining node. */
  readonly purpose: 'scale' | 'drain';
  readonly rejections: readonly Rejection[];
  readonly notes: readonly PlacementNote[];
  /** Nodes in the snapshot, the denominator of explain's "0/12 nodes fit". */
  readonly nodeCount: number;
  /** The model's definition as placement read it; a change means it is tried again at once. */
  readonly modelKey: string;
  /** When placement last actually ran for it (a held rejection keeps the time it was made). */
  readonly atMs: number;
  /**
   * True when an earlier placement in the same pass took capacity first: the
   * snapshot alone does not explain the failure, so it is not held.
   */
  readonly contended: boolean;
}

/** A replica left on a draining node because nothing else could take it. */
export interface BlockedDrain {
  readonly replicaId: string;
  readonly model: string;
  readonly nodeIds: readonly string[];
  readonly reason: string;
}

export interface Plan {
  readonly actions: readonly PlanAction[];
  /** Per model that could not be placed this pass; a model with no entry had nothing it failed to place. */
  readonly rejections: ReadonlyMap<string, ModelRejections>;
  readonly blockedDrains: readonly BlockedDrain[];
  /** Placements left for a later pass by the creation cap; 0 = none. */
  readonly throttled: number;
  /** A fingerprint of what placement saw (nodes, their free capacity); equal keys = the fleet looks the same. '' = not computed: nothing was blocked. */
  readonly snapshotKey: string;
  /** The pass's `now`. */
  readonly atMs: number;
}

/** Wanted replicas of a model: the scaler's number when there is one, clamped to [min, max]; scaling.min otherwise. */
export function wantedCount(model: PlanModel, fromScaler?: number): number {
  const { min, max } = model.scaling;
  if (fromScaler === undefined) return min;
  return Math.max(min, Math.min(Math.max(min, max), fromScaler));
}

/** The delay before a replica that has failed `failures` times in a row is placed again. */
export function retryDelayMs(failures: number, options: Pick<CompiledPlanOptions, 'retryBaseMs' | 'retryMaxMs'>): number {
  const exponent = Math.max(0, Math.min(failures - 1, 30));
  return Math.min(options.retryMaxMs, options.retryBaseMs * 2 ** exponent);
}

export function toPlacementProfile(p: PlanProfile): PlacementProfile {
  return {
    name: p.name,
    engine: p.engine,
    gpus: p.gpus,
    shards: p.shards,
    ...(p.gpuClasses.length ? { gpuClasses: p.gpuClasses } : {}),
    ...(p.gpuMemoryGiB === null ? {} : { gpuMemoryGiB: p.gpuMemoryGiB }),
    ...(p.memoryGiB === null ? {} : { memoryGiB: p.memoryGiB }),
    ...(p.diskGiB === null ? {} : { diskGiB: p.diskGiB }),
    ...(p.pool === null ? {} : { pool: p.pool }),
  };
}

/** What placement matches against a node's weights: the cache name and the source itself (model dirs report sources). */
export function weightsKeyOf(source: string): string[] {
  const name = cacheNameOf(source, { allowHttp: true });
  return name === null ? [source] : [name, source];
}

interface PendingRequest {
  readonly request: PlacementRequest;
  readonly purpose: 'scale' | 'drain';
  readonly model: PlanModel;
  readonly modelKey: string;
  /** For a retry: the failed replica placed again. */
  readonly retryOf?: ReplicaRecord;
  /** For a drain: the replica being moved off. */
  readonly replaces?: ReplicaRecord;
}

const byId = (a: ReplicaRecord, b: ReplicaRecord): number => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
const newestFirst = (a: ReplicaRecord, b: ReplicaRecord): number => b.createdAtMs - a.createdAtMs || byId(b, a);

export function planPass(input: PlanInput, options: PlanOptions = {}): Plan {
  const opts = compilePlanOptions(options);
  const { now } = input;
  const actions: PlanAction[] = [];
  const nodesById = new Map(input.nodes.map((n) => [n.id, n]));
  const replicas = [...input.replicas].sort(byId);
  const modelsByName = new Map(input.models.map((m) => [m.name, m]));

  // Problems of replicas that should be running where they are.
  const running = replicas.filter((r) => COUNTING_STATES.has(r.state) || r.state === 'draining');
  const problems = new Map<string, ReplicaProblem[]>();
  for (const p of checkReplicas({ nodes: input.nodes }, running.map((r) => ({ id: r.id, model: r.model, ...(r.fabric === null ? {} : { fabric: r.fabric }), shards: r.shards })))) {
    const list = problems.get(p.replica!) ?? [];
    list.push(p);
    problems.set(p.replica!, list);
  }

  // Which replicas survive the first rules, and which give their GPUs back.
  const survivors: ReplicaRecord[] = [];
  const failed: ReplicaRecord[] = [];
  const holdsGpus: ReplicaRecord[] = [];
  for (const r of replicas) {
    if (r.state === 'stopping') {
      const gone = r.shards.every((s) => s.state === 'stopped' || isGone(nodesById.get(s.nodeId)));
      if (gone) actions.push({ kind: 'forget', replicaId: r.id, reason: 'every shard has stopped' });
      else if (now - r.stateSinceMs >= opts.stopGraceMs) {
        actions.push({ kind: 'forget', replicaId: r.id, reason: `its agents did not confirm the stop within ${formatMs(opts.stopGraceMs)}` });
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
      failed.push({ ...r, state: 'failed', error, failures, nextRetryAtMs: now + delayMs });
      continue;
    }
    const broken = own.filter((p) => p.code !== 'draining');
    if (broken.length > 0) {
      actions.push({ kind: 'stop', replicaId: r.id, reason: `cannot keep running where it is: ${broken.map((p) => (p.node ? `node ${p.node}: ${p.reason}` : p.reason)).join('; ')}` });
      holdsGpus.push(r);
      continue;
    }
    survivors.push(r);
    holdsGpus.push(r);
  }

  // The snapshot placement sees: every GPU a replica still holds is taken.
  const inUse = new Map<string, Set<number>>();
  for (const r of holdsGpus) {
    for (const s of r.shards) {
      let set = inUse.get(s.nodeId);
      if (!set) inUse.set(s.nodeId, (set = new Set()));
      for (const g of s.gpuIndices) set.add(g);
    }
  }
  const nodes: PlacementNode[] = input.nodes.map((n) => {
    const held = inUse.get(n.id);
    if (!held) return n;
    return { ...n, gpusInUse: [...new Set([...n.gpusInUse, ...held])].sort((a, b) => a - b) };
  });

  // The snapshot key is only needed when something was or is blocked; an idle pass never hashes the fleet.
  let snapshotKey: string | undefined;
  const snapshotKeyNow = (): string => (snapshotKey ??= snapshotKeyOf(nodes));
  const rejections = new Map<string, ModelRejections>();
  const prev = input.previous;
  const sameFleet = (): boolean => prev !== undefined && prev.snapshotKey !== '' && prev.snapshotKey === snapshotKeyNow();

  // Replicas of models no longer in the catalog are stopped; their failed ones forgotten.
  const byModel = new Map<string, { live: ReplicaRecord[]; draining: ReplicaRecord[]; failed: ReplicaRecord[] }>();
  const group = (model: string) => {
    let g = byModel.get(model);
    if (!g) byModel.set(model, (g = { live: [], draining: [], failed: [] }));
    return g;
  };
  for (const r of survivors) {
    const m = modelsByName.get(r.model);
    if (!m) actions.push({ kind: 'stop', replicaId: r.id, reason: `model ${r.model} is no longer in the catalog` });
    else if (!m.profiles.some((p) => p.name === r.profile)) {
      // The model was redefined without this profile: nothing can tell the agent how to run it any more.
      actions.push({ kind: 'stop', replicaId: r.id, reason: `model ${r.model} no longer has profile ${r.profile}` });
    } else if (r.state === 'draining') group(r.model).draining.push(r);
    else group(r.model).live.push(r);
  }
  for (const r of failed) {
    if (!modelsByName.has(r.model)) actions.push({ kind: 'forget', replicaId: r.id, reason: `model ${r.model} is no longer in the catalog` });
    else group(r.model).failed.push(r);
  }

  const scaleRequests: PendingRequest[] = [];
  const drainRequests: PendingRequest[] = [];
  const models = [...input.models].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  for (const model of models) {
    const g = byModel.get(model.name) ?? { live: [], draining: [], failed: [] };
    const wanted = wantedCount(model, input.wanted?.get(model.name));
    const onDraining = (r: ReplicaRecord) => r.shards.some((s) => nodesById.get(s.nodeId)?.adminState === 'draining');
    const replacementOf = new Map<string, ReplicaRecord>();
    for (const r of g.live) if (r.replaces !== null) replacementOf.set(r.replaces, r);
    const outgoing = g.live.filter(onDraining);
    const movingOut = new Set(outgoing.filter((r) => replacementOf.has(r.id)).map((r) => r.id));
    // A replica being moved and its replacement fill one slot between them.
    const effective = g.live.length - movingOut.size;

    const failedQueue = [...g.failed].sort((a, b) => (a.nextRetryAtMs ?? 0) - (b.nextRetryAtMs ?? 0) || byId(a, b));
    const failedSlots = Math.max(0, wanted - effective);
    const keptFailed = failedQueue.slice(0, failedSlots);
    for (const r of failedQueue.slice(failedSlots)) {
      actions.push({ kind: 'forget', replicaId: r.id, reason: `model ${model.name} has its ${wanted} wanted replica(s) without it` });
    }

    // Built only when this model has something to place: an idle pass hashes no source and maps no profile.
    let base: Omit<PlacementRequest, 'excludeNodes'> | undefined;
    const request = (excludeNodes?: readonly string[]): PlacementRequest => {
      base ??= {
        model: model.name,
        weightsKey: weightsKeyOf(model.source),
        profiles: model.profiles.map(toPlacementProfile),
        existingReplicas: g.live.map((r): ReplicaFootprint => ({ nodeIds: r.shards.map((s) => s.nodeId), ...(r.fabric === null ? {} : { fabric: r.fabric }) })),
      };
      return excludeNodes?.length ? { ...base, excludeNodes } : base;
    };
    let modelKeyMemo: string | undefined;
    const modelKey = (): string => (modelKeyMemo ??= modelKeyOf(model));

    const held = prev?.rejections.get(model.name);
    const missingNow = wanted - effective - keptFailed.length;
    const wantsPlacement = missingNow > 0 || keptFailed.some((r) => (r.nextRetryAtMs ?? 0) <= now);
    if (
      wantsPlacement &&
      held &&
      held.purpose === 'scale' &&
      !held.contended &&
      now - held.atMs < opts.blockedRetryMs &&
      held.modelKey === modelKey() &&
      sameFleet()
    ) {
      // Nothing it needs has changed since it last failed: keep the answer instead of asking again.
      rejections.set(model.name, held);
    } else {
      for (const r of keptFailed) {
        if ((r.nextRetryAtMs ?? 0) <= now) scaleRequests.push({ request: request(), purpose: 'scale', model, modelKey: modelKey(), retryOf: r });
      }
      for (let i = 0; i < missingNow; i++) scaleRequests.push({ request: request(), purpose: 'scale', model, modelKey: modelKey() });
    }

    // Extras: replicas on draining nodes first (they were leaving anyway), then the newest.
    // Scaled down by demand: the least busy first, then the longest idle (a replica still starting has been idle since it was made), and a ready one is drained, not cut off.
    const stopped = new Set<string>();
    if (effective > wanted) {
      const scaled = input.wanted?.has(model.name) === true;
      const inFlightOf = (r: ReplicaRecord) => input.inFlight?.get(r.id) ?? 0;
      const idleSince = (r: ReplicaRecord) => Math.max(r.lastUsedAtMs ?? 0, r.state === 'ready' ? r.stateSinceMs : r.createdAtMs);
      const order = scaled
        ? (a: ReplicaRecord, b: ReplicaRecord) =>
            Number(onDraining(b)) - Number(onDraining(a)) ||
            inFlightOf(a) - inFlightOf(b) ||
            idleSince(a) - idleSince(b) ||
            newestFirst(a, b)
        : (a: ReplicaRecord, b: ReplicaRecord) => Number(onDraining(b)) - Number(onDraining(a)) || newestFirst(a, b);
      const candidates = g.live.filter((r) => !movingOut.has(r.id)).sort(order);
      for (const r of candidates.slice(0, effective - wanted)) {
        stopped.add(r.id);
        const reason = `model ${model.name} wants ${wanted} replica(s) and has ${effective}; this one is surplus`;
        if (scaled && r.state === 'ready') {
          const idleS = Math.max(0, Math.floor((now - idleSince(r)) / 1000));
          actions.push({ kind: 'drain', replicaId: r.id, reason: `${reason} (idle ${idleS}s): it finishes what it serves, then stops` });
        } else actions.push({ kind: 'stop', replicaId: r.id, reason });
      }
    }

    // Make-before-break off draining nodes.
    let moving = movingOut.size + g.draining.length;
    for (const r of outgoing) {
      if (stopped.has(r.id)) continue;
      const replacement = replacementOf.get(r.id);
      const drainingNodes = [...new Set(r.shards.map((s) => s.nodeId).filter((id) => nodesById.get(id)?.adminState === 'draining'))].sort();
      if (replacement) {
        if (replacement.state === 'ready') {
          actions.push({ kind: 'drain', replicaId: r.id, reason: `node ${drainingNodes.join(', ')} is draining and replacement ${replacement.id} is ready` });
        }
        continue;
      }
      if (moving >= opts.maxParallel) continue;
      moving++;
      drainRequests.push({ request: request(r.shards.map((s) => s.nodeId)), purpose: 'drain', model, modelKey: modelKey(), replaces: r });
    }
    for (const r of g.draining) {
      const inFlight = input.inFlight?.get(r.id);
      const drainedMs = now - r.stateSinceMs;
      if (drainedMs >= opts.drainDeadlineMs) {
        actions.push({
          kind: 'stop',
          replicaId: r.id,
          reason: `drain deadline of ${formatMs(opts.drainDeadlineMs)} passed${inFlight ? ` with ${inFlight} request(s) still in flight` : ''}`,
        });
      } else if ((inFlight ?? 0) === 0 && drainedMs > 0) {
        const replaced = g.live.some((x) => x.replaces === r.id);
        actions.push({ kind: 'stop', replicaId: r.id, reason: replaced ? 'drained: no requests in flight, and its replacement is serving' : 'drained: no requests in flight' });
      }
    }
  }

  // The cap: a pass places at most this many; the rest wait for the next pass.
  // It counts placements, not attempts, so models that fit nowhere cannot
  // use up a pass. Cutting placeMany's answers after the cap-th success is
  // safe: each answer depends only on the requests before it.
  const cap = opts.maxCreatesPerPass ?? Math.max(10, Math.ceil(input.nodes.length / 10));
  const pending = [...scaleRequests, ...drainRequests];
  const results = placeMany({ nodes }, pending.map((p) => p.request));
  let placedCount = 0;
  let cut = pending.length;
  for (let i = 0; i < results.length; i++) {
    if (results[i]!.ok && ++placedCount === cap) {
      cut = i + 1;
      break;
    }
  }
  const attempted = pending.slice(0, cut);
  const throttled = pending.length - cut;

  const blockedDrains: BlockedDrain[] = [];
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
        actions.push({ kind: 'create', model: p.model.name, profile: placement.profile, placement, replaces: null, reason: `model ${p.model.name} is below its wanted replicas; placed on ${where}` });
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

  return { actions, rejections, blockedDrains, throttled, snapshotKey: rejections.size > 0 ? snapshotKeyNow() : '', atMs: now };
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
    const gpus = n.gpus === undefined ? '?' : n.gpus.map((g) => `${g.index}:${g.class ?? ''}:${g.memoryTotalMiB ?? ''}:${g.healthy ? 1 : 0}`).join(',');
    const labels = Object.entries(n.labels).sort(([a], [b]) => (a < b ? -1 : 1)).map(([k, v]) => `${k}=${v}`).join(',');
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

function modelKeyOf(model: PlanModel): string {
  return JSON.stringify([model.source, model.profiles]);
}

function isGone(node: PlacementNode | undefined): boolean {
  return node === undefined || node.liveness === 'lost';
}
