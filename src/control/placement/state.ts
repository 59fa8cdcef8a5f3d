// The working copy of a snapshot that placement scans: nodes in id order
// (which is what makes every tie break the same way whatever order the
// inventory listed them in), GPUs marked free or taken, RAM and disk left,
// and who holds which weights. placeMany changes it as it places, so two
// replicas in one pass never get the same GPU; the snapshot itself is never
// written.
//
// What a profile can use on a node without looking at what is taken (admin
// state, liveness, pool, engine, GPUs of the right class, memory and health)
// does not change during a pass, so it is worked out once per distinct
// profile shape and cached here as an index, with its nodes filed in buckets
// by how many usable GPUs each has free; claim() refiles a node when it
// places a shard. Everything per node or per GPU is a flat typed array:
// a pass over a fleet of thousands allocates little.
import { IllegalStateError, isLlmgwError } from '../../errors/index.js';
import { matchesLabels, parseLabelSelector, type LabelSelector } from './label-selector.js';
import type { PlacementGpu, PlacementNode, PlacementProfile, PlacementSnapshot } from './types.js';
import { gibToBytes, gpuRequest } from './wording.js';

export interface NodeEntry {
  readonly node: PlacementNode;
  readonly id: string;
  /** [] when the node did not report GPUs; `gpusKnown` tells the two apart. */
  readonly gpus: readonly PlacementGpu[];
  readonly gpusKnown: boolean;
  readonly fabricNames: readonly string[];
  /** Ready and up: the only nodes that take new replicas. */
  readonly schedulable: boolean;
}

/** A profile reduced to what placement compares, with units converted once. */
export interface ProfileShape {
  readonly profile: PlacementProfile;
  readonly gpus: number;
  readonly shards: number;
  readonly classes: readonly string[];
  /** 0 = no requirement. */
  readonly gpuMemoryMiB: number;
  /** RAM per shard for CPU profiles; NaN = unknown or a GPU profile (not checked). */
  readonly memoryBytes: number;
  /** NaN = unknown weights size (not checked). */
  readonly diskBytes: number;
  /** Null when the profile has no pool. */
  readonly selector: LabelSelector | null;
  /** Why the selector does not parse; null when it does (or there is none). */
  readonly selectorProblem: string | null;
  /** "2 GPUs of class h100-80gb with 70 GiB each", worded once for every rejection that needs it. */
  readonly gpuRequestText: string;
}

/**
 * Nodes a profile shape could use if nothing were taken, with the GPU
 * positions it may use on each, filed by how many of those are free now.
 */
export interface ProfileIndex {
  /** Node positions (into `entries`), id order; `k` below is a position in this list. */
  readonly nodes: Int32Array;
  /** Per node position: its k here, or -1 when the node is not in this index. */
  readonly kOf: Int32Array;
  /**
   * The positions in each node's `gpus` of GPUs of an allowed class, with the
   * memory, healthy: for the k-th node, `positions[positionStart[k]]` up to
   * (not including) `positions[positionStart[k + 1]]`.
   */
  readonly positions: Uint8Array;
  readonly positionStart: Int32Array;
  /** Per k, how many of `positions` are free now; kept exact by claim(). */
  readonly freeCount: Int32Array;
  /** buckets[c] = the ks with exactly c free usable GPUs, ascending (so in id order). */
  readonly buckets: number[][];
}

export function profileShape(profile: PlacementProfile): ProfileShape {
  let selector: LabelSelector | null = null;
  let selectorProblem: string | null = null;
  if (profile.pool !== undefined) {
    try {
      selector = parseLabelSelector(profile.pool);
    } catch (err) {
      if (!isLlmgwError(err)) throw err;
      selectorProblem = err.message;
    }
  }
  const gpus = Math.max(0, Math.floor(profile.gpus));
  return {
    profile,
    gpus,
    shards: Math.max(1, Math.floor(profile.shards ?? 1)),
    classes: profile.gpuClasses ?? [],
    gpuMemoryMiB: profile.gpuMemoryGiB === undefined ? 0 : profile.gpuMemoryGiB * 1024,
    memoryBytes: gpus === 0 && profile.memoryGiB !== undefined ? gibToBytes(profile.memoryGiB) : NaN,
    diskBytes: profile.diskGiB === undefined ? NaN : gibToBytes(profile.diskGiB),
    selector,
    selectorProblem,
    gpuRequestText: gpus > 0 ? gpuRequest(profile) : '',
  };
}

/** Whether a GPU is one the shape may use (class, memory, health), ignoring whether it is taken. */
export function gpuUsable(shape: ProfileShape, gpu: PlacementGpu): boolean {
  if (!gpu.healthy) return false;
  if (shape.classes.length > 0 && (gpu.class === undefined || !shape.classes.includes(gpu.class))) return false;
  // Unknown memory is not checked: the class is the usual guard.
  if (shape.gpuMemoryMiB > 0 && gpu.memoryTotalMiB !== undefined && gpu.memoryTotalMiB < shape.gpuMemoryMiB)
    return false;
  return true;
}

