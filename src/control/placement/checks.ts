// Every check of one node against one profile, each failure a Rejection with
// a sentence an operator can act on. This is the slow, thorough path: it runs
// only when a request fits nowhere (place's fast path answers "does it fit"
// from cached counts without building a word). The two must agree exactly; a
// property test holds them to it.
import { labelMismatches } from './label-selector.js';
import type { PlacementState, ProfileShape } from './state.js';
import type { PlacementGpu, PlacementNote, Rejection, RejectionCode } from './types.js';
import { formatBytes, gpuNoun, plural, shortList } from './wording.js';

/** What the checks need to know about the request beyond the profile, in node positions. */
export interface RequestContext {
  /** Weights keys; a node holding any of them needs no disk for the weights. */
  readonly keys: readonly string[];
  readonly excluded: ReadonlySet<number>;
}

type Base = Pick<Rejection, 'profile' | 'pool'>;

function base(shape: ProfileShape): Base {
  const p = shape.profile;
  return p.pool === undefined ? { profile: p.name } : { profile: p.name, pool: p.pool };
}

/** The rejection of a whole profile whose selector does not parse. */
export function poolInvalidRejection(shape: ProfileShape): Rejection {
  return {
    ...base(shape),
    code: 'pool_invalid',
    dimension: 'profile',
    reason: `${shape.selectorProblem ?? 'the pool selector does not parse'}; fix the profile's pool in the catalog`,
  };
}

/** Appends every failed check of node `i` to `out`; returns how many there were (0 = fits on its own). */
export function nodeRejections(
  state: PlacementState,
  shape: ProfileShape,
  ctx: RequestContext,
  i: number,
  out: Rejection[],
): number {
  const before = out.length;
  const entry = state.entries[i]!;
  const node = entry.node;
  const pool = shape.profile.pool;
  const profile = shape.profile.name;
  const push: Push = (code, dimension, reason, quantities) => {
    const r: Rejection =
      pool === undefined
        ? { profile, node: entry.id, code, dimension, reason }
        : { profile, pool, node: entry.id, code, dimension, reason };
    out.push(quantities ? Object.assign(r, quantities) : r);
  };

  if (ctx.excluded.has(i))
    push('excluded', 'node', 'node is excluded from this placement (the replica is moving off it)');
  if (node.adminState === 'cordoned')
    push('cordoned', 'node', 'node is cordoned, so it takes no new replicas; uncordon it to allow them');
  if (node.pendingApproval)
    push(
      'pending_approval',
      'node',
      `node waits for an admin's approval (it is new, or its GPUs changed), so it takes no new replicas; llmgw ctl nodes approve ${entry.id} admits it`,
    );
  if (node.adminState === 'draining')
    push('draining', 'node', 'node is draining: it takes no new replicas and its replicas are moving off');
  if (node.liveness === 'stale')
    push('stale', 'node', "node's agent has not reported recently; it takes no new replicas until it does");
  if (node.liveness === 'lost')
    push('lost', 'node', 'node is lost: its agent stopped reporting; check the machine and its agent');

  if (shape.selector) {
    const mismatches = labelMismatches(shape.selector, node.labels);
    if (mismatches.length > 0)
      push('pool_mismatch', 'pool', `node is not in pool "${shape.selector.text}": ${mismatches.join('; ')}`);
  }

  const engine = shape.profile.engine;
  if (!node.engines.includes(engine)) {
    const has = node.engines.length === 0 ? 'none reported' : `it has ${node.engines.join(', ')}`;
    push(
      'engine_missing',
      'engine',
      `engine ${engine} is not available on this node (${has}); install it or use a profile with another engine`,
    );
  }

  if (shape.gpus > 0) gpuRejection(state, shape, i, push);

  if (!Number.isNaN(shape.memoryBytes)) {
    const free = state.memoryFreeBytes[i]!;
    if (!Number.isNaN(free) && free < shape.memoryBytes) {
      const total = node.memoryTotalBytes;
      const freeText = `${formatBytes(Math.max(0, free))}${total === undefined ? '' : ` of ${formatBytes(total)}`}`;
      push('ram', 'memory', `needs ${formatBytes(shape.memoryBytes)} of RAM; ${freeText} is free`, {
        unit: 'bytes',
        requested: shape.memoryBytes,
        free: Math.max(0, free),
        ...(total === undefined ? {} : { capacity: total }),
      });
    }
  }

  // A node holding the weights needs no room for them; without this the node
  // best placed to run a model is the one most likely to be rejected.
  if (!Number.isNaN(shape.diskBytes) && !state.holds(ctx.keys, i)) {
    const free = state.diskFreeBytes[i]!;
    if (!Number.isNaN(free) && free < shape.diskBytes) {
      push(
        'disk',
        'disk',
        `needs ${formatBytes(shape.diskBytes)} of local disk for the weights; ${formatBytes(Math.max(0, free))} is free where the cache lives (shared filesystems do not count)`,
        { unit: 'bytes', requested: shape.diskBytes, free: Math.max(0, free) },
      );
    }
  }
  return out.length - before;
}

