// Choosing where one replica goes, and a pass of several at once.
//
// Profiles are tried in catalog order; the first with a fitting candidate
// wins. Candidates come from an index of the nodes the profile could use if
// nothing were taken, filed by free GPUs (see state.ts), so the common case,
// "it fits", looks at a handful of nodes and builds no sentence. Only when
// no profile fits anywhere are the full checks run, once per profile and
// node, to say why (checks.ts); a property test holds the two paths to the
// same answer for every node.
//
// Scoring, among candidates that fit (lower wins, compared in this order):
//  1. Replicas of this model already on the node, then whether the node holds
//     the weights. Holding the weights saves a fetch, so it is preferred; but
//     a second replica on the node that already runs one would lose both at
//     once, so spreading over nodes outranks it (the "spread factor").
//  2. GPUs left free on the node after placing (for a CPU profile, the node's
//     free GPUs): bin-packing, so the large holes a TP8 replica needs stay open
//     and CPU replicas keep off idle GPU machines.
//  3. Replicas of this model on the node's fabrics: a fabric is a switch and
//     a failure domain, so replicas spread over fabrics too.
//  4. Node id, so the same snapshot always gives the same answer whatever
//     order the inventory listed the nodes in.
// A multi-node replica picks, in each fabric with enough fitting nodes, the
// best nodes by 1–2, then the fabric whose chosen nodes score best (sums of
// 1, then of 2), then fewest replicas on the fabric, then fabric name.
import {
  fabricRejection,
  noFabricRejection,
  nodeRejections,
  notesFor,
  poolInvalidRejection,
  type RequestContext,
} from './checks.js';
import { PlacementState, type ProfileIndex, type ProfileShape } from './state.js';
import type {
  Placement,
  PlacementNote,
  PlacementProfile,
  PlacementRequest,
  PlacementResult,
  PlacementSnapshot,
  Rejection,
  ReplicaFootprint,
} from './types.js';

/** Places one replica. Pure: the snapshot is not changed. */
export function place(snapshot: PlacementSnapshot, request: PlacementRequest): PlacementResult {
  return placeIn(new PlacementState(snapshot), request, [], false).result;
}

/**
 * Places several replicas in order, each seeing the GPUs, RAM and disk the
 * earlier ones took (and the weights they will fetch), so no GPU is given
 * twice. Replicas of one model placed earlier in the pass count for
 * spreading the later ones. Results are in request order.
 */
export function placeMany(snapshot: PlacementSnapshot, requests: readonly PlacementRequest[]): PlacementResult[] {
  return placeManyWith(snapshot, requests, {});
}

/** Internal: `fullScan` scores every node instead of using the buckets, so a test can hold the two to the same answers. */
export function placeManyWith(
  snapshot: PlacementSnapshot,
  requests: readonly PlacementRequest[],
  options: { fullScan?: boolean },
): PlacementResult[] {
  const state = new PlacementState(snapshot);
  const placedInPass = new Map<string, ReplicaFootprint[]>();
  return requests.map((request) => {
    const earlier = placedInPass.get(request.model);
    const { result, shape } = placeIn(state, request, earlier ?? [], options.fullScan ?? false);
    if (result.ok && shape) {
      const keys = weightKeys(request);
      for (const shard of result.placement.shards)
        state.claim(shape, keys, state.positionById.get(shard.nodeId)!, shard.gpuIndices);
      const footprint: ReplicaFootprint = {
        nodeIds: result.placement.shards.map((s) => s.nodeId),
        ...(result.placement.fabric === undefined ? {} : { fabric: result.placement.fabric }),
      };
      if (earlier) earlier.push(footprint);
      else placedInPass.set(request.model, [footprint]);
    }
    return result;
  });
}

function weightKeys(request: PlacementRequest): readonly string[] {
  return typeof request.weightsKey === 'string' ? [request.weightsKey] : request.weightsKey;
}

/**
 * What scoring needs to know about the request, as marks in the state's
 * scratch arrays (see PlacementState.stamp) so the scan reads typed arrays,
 * never a Map.
 */
interface Marks {
  readonly stamp: number;
  readonly anyExcluded: boolean;
  /** Nodes holding the weights or running a replica of the model: scored one by one before the buckets. */
  readonly specials: readonly number[];
  /** Per fabric group, the most replicas of the model on any of its fabrics; null when the model has none. */
  readonly spreadByGroup: Int32Array | null;
  readonly replicasOnFabric: ReadonlyMap<string, number>;
}