export class PlacementState {
  readonly entries: readonly NodeEntry[];
  readonly positionById: ReadonlyMap<string, number>;
  /** Whether each GPU is given to a shard (1) or free (0): node i's GPUs start at `gpuStart[i]`, in `gpus` order. */
  readonly used: Uint8Array;
  readonly gpuStart: Int32Array;
  /** NaN = unknown. */
  readonly memoryFreeBytes: Float64Array;
  /** NaN = unknown. */
  readonly diskFreeBytes: Float64Array;
  /** Weights key → node positions holding it. */
  readonly holders = new Map<string, Set<number>>();
  /**
   * Per node, which distinct set of fabric names it is on (an index into
   * `fabricGroups`), so spreading over fabrics costs one array read per node.
   */
  readonly fabricGroupOf: Int32Array;
  readonly fabricGroups: readonly (readonly string[])[];
  /**
   * Scratch marks for the request being placed: a node is marked when
   * `mark[i] === stamp`, so starting a request costs what it marks, not the
   * fleet's size. Only place.ts writes these.
   */
  readonly holdMark: Int32Array;
  readonly excludeMark: Int32Array;
  readonly replicaMark: Int32Array;
  readonly replicaCount: Int32Array;
  stamp = 0;
  private readonly indexes = new Map<string, ProfileIndex>();
  private readonly indexOfShape = new Map<ProfileShape, ProfileIndex>();
  private readonly shapes = new Map<PlacementProfile, ProfileShape>();

  constructor(snapshot: PlacementSnapshot) {
    const nodes = [...snapshot.nodes].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    const n = nodes.length;
    const positionById = new Map<string, number>();
    const entries: NodeEntry[] = [];
    const groupIds = new Map<string, number>();
    const fabricGroups: string[][] = [];
    this.gpuStart = new Int32Array(n + 1);
    this.memoryFreeBytes = new Float64Array(n);
    this.diskFreeBytes = new Float64Array(n);
    this.fabricGroupOf = new Int32Array(n);
    this.holdMark = new Int32Array(n);
    this.excludeMark = new Int32Array(n);
    this.replicaMark = new Int32Array(n);
    this.replicaCount = new Int32Array(n);
    let gpuTotal = 0;
    for (let i = 0; i < n; i++) {
      const node = nodes[i]!;
      if (positionById.has(node.id)) {
        throw new IllegalStateError(
          `the placement snapshot lists node ${node.id} twice; the inventory must key nodes by id`,
          {
            node: node.id,
          },
        );
      }
      positionById.set(node.id, i);
      const gpus = node.gpus ?? [];
      const fabricNames = node.fabrics.length === 0 ? [] : node.fabrics.map((f) => f.name);
      entries.push({
        node,
        id: node.id,
        gpus,
        gpusKnown: node.gpus !== undefined,
        fabricNames,
        schedulable: node.adminState === 'ready' && node.liveness === 'up' && !node.pendingApproval,
      });
      const groupKey = fabricNames.length === 1 ? fabricNames[0]! : fabricNames.join('\u0000');
      let group = groupIds.get(groupKey);
      if (group === undefined) {
        groupIds.set(groupKey, (group = fabricGroups.length));
        fabricGroups.push(fabricNames);
      }
      this.fabricGroupOf[i] = group;
      this.gpuStart[i] = gpuTotal;
      gpuTotal += gpus.length;
      this.memoryFreeBytes[i] = node.memoryFreeBytes ?? NaN;
      this.diskFreeBytes[i] = node.localDiskFreeBytes ?? NaN;
      for (const key of node.weightsHeld) {
        let set = this.holders.get(key);
        if (!set) this.holders.set(key, (set = new Set()));
        set.add(i);
      }
    }
    this.gpuStart[n] = gpuTotal;
    this.used = new Uint8Array(gpuTotal);
    for (let i = 0; i < n; i++) {
      const gpus = entries[i]!.gpus;
      for (const index of nodes[i]!.gpusInUse) {
        const pos = positionOfGpu(gpus, index);
        if (pos !== -1) this.used[this.gpuStart[i]! + pos] = 1;
      }
    }
    this.entries = entries;
    this.positionById = positionById;
    this.fabricGroups = fabricGroups;
  }

  shape(profile: PlacementProfile): ProfileShape {
    let shape = this.shapes.get(profile);
    if (!shape) this.shapes.set(profile, (shape = profileShape(profile)));
    return shape;
  }

  /** The static candidates of a shape; null when its selector does not parse. */
  index(shape: ProfileShape): ProfileIndex | null {
    if (shape.selectorProblem !== null) return null;
    let index = this.indexOfShape.get(shape);
    if (index) return index;
    // Shapes that differ only in name, RAM or disk size share an index.
    const p = shape.profile;
    const key = `${p.engine}\u0000${p.pool ?? ''}\u0000${shape.classes.join('\u0001')}\u0000${shape.gpuMemoryMiB}\u0000${shape.gpus}`;
    index = this.indexes.get(key);
    if (!index) this.indexes.set(key, (index = this.buildIndex(shape)));
    this.indexOfShape.set(shape, index);
    return index;
  }