type Quantities = Pick<Rejection, 'unit' | 'requested' | 'free' | 'capacity'>;
type Push = (code: RejectionCode, dimension: Rejection['dimension'], reason: string, quantities?: Quantities) => void;

/**
 * The GPU check, one rejection at most. Each GPU falls out at the first stage
 * it fails (class, memory, health, taken); the code names the stage where the
 * node dropped below what the profile asks for, and the sentence names every
 * GPU that did not count and why, unhealthy ones with their problem.
 */
function gpuRejection(state: PlacementState, shape: ProfileShape, i: number, push: Push): void {
  const entry = state.entries[i]!;
  const want = shape.gpuRequestText;
  if (!entry.gpusKnown) {
    push('gpus_unknown', 'gpus', `needs ${want}, but the node did not report its GPUs; check its agent's GPU probe`, {
      unit: 'gpus',
      requested: shape.gpus,
    });
    return;
  }
  const gpus = entry.gpus;
  if (gpus.length === 0) {
    push('no_gpus', 'gpus', `needs ${want}; the node has no GPUs`, {
      unit: 'gpus',
      requested: shape.gpus,
      free: 0,
      capacity: 0,
    });
    return;
  }
  // Allocated only for a node with GPUs of another class: most rejected nodes have none.
  let wrongClass: Map<string, number> | null = null;
  let wrongClassCount = 0;
  let lowMemory = 0;
  const unhealthy: PlacementGpu[] = [];
  let inUse = 0;
  let free = 0;
  for (let pos = 0; pos < gpus.length; pos++) {
    const gpu = gpus[pos]!;
    if (shape.classes.length > 0 && (gpu.class === undefined || !shape.classes.includes(gpu.class))) {
      const label = gpu.class ?? '';
      wrongClass ??= new Map();
      wrongClass.set(label, (wrongClass.get(label) ?? 0) + 1);
      wrongClassCount++;
    } else if (shape.gpuMemoryMiB > 0 && gpu.memoryTotalMiB !== undefined && gpu.memoryTotalMiB < shape.gpuMemoryMiB) {
      lowMemory++;
    } else if (!gpu.healthy) {
      unhealthy.push(gpu);
    } else if (state.taken(i, pos)) {
      inUse++;
    } else {
      free++;
    }
  }
  if (free >= shape.gpus) return;
  const total = gpus.length;
  let code: RejectionCode = 'gpus_free';
  if (total - wrongClassCount < shape.gpus) code = 'gpu_class';
  else if (total - wrongClassCount - lowMemory < shape.gpus) code = 'gpu_memory';
  else if (total - wrongClassCount - lowMemory - unhealthy.length < shape.gpus) code = 'gpu_unhealthy';

  const details: string[] = [];
  for (const gpu of unhealthy) details.push(`GPU ${gpu.index} is unhealthy${gpu.problem ? `: ${gpu.problem}` : ''}`);
  if (inUse > 0) details.push(`${inUse} ${plural(inUse, 'is', 'are')} in use`);
  for (const [cls, n] of [...(wrongClass ?? new Map<string, number>())].sort((a, b) => (a[0] < b[0] ? -1 : 1))) {
    details.push(
      cls === '' ? `${n} ${plural(n, 'reports', 'report')} no class` : `${n} ${plural(n, 'is', 'are')} ${cls}`,
    );
  }
  if (lowMemory > 0)
    details.push(`${lowMemory} ${plural(lowMemory, 'has', 'have')} less than ${shape.profile.gpuMemoryGiB} GiB`);
  const freeText = free === 0 ? 'none is free' : `${free} ${plural(free, 'is', 'are')} free`;
  push(code, 'gpus', `needs ${want}; ${freeText}${details.length > 0 ? ` (${details.join('; ')})` : ''}`, {
    unit: 'gpus',
    requested: shape.gpus,
    free,
    capacity: total,
  });
}