const NO_NODES: ReadonlySet<number> = new Set();
const NO_FABRICS: ReadonlyMap<string, number> = new Map();

/** Marks the request's excluded nodes, replica nodes and weight holders in the state's scratch arrays. */
function begin(
  state: PlacementState,
  request: PlacementRequest,
  placedInPass: readonly ReplicaFootprint[],
): { ctx: RequestContext; marks: Marks } {
  const stamp = ++state.stamp;
  let excluded = NO_NODES;
  if (request.excludeNodes && request.excludeNodes.length > 0) {
    const set = new Set<number>();
    for (const id of request.excludeNodes) {
      const i = state.positionById.get(id);
      if (i === undefined) continue;
      set.add(i);
      state.excludeMark[i] = stamp;
    }
    excluded = set;
  }
  const specials: number[] = [];
  let replicasOnFabric = NO_FABRICS;
  const existing = request.existingReplicas ?? [];
  if (existing.length + placedInPass.length > 0) {
    const onFabric = new Map<string, number>();
    for (const list of [existing, placedInPass]) {
      for (const replica of list) {
        const fabrics = new Set<string>();
        if (replica.fabric !== undefined) fabrics.add(replica.fabric);
        const counted = new Set<number>();
        for (const id of replica.nodeIds) {
          const i = state.positionById.get(id);
          if (i === undefined || counted.has(i)) continue;
          counted.add(i);
          if (state.replicaMark[i] !== stamp) {
            state.replicaMark[i] = stamp;
            state.replicaCount[i] = 0;
            specials.push(i);
          }
          state.replicaCount[i]!++;
          for (const f of state.entries[i]!.fabricNames) fabrics.add(f);
        }
        for (const f of fabrics) onFabric.set(f, (onFabric.get(f) ?? 0) + 1);
      }
    }
    replicasOnFabric = onFabric;
  }
  const keys = weightKeys(request);
  for (const key of keys) {
    const holders = state.holders.get(key);
    if (!holders) continue;
    for (const i of holders) {
      if (state.holdMark[i] === stamp) continue;
      state.holdMark[i] = stamp;
      if (state.replicaMark[i] !== stamp) specials.push(i);
    }
  }
  let spreadByGroup: Int32Array | null = null;
  if (replicasOnFabric.size > 0) {
    const spread = new Int32Array(state.fabricGroups.length);
    state.fabricGroups.forEach((names, g) => {
      let most = 0;
      for (const f of names) most = Math.max(most, replicasOnFabric.get(f) ?? 0);
      spread[g] = most;
    });
    spreadByGroup = spread;
  }
  return {
    ctx: { keys, excluded },
    marks: { stamp, anyExcluded: excluded.size > 0, specials, spreadByGroup, replicasOnFabric },
  };
}

interface Candidate {
  /** Position in the profile index. */
  readonly k: number;
  /** Position in state.entries. */
  readonly i: number;
  /** Score part 1: replicas of the model on the node × 2 + (0 if it holds the weights, else 1). */
  readonly affinity: number;
  /** Score part 2: usable GPUs left free after placing. */
  readonly leftover: number;
}

interface Found {
  readonly members: readonly Candidate[];
  readonly fabric?: string;
  readonly considered: number;
}

/**
 * Whether the k-th node of the index fits the shape now: not excluded,
 * enough free usable GPUs, RAM (CPU profiles), and disk unless it holds the
 * weights. Unknown RAM or disk (NaN) passes: `NaN < x` is false. The rest of
 * the checks were made when the index was built.
 */
function fitsNow(
  state: PlacementState,
  shape: ProfileShape,
  index: ProfileIndex,
  k: number,
  i: number,
  marks: Marks,
): boolean {
  if (index.freeCount[k]! < shape.gpus) return false;
  if (marks.anyExcluded && state.excludeMark[i] === marks.stamp) return false;
  if (state.memoryFreeBytes[i]! < shape.memoryBytes) return false;
  if (state.diskFreeBytes[i]! < shape.diskBytes && state.holdMark[i] !== marks.stamp) return false;
  return true;
}

