// Made-up fleets and catalogs for placement's property tests and its
// benchmark (bench/placement.mjs), from a seeded generator so that every run
// sees the same fleet and a failure can be replayed from its seed. Lives in
// src rather than test/ so the benchmark can import it from dist/.
import { GiB } from '../../units/index.js';
import type {
  Placement,
  PlacementGpu,
  PlacementNode,
  PlacementProfile,
  PlacementRequest,
  PlacementSnapshot,
} from './types.js';

/** Returns numbers in [0, 1), the same sequence for the same seed (mulberry32). */
export type Prng = () => number;

export function createPrng(seed: number): Prng {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** An integer in [min, max]. */
export function randomInt(prng: Prng, min: number, max: number): number {
  return min + Math.floor(prng() * (max - min + 1));
}

export function pick<T>(prng: Prng, items: readonly T[]): T {
  return items[Math.floor(prng() * items.length)]!;
}

/** A shuffled copy (Fisher–Yates). */
export function shuffled<T>(prng: Prng, items: readonly T[]): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(prng() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

/** `count` healthy GPUs of one class, indices 0…count-1. Default: H100 80GB. */
export function syntheticGpus(count: number, cls = 'h100-80gb', memoryMiB = 81_559): PlacementGpu[] {
  return Array.from({ length: count }, (_, index) => ({ index, class: cls, memoryTotalMiB: memoryMiB, healthy: true }));
}

/**
 * One node for a hand-written test: ready, up, 8 free healthy H100s, 1 TiB
 * of RAM free of 1 TiB, 2 TiB of local disk free, no weights, no fabric,
 * every engine; `overrides` replace any of it.
 */
export function syntheticNode(id: string, overrides: Partial<PlacementNode> = {}): PlacementNode {
  return {
    id,
    labels: {},
    adminState: 'ready',
    liveness: 'up',
    gpus: syntheticGpus(8),
    gpusInUse: [],
    memoryTotalBytes: 1024 * GiB,
    memoryFreeBytes: 1024 * GiB,
    localDiskFreeBytes: 2048 * GiB,
    weightsHeld: [],
    fabrics: [],
    engines: ['vllm', 'llamacpp', 'sglang', 'builtin', 'sim'],
    ...overrides,
  };
}

export interface SyntheticGpuClass {
  readonly name: string;
  readonly memoryMiB: number;
  /** Relative share of nodes (or GPUs, with mixedClassesPerNode). */
  readonly weight: number;
}

export const DEFAULT_GPU_CLASSES: readonly SyntheticGpuClass[] = [
  { name: 'h100-80gb', memoryMiB: 81_559, weight: 4 },
  { name: 'a100-80gb', memoryMiB: 81_920, weight: 3 },
  { name: 'a100-40gb', memoryMiB: 40_960, weight: 2 },
  { name: 'l40s-48gb', memoryMiB: 46_068, weight: 1 },
];

export interface SyntheticFleetOptions {
  readonly seed: number;
  readonly nodeCount: number;
  /** GPUs per node; a list is picked from per node (0 = a CPU node). Default 8. */
  readonly gpusPerNode?: number | readonly number[];
  readonly classes?: readonly SyntheticGpuClass[];
  /** Each GPU draws its own class instead of one per node. Default false. */
  readonly mixedClassesPerNode?: boolean;
  /** Fabrics named ib0…; each node joins one (sometimes two). 0 = none. Default 4. */
  readonly fabricCount?: number;
  /** Shares of nodes in each state; all default 0. */
  readonly cordonedFraction?: number;
  readonly drainingFraction?: number;
  readonly staleFraction?: number;
  readonly lostFraction?: number;
  /** Share of GPUs reported unhealthy. Default 0. */
  readonly unhealthyGpuFraction?: number;
  /** Share of GPUs already given to shards. Default 0. */
  readonly gpusInUseFraction?: number;
  /** Share of nodes whose GPUs, RAM and disk are each, independently, not reported. Default 0. */
  readonly unknownFraction?: number;
  /** Weights keys nodes may hold. */
  readonly weightsKeys?: readonly string[];
  /** Share of nodes holding some of weightsKeys. Default 0. */
  readonly holdFraction?: number;
  /** How many keys a holding node holds. Default 3. */
  readonly weightsPerHolder?: number;
  /** Local disk free per node, GiB, drawn uniformly. Default [500, 4000]. */
  readonly diskFreeGiB?: readonly [number, number];
  /** RAM per node, GiB, drawn uniformly. Default [512, 2048]. */
  readonly memoryGiB?: readonly [number, number];
}

function weighted(prng: Prng, classes: readonly SyntheticGpuClass[]): SyntheticGpuClass {
  const total = classes.reduce((s, c) => s + c.weight, 0);
  let r = prng() * total;
  for (const c of classes) {
    r -= c.weight;
    if (r < 0) return c;
  }
  return classes[classes.length - 1]!;
}

function share(prng: Prng, fraction: number | undefined): boolean {
  return fraction !== undefined && fraction > 0 && prng() < fraction;
}

export function syntheticFleet(options: SyntheticFleetOptions): PlacementSnapshot {
  const prng = createPrng(options.seed);
  const classes = options.classes ?? DEFAULT_GPU_CLASSES;
  const fabricCount = options.fabricCount ?? 4;
  const width = String(options.nodeCount).length;
  const nodes: PlacementNode[] = [];
  for (let n = 0; n < options.nodeCount; n++) {
    const gpuCount =
      typeof options.gpusPerNode === 'number'
        ? options.gpusPerNode
        : options.gpusPerNode
          ? pick(prng, options.gpusPerNode)
          : 8;
    const nodeClass = weighted(prng, classes);
    const gpus: PlacementGpu[] = [];
    const gpusInUse: number[] = [];
    for (let index = 0; index < gpuCount; index++) {
      const cls = options.mixedClassesPerNode ? weighted(prng, classes) : nodeClass;
      const healthy = !share(prng, options.unhealthyGpuFraction);
      gpus.push(
        healthy
          ? { index, class: cls.name, memoryTotalMiB: cls.memoryMiB, healthy }
          : {
              index,
              class: cls.name,
              memoryTotalMiB: cls.memoryMiB,
              healthy,
              problem: `${randomInt(prng, 1, 40)} uncorrectable ECC errors`,
            },
      );
      if (share(prng, options.gpusInUseFraction)) gpusInUse.push(index);
    }
    // Admin state and liveness are independent: a cordoned node can be lost too.
    const adminRoll = prng();
    const livenessRoll = prng();
    const cordoned = options.cordonedFraction ?? 0;
    const stale = options.staleFraction ?? 0;
    const adminState =
      adminRoll < cordoned ? 'cordoned' : adminRoll < cordoned + (options.drainingFraction ?? 0) ? 'draining' : 'ready';
    const liveness =
      livenessRoll < stale ? 'stale' : livenessRoll < stale + (options.lostFraction ?? 0) ? 'lost' : 'up';
    const [memLow, memHigh] = options.memoryGiB ?? [512, 2048];
    const memoryTotalBytes = randomInt(prng, memLow, memHigh) * GiB;
    const memoryFreeBytes = Math.floor(memoryTotalBytes * (0.5 + prng() / 2));
    const [diskLow, diskHigh] = options.diskFreeGiB ?? [500, 4000];
    const localDiskFreeBytes = randomInt(prng, diskLow, diskHigh) * GiB;
    const fabrics =
      fabricCount === 0
        ? []
        : [{ name: `ib${n % fabricCount}`, address: `10.${n % fabricCount}.${n >> 8}.${n & 255}` }];
    if (fabricCount > 1 && prng() < 0.05)
      fabrics.push({ name: `ib${(n + 1) % fabricCount}`, address: `10.9.${n >> 8}.${n & 255}` });
    const engines = ['vllm', 'sim', 'builtin'];
    if (prng() < 0.5) engines.push('llamacpp');
    if (prng() < 0.3) engines.push('sglang');
    const weightsHeld: string[] = [];
    if (options.weightsKeys && options.weightsKeys.length > 0 && share(prng, options.holdFraction)) {
      for (let w = 0; w < (options.weightsPerHolder ?? 3); w++) weightsHeld.push(pick(prng, options.weightsKeys));
    }
    const labels: Record<string, string> = { pool: gpuCount === 0 ? 'cpu' : nodeClass.name, zone: `z${n % 4}` };
    if (prng() < 0.1) labels.spot = 'true';
    const unknownGpus = share(prng, options.unknownFraction);
    const unknownMemory = share(prng, options.unknownFraction);
    const unknownDisk = share(prng, options.unknownFraction);
    nodes.push({
      id: `node-${String(n).padStart(width, '0')}`,
      labels,
      adminState,
      liveness,
      gpus: unknownGpus ? undefined : gpus,
      gpusInUse: unknownGpus ? [] : gpusInUse,
      memoryTotalBytes,
      ...(unknownMemory ? {} : { memoryFreeBytes }),
      ...(unknownDisk ? {} : { localDiskFreeBytes }),
      weightsHeld,
      fabrics,
      engines,
    });
  }
  return { nodes };
}

export interface SyntheticRequestsOptions {
  readonly seed: number;
  readonly modelCount: number;
  /** Replicas asked for per model, drawn uniformly. Default [1, 3]. */
  readonly replicas?: readonly [number, number];
}

/** The weights key of the n-th synthetic model, for SyntheticFleetOptions.weightsKeys. */
export function syntheticWeightsKey(n: number): string {
  return `weights-${n}`;
}

/**
 * A catalog's worth of replica requests, one per replica, a model's replicas
 * next to each other: about half 1-GPU, a quarter TP2, a tenth TP8, a few
 * 2-node TP8, the rest CPU; some with a second profile to fall back on, some
 * with a pool, some with no disk size.
 */
export function syntheticRequests(options: SyntheticRequestsOptions): PlacementRequest[] {
  const prng = createPrng(options.seed ^ 0x5eed);
  const [low, high] = options.replicas ?? [1, 3];
  const width = String(options.modelCount).length;
  const out: PlacementRequest[] = [];
  for (let m = 0; m < options.modelCount; m++) {
    const roll = prng();
    const diskGiB = prng() < 0.1 ? undefined : randomInt(prng, 5, 300);
    const withDisk = (p: PlacementProfile): PlacementProfile => (diskGiB === undefined ? p : { ...p, diskGiB });
    const profiles: PlacementProfile[] = [];
    if (roll < 0.5) {
      profiles.push(
        withDisk({
          name: 'gpu1',
          engine: 'vllm',
          gpus: 1,
          ...(prng() < 0.3 ? { gpuClasses: ['l40s-48gb', 'a100-40gb'] } : {}),
        }),
      );
    } else if (roll < 0.75) {
      profiles.push(
        withDisk({
          name: 'tp2',
          engine: pick(prng, ['vllm', 'sglang']),
          gpus: 2,
          gpuClasses: ['h100-80gb', 'a100-80gb'],
          gpuMemoryGiB: 70,
        }),
      );
    } else if (roll < 0.85) {
      profiles.push(
        withDisk({
          name: 'tp8',
          engine: 'vllm',
          gpus: 8,
          gpuClasses: ['h100-80gb'],
          ...(prng() < 0.3 ? { pool: 'pool=h100-80gb,!spot' } : {}),
        }),
      );
    } else if (roll < 0.88) {
      profiles.push(
        withDisk({ name: 'tp8x2', engine: 'vllm', gpus: 8, shards: 2, gpuClasses: ['h100-80gb', 'a100-80gb'] }),
      );
    } else {
      profiles.push(
        withDisk({
          name: 'cpu',
          engine: pick(prng, ['builtin', 'llamacpp']),
          gpus: 0,
          memoryGiB: randomInt(prng, 8, 64),
        }),
      );
    }
    if (roll < 0.88 && prng() < 0.2)
      profiles.push(withDisk({ name: 'cpu-fallback', engine: 'llamacpp', gpus: 0, memoryGiB: 32 }));
    const model = `model-${String(m).padStart(width, '0')}`;
    const count = randomInt(prng, low, high);
    for (let r = 0; r < count; r++) out.push({ model, weightsKey: syntheticWeightsKey(m), profiles });
  }
  return out;
}

/** The snapshot with the placements' GPUs marked in use: what the inventory would report once they run. */
export function occupy(snapshot: PlacementSnapshot, placements: readonly Placement[]): PlacementSnapshot {
  const extra = new Map<string, number[]>();
  for (const p of placements) {
    for (const s of p.shards) {
      const list = extra.get(s.nodeId);
      if (list) list.push(...s.gpuIndices);
      else extra.set(s.nodeId, [...s.gpuIndices]);
    }
  }
  return {
    nodes: snapshot.nodes.map((node) => {
      const more = extra.get(node.id);
      return more ? { ...node, gpusInUse: [...node.gpusInUse, ...more] } : node;
    }),
  };
}