export function noFabricRejection(state: PlacementState, shape: ProfileShape, i: number): Rejection {
  return {
    ...base(shape),
    node: state.entries[i]!.id,
    code: 'no_fabric',
    dimension: 'fabric',
    reason: `fits on its own, but is on no fabric, and a ${shape.shards}-node replica needs nodes that share one`,
  };
}

/** "fabric ib0 has 1 node with 8 free h100-80gb GPUs; needs 2". */
export function fabricRejection(shape: ProfileShape, fabric: string, fitting: number): Rejection {
  const nodes = `${fitting} ${plural(fitting, 'node', 'nodes')}`;
  const what =
    shape.gpus > 0
      ? `${nodes} with ${shape.gpus} ${gpuNoun(shape.profile, shape.gpus, 'free')}`
      : `${nodes} that ${plural(fitting, 'fits', 'fit')}`;
  return {
    ...base(shape),
    fabric,
    code: 'fabric',
    dimension: 'fabric',
    unit: 'nodes',
    requested: shape.shards,
    free: fitting,
    reason: `fabric ${fabric} has ${what}; needs ${shape.shards}`,
  };
}

/**
 * Checks a profile could not make because a size was unknown, over the given
 * node positions: never rejections (unknown is not "none"), but an operator
 * reading why something landed where it did, or failed to start, should know.
 */
export function notesFor(
  state: PlacementState,
  shape: ProfileShape,
  ctx: RequestContext,
  positions: Iterable<number>,
): PlacementNote[] {
  const profile = shape.profile.name;
  const notes: PlacementNote[] = [];
  const cpu = shape.gpus === 0;
  const checkDisk = !Number.isNaN(shape.diskBytes);
  const checkMemory = !Number.isNaN(shape.memoryBytes);
  let diskUnknown: string[] | null = null;
  let memoryUnknown: string[] | null = null;
  for (const i of positions) {
    if (checkDisk && Number.isNaN(state.diskFreeBytes[i]!) && !state.holds(ctx.keys, i))
      (diskUnknown ??= []).push(state.entries[i]!.id);
    if (checkMemory && Number.isNaN(state.memoryFreeBytes[i]!)) (memoryUnknown ??= []).push(state.entries[i]!.id);
  }
  if (!checkDisk) {
    notes.push({
      profile,
      code: 'disk_size_unknown',
      text: `disk was not checked for profile ${profile}: it does not say how large the weights are (set disk_gb)`,
    });
  } else if (diskUnknown) {
    notes.push({
      profile,
      code: 'disk_free_unknown',
      nodes: diskUnknown,
      text: `disk was not checked for profile ${profile} on ${diskUnknown.length} ${plural(diskUnknown.length, 'node', 'nodes')} that did not report free local disk: ${shortList(diskUnknown)}`,
    });
  }
  if (cpu && shape.profile.memoryGiB === undefined) {
    notes.push({
      profile,
      code: 'memory_size_unknown',
      text: `RAM was not checked for profile ${profile}: it does not say how much it needs (set memory_gb)`,
    });
  } else if (memoryUnknown) {
    notes.push({
      profile,
      code: 'memory_free_unknown',
      nodes: memoryUnknown,
      text: `RAM was not checked for profile ${profile} on ${memoryUnknown.length} ${plural(memoryUnknown.length, 'node', 'nodes')} that did not report free memory: ${shortList(memoryUnknown)}`,
    });
  }
  return notes;
}