function affinityOf(state: PlacementState, i: number, marks: Marks): number {
  const replicas = state.replicaMark[i] === marks.stamp ? state.replicaCount[i]! : 0;
  return replicas * 2 + (state.holdMark[i] === marks.stamp ? 0 : 1);
}

/** The single-node score, one number: affinity, then leftover, then fabric spread (lower wins). */
function scoreOf(
  state: PlacementState,
  shape: ProfileShape,
  index: ProfileIndex,
  k: number,
  i: number,
  marks: Marks,
): number {
  const leftover = Math.min(index.freeCount[k]! - shape.gpus, 1023);
  const spread = marks.spreadByGroup === null ? 0 : Math.min(marks.spreadByGroup[state.fabricGroupOf[i]!]!, 4095);
  return (affinityOf(state, i, marks) * 1024 + leftover) * 4096 + spread;
}

function candidate(
  state: PlacementState,
  shape: ProfileShape,
  index: ProfileIndex,
  k: number,
  marks: Marks,
): Candidate {
  const i = index.nodes[k]!;
  return { k, i, affinity: affinityOf(state, i, marks), leftover: index.freeCount[k]! - shape.gpus };
}

/** Nodes of the index with enough free usable GPUs, whatever else they lack. */
function withEnoughGpus(index: ProfileIndex, need: number): number {
  let count = 0;
  for (let c = need; c < index.buckets.length; c++) count += index.buckets[c]!.length;
  return count;
}

/**
 * The single-node choice. Nodes holding the weights or running a replica of
 * the model are scored one by one; every other node has affinity 1, so among
 * them the best is in the fullest bucket that has a fitting node, and the
 * buckets are walked from the fullest, stopping as soon as nothing further
 * can win. Ties go to the lower node position, which is id order.
 */
function bestNode(
  state: PlacementState,
  shape: ProfileShape,
  index: ProfileIndex,
  marks: Marks,
  fullScan: boolean,
): Found | null {
  let bestScore = Infinity;
  let bestK = -1;
  let bestI = -1;
  const consider = (k: number, i: number): number => {
    if (!fitsNow(state, shape, index, k, i, marks)) return -1;
    const score = scoreOf(state, shape, index, k, i, marks);
    if (score < bestScore || (score === bestScore && i < bestI)) {
      bestScore = score;
      bestK = k;
      bestI = i;
    }
    return score;
  };
  if (fullScan) {
    for (let k = 0; k < index.nodes.length; k++) consider(k, index.nodes[k]!);
  } else {
    for (const i of marks.specials) {
      const k = index.kOf[i]!;
      if (k !== -1) consider(k, i);
    }
    const { stamp } = marks;
    for (let c = shape.gpus; c < index.buckets.length; c++) {
      const bucket = index.buckets[c]!;
      if (bucket.length === 0) continue;
      const floor = (1024 + Math.min(c - shape.gpus, 1023)) * 4096;
      if (floor > bestScore) break;
      let found = false;
      for (const k of bucket) {
        const i = index.nodes[k]!;
        if (state.holdMark[i] === stamp || state.replicaMark[i] === stamp) continue;
        const score = consider(k, i);
        if (score === -1) continue;
        found = true;
        // Later nodes in the bucket have higher ids and can at best tie.
        if (score === floor) break;
      }
      if (found) break;
    }
  }
  if (bestK === -1) return null;
  return { members: [candidate(state, shape, index, bestK, marks)], considered: withEnoughGpus(index, shape.gpus) };
}