  private buildIndex(shape: ProfileShape): ProfileIndex {
    const n = this.entries.length;
    const nodes: number[] = [];
    const positions: number[] = [];
    const positionStart: number[] = [0];
    const cpu = shape.gpus === 0;
    const engine = shape.profile.engine;
    const kOf = new Int32Array(n).fill(-1);
    for (let i = 0; i < n; i++) {
      const entry = this.entries[i]!;
      if (!entry.schedulable) continue;
      if (shape.selector && !matchesLabels(shape.selector, entry.node.labels)) continue;
      if (!entry.node.engines.includes(engine)) continue;
      if (!cpu && !entry.gpusKnown) continue;
      const start = positions.length;
      const gpus = entry.gpus;
      for (let pos = 0; pos < gpus.length; pos++) {
        // A CPU shard uses no GPU; its positions only feed the packing score.
        if (cpu ? gpus[pos]!.healthy : gpuUsable(shape, gpus[pos]!)) positions.push(pos);
      }
      if (positions.length - start < shape.gpus) {
        positions.length = start;
        continue;
      }
      kOf[i] = nodes.length;
      nodes.push(i);
      positionStart.push(positions.length);
    }
    const index: ProfileIndex = {
      nodes: Int32Array.from(nodes),
      kOf,
      positions: Uint8Array.from(positions),
      positionStart: Int32Array.from(positionStart),
      freeCount: new Int32Array(nodes.length),
      buckets: [],
    };
    for (let k = 0; k < nodes.length; k++) {
      const free = this.countFree(index, k);
      index.freeCount[k] = free;
      while (index.buckets.length <= free) index.buckets.push([]);
      index.buckets[free]!.push(k);
    }
    return index;
  }

  private countFree(index: ProfileIndex, k: number): number {
    const base = this.gpuStart[index.nodes[k]!]!;
    let free = 0;
    for (let p = index.positionStart[k]!; p < index.positionStart[k + 1]!; p++)
      if (this.used[base + index.positions[p]!] === 0) free++;
    return free;
  }

  /** The `count` lowest free usable positions of the k-th node, as GPU indices. */
  pickGpus(index: ProfileIndex, k: number, count: number): number[] {
    const i = index.nodes[k]!;
    const base = this.gpuStart[i]!;
    const gpus = this.entries[i]!.gpus;
    const out: number[] = [];
    for (let p = index.positionStart[k]!; p < index.positionStart[k + 1]! && out.length < count; p++) {
      const pos = index.positions[p]!;
      if (this.used[base + pos] === 0) out.push(gpus[pos]!.index);
    }
    return out.sort((a, b) => a - b);
  }

  holds(keys: readonly string[], i: number): boolean {
    for (const key of keys) if (this.holders.get(key)?.has(i)) return true;
    return false;
  }

  /** Whether the GPU at position `pos` of node i is given to a shard. */
  taken(i: number, pos: number): boolean {
    return this.used[this.gpuStart[i]! + pos] === 1;
  }

  /**
   * Records a placed shard: its GPUs taken (and the node refiled in every
   * index), its RAM claimed (CPU profiles), the disk its weights will use
   * where the node did not hold them, and the node marked as holding them,
   * so later placements see all of it.
   */
  claim(shape: ProfileShape, keys: readonly string[], i: number, gpuIndices: readonly number[]): void {
    const entry = this.entries[i]!;
    const base = this.gpuStart[i]!;
    for (const index of gpuIndices) {
      const pos = positionOfGpu(entry.gpus, index);
      if (pos === -1 || this.used[base + pos] === 1) {
        throw new IllegalStateError(
          `placement tried to give GPU ${index} of node ${entry.id} twice; this is a bug in placement`,
          {
            node: entry.id,
            gpu: index,
          },
        );
      }
      this.used[base + pos] = 1;
    }
    if (gpuIndices.length > 0) {
      for (const index of this.indexes.values()) {
        const k = index.kOf[i]!;
        if (k === -1) continue;
        const before = index.freeCount[k]!;
        const after = this.countFree(index, k);
        if (after === before) continue;
        index.freeCount[k] = after;
        const from = index.buckets[before]!;
        from.splice(lowerBound(from, k), 1);
        const to = index.buckets[after]!;
        to.splice(lowerBound(to, k), 0, k);
      }
    }
    if (!Number.isNaN(shape.memoryBytes)) this.memoryFreeBytes[i] = this.memoryFreeBytes[i]! - shape.memoryBytes;
    if (!Number.isNaN(shape.diskBytes) && !this.holds(keys, i))
      this.diskFreeBytes[i] = this.diskFreeBytes[i]! - shape.diskBytes;
    for (const key of keys) {
      let set = this.holders.get(key);
      if (!set) this.holders.set(key, (set = new Set()));
      set.add(i);
    }
  }
}

function positionOfGpu(gpus: readonly PlacementGpu[], index: number): number {
  for (let pos = 0; pos < gpus.length; pos++) if (gpus[pos]!.index === index) return pos;
  return -1;
}

/** The first position in an ascending list whose value is not below `value`. */
function lowerBound(list: readonly number[], value: number): number {
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (list[mid]! < value) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