/** A multi-node replica: rare and small, so a plain scan of the index. */
function bestGroup(state: PlacementState, shape: ProfileShape, index: ProfileIndex, marks: Marks): Found | null {
  const byFabric = new Map<string, Candidate[]>();
  for (let k = 0; k < index.nodes.length; k++) {
    const i = index.nodes[k]!;
    if (!fitsNow(state, shape, index, k, i, marks)) continue;
    const c = candidate(state, shape, index, k, marks);
    for (const f of state.entries[i]!.fabricNames) {
      const members = byFabric.get(f);
      if (members) members.push(c);
      else byFabric.set(f, [c]);
    }
  }
  let best: { members: Candidate[]; fabric: string; key: [number, number, number] } | null = null;
  const consideredNodes = new Set<number>();
  for (const fabric of [...byFabric.keys()].sort()) {
    const members = byFabric.get(fabric)!;
    if (members.length < shape.shards) continue;
    for (const m of members) consideredNodes.add(m.i);
    // Stable sort: members arrive in id order, so equal scores keep the lower id first.
    const chosen = [...members]
      .sort((a, b) => a.affinity - b.affinity || a.leftover - b.leftover)
      .slice(0, shape.shards);
    const key: [number, number, number] = [
      chosen.reduce((s, m) => s + m.affinity, 0),
      chosen.reduce((s, m) => s + m.leftover, 0),
      marks.replicasOnFabric.get(fabric) ?? 0,
    ];
    if (
      !best ||
      key[0] < best.key[0] ||
      (key[0] === best.key[0] && (key[1] < best.key[1] || (key[1] === best.key[1] && key[2] < best.key[2])))
    ) {
      best = { members: chosen, fabric, key };
    }
  }
  return best ? { members: best.members, fabric: best.fabric, considered: consideredNodes.size } : null;
}

/**
 * Internal, for the test that holds the fast path to the full checks:
 * whether node `nodeId` fits `profile` by the index and the dynamic checks
 * alone, exactly as a scan would see it.
 */
export function fitsByIndex(
  state: PlacementState,
  request: PlacementRequest,
  profile: PlacementProfile,
  nodeId: string,
): boolean {
  const { marks } = begin(state, request, []);
  const shape = state.shape(profile);
  const index = state.index(shape);
  const i = state.positionById.get(nodeId);
  if (!index || i === undefined) return false;
  const k = index.kOf[i]!;
  return k !== -1 && fitsNow(state, shape, index, k, i, marks);
}

function placeIn(
  state: PlacementState,
  request: PlacementRequest,
  placedInPass: readonly ReplicaFootprint[],
  fullScan: boolean,
): { result: PlacementResult; shape?: ProfileShape } {
  const { ctx, marks } = begin(state, request, placedInPass);
  for (const profile of request.profiles) {
    const shape = state.shape(profile);
    const index = state.index(shape);
    if (!index) continue;
    const found =
      shape.shards > 1 ? bestGroup(state, shape, index, marks) : bestNode(state, shape, index, marks, fullScan);
    if (!found) continue;
    const placement: Placement = {
      profile: profile.name,
      ...(profile.pool === undefined ? {} : { pool: profile.pool }),
      ...(found.fabric === undefined ? {} : { fabric: found.fabric }),
      shards: found.members.map((m, rank) => ({
        nodeId: state.entries[m.i]!.id,
        rank,
        gpuIndices: shape.gpus > 0 ? state.pickGpus(index, m.k, shape.gpus) : [],
      })),
    };
    const notes = notesFor(
      state,
      shape,
      ctx,
      found.members.map((m) => m.i),
    );
    return { result: { ok: true, placement, candidatesConsidered: found.considered, notes }, shape };
  }
  return { result: explainFailure(state, request, ctx) };
}

/** Runs every check of every profile on every node: the answer to "why does it fit nowhere". */
function explainFailure(state: PlacementState, request: PlacementRequest, ctx: RequestContext): PlacementResult {
  const rejections: Rejection[] = [];
  const notes: PlacementNote[] = [];
  const all = state.entries.map((_, i) => i);
  for (const profile of request.profiles) {
    const shape = state.shape(profile);
    if (shape.selectorProblem !== null) {
      rejections.push(poolInvalidRejection(shape));
      continue;
    }
    const byFabric = new Map<string, number>();
    for (const i of all) {
      if (nodeRejections(state, shape, ctx, i, rejections) > 0 || shape.shards === 1) continue;
      const fabrics = state.entries[i]!.fabricNames;
      if (fabrics.length === 0) rejections.push(noFabricRejection(state, shape, i));
      for (const f of fabrics) byFabric.set(f, (byFabric.get(f) ?? 0) + 1);
    }
    for (const fabric of [...byFabric.keys()].sort()) {
      const fitting = byFabric.get(fabric)!;
      if (fitting < shape.shards) rejections.push(fabricRejection(shape, fabric, fitting));
    }
    notes.push(...notesFor(state, shape, ctx, all));
  }
  return { ok: false, rejections, notes, nodeCount: state.entries.length };
}
