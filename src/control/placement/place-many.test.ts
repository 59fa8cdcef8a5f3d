// Invariants of a placement pass, checked over many made-up fleets from a
// seeded generator (a failure names its seed, so it can be replayed). The
// costly failure these guard against is two shards handed the same GPU: two
// engines fighting over one device's memory, both crashing at load.
import { describe, expect, it } from 'vitest';
import { nodeRejections } from './checks.js';
import { matchesLabels, parseLabelSelector } from './label-selector.js';
import { fitsByIndex, placeMany, placeManyWith } from './place.js';
import { PlacementState } from './state.js';
import {
  createPrng,
  pick,
  randomInt,
  syntheticFleet,
  syntheticNode,
  syntheticRequests,
  syntheticWeightsKey,
  type Prng,
} from './synthetic.js';
import type { PlacementProfile, PlacementRequest, PlacementSnapshot } from './types.js';

const GiB = 2 ** 30;
const SEEDS = Array.from({ length: 40 }, (_, i) => i + 1);
const POOLS = [undefined, undefined, 'pool=h100-80gb', 'zone in (z0,z1)', '!spot', 'pool!=l40s-48gb,zone'];
const CLASSES = ['h100-80gb', 'a100-80gb', 'a100-40gb', 'l40s-48gb'];

function randomFleet(seed: number): PlacementSnapshot {
  const prng = createPrng(seed * 7919);
  return syntheticFleet({
    seed,
    nodeCount: randomInt(prng, 1, 40),
    gpusPerNode: [0, 1, 2, 4, 8, 8],
    mixedClassesPerNode: prng() < 0.5,
    fabricCount: randomInt(prng, 0, 3),
    cordonedFraction: 0.1,
    drainingFraction: 0.05,
    staleFraction: 0.05,
    lostFraction: 0.05,
    unhealthyGpuFraction: 0.1,
    gpusInUseFraction: 0.3,
    unknownFraction: 0.1,
    weightsKeys: Array.from({ length: 10 }, (_, i) => syntheticWeightsKey(i)),
    holdFraction: 0.3,
    diskFreeGiB: [0, 400],
    memoryGiB: [16, 256],
  });
}

function randomProfile(prng: Prng, n: number): PlacementProfile {
  const gpus = pick(prng, [0, 1, 1, 2, 4, 8]);
  const classes = prng() < 0.5 ? [] : CLASSES.filter(() => prng() < 0.5);
  const pool = pick(prng, POOLS);
  return {
    name: `p${n}`,
    engine: pick(prng, ['vllm', 'vllm', 'llamacpp', 'sglang', 'builtin']),
    gpus,
    shards: gpus > 0 && prng() < 0.2 ? 2 : 1,
    ...(gpus > 0 && classes.length > 0 ? { gpuClasses: classes } : {}),
    ...(gpus > 0 && prng() < 0.3 ? { gpuMemoryGiB: pick(prng, [40, 70]) } : {}),
    ...(gpus === 0 && prng() < 0.8 ? { memoryGiB: randomInt(prng, 4, 128) } : {}),
    ...(prng() < 0.8 ? { diskGiB: randomInt(prng, 5, 300) } : {}),
    ...(pool === undefined ? {} : { pool }),
  };
}

function randomRequests(prng: Prng, snapshot: PlacementSnapshot): PlacementRequest[] {
  const out: PlacementRequest[] = [];
  const ids = snapshot.nodes.map((n) => n.id);
  for (let m = 0; m < randomInt(prng, 1, 12); m++) {
    const profiles = Array.from({ length: randomInt(prng, 1, 3) }, (_, n) => randomProfile(prng, n));
    const copies = randomInt(prng, 1, 4);
    for (let c = 0; c < copies; c++) {
      out.push({
        model: `m${m}`,
        weightsKey: syntheticWeightsKey(m),
        profiles,
        ...(ids.length > 0 && prng() < 0.2 ? { excludeNodes: [pick(prng, ids)] } : {}),
      });
    }
  }
  return out;
}

describe('a placement pass, over random fleets', () => {
  it('never gives one GPU to two shards, nor a GPU already in use, unhealthy or of the wrong kind', () => {
    let placedShards = 0;
    for (const seed of SEEDS) {
      const snapshot = randomFleet(seed);
      const prng = createPrng(seed);
      const requests = [...randomRequests(prng, snapshot), ...syntheticRequests({ seed, modelCount: 6 })];
      const results = placeMany(snapshot, requests);
      const byId = new Map(snapshot.nodes.map((n) => [n.id, n]));
      const given = new Set<string>();
      for (const node of snapshot.nodes) for (const g of node.gpusInUse) given.add(`${node.id}/${g}`);
      results.forEach((result, r) => {
        if (!result.ok) return;
        const req = requests[r]!;
        const profile = req.profiles.find((p) => p.name === result.placement.profile)!;
        const where = `seed ${seed}, request ${r} (${req.model}/${profile.name})`;
        expect(result.placement.shards, where).toHaveLength(profile.shards ?? 1);
        expect(new Set(result.placement.shards.map((s) => s.nodeId)).size, `${where}: shards on distinct nodes`).toBe(
          profile.shards ?? 1,
        );
        for (const shard of result.placement.shards) {
          placedShards++;
          const node = byId.get(shard.nodeId)!;
          expect([node.adminState, node.liveness], `${where}: ${node.id} takes new replicas`).toEqual(['ready', 'up']);
          expect(node.engines, where).toContain(profile.engine);
          expect(req.excludeNodes ?? [], `${where}: excluded node used`).not.toContain(node.id);
          if (profile.pool)
            expect(matchesLabels(parseLabelSelector(profile.pool), node.labels), `${where}: pool`).toBe(true);
          if ((profile.shards ?? 1) > 1) {
            expect(
              node.fabrics.map((f) => f.name),
              `${where}: on the replica's fabric`,
            ).toContain(result.placement.fabric);
          }
          expect(shard.gpuIndices, where).toHaveLength(profile.gpus);
          for (const index of shard.gpuIndices) {
            const key = `${node.id}/${index}`;
            expect(given.has(key), `${where}: GPU ${key} given twice`).toBe(false);
            given.add(key);
            const gpu = node.gpus?.find((g) => g.index === index);
            expect(gpu?.healthy, `${where}: GPU ${key} exists and is healthy`).toBe(true);
            if (profile.gpuClasses?.length) expect(profile.gpuClasses, where).toContain(gpu!.class);
            if (profile.gpuMemoryGiB && gpu!.memoryTotalMiB !== undefined) {
              expect(gpu!.memoryTotalMiB, where).toBeGreaterThanOrEqual(profile.gpuMemoryGiB * 1024);
            }
          }
        }
      });
    }
    expect(placedShards, 'the generator should produce fleets where things fit').toBeGreaterThan(200);
  });

  it('the bucket scan chooses exactly what scoring every node would', () => {
    for (const seed of SEEDS) {
      const snapshot = randomFleet(seed);
      const requests = [...randomRequests(createPrng(seed), snapshot), ...syntheticRequests({ seed, modelCount: 6 })];
      expect(placeManyWith(snapshot, requests, {}), `seed ${seed}`).toEqual(
        placeManyWith(snapshot, requests, { fullScan: true }),
      );
    }
  });

  it('the fast path and the full checks agree on every node: fits exactly when nothing is rejected', () => {
    let fits = 0;
    let rejected = 0;
    for (const seed of SEEDS) {
      const snapshot = randomFleet(seed);
      const prng = createPrng(seed + 1000);
      const state = new PlacementState(snapshot);
      for (const req of randomRequests(prng, snapshot)) {
        for (const profile of req.profiles) {
          const shape = state.shape(profile);
          if (shape.selectorProblem !== null) continue;
          const excluded = new Set((req.excludeNodes ?? []).map((id) => state.positionById.get(id)!));
          const keys = [req.weightsKey as string];
          state.entries.forEach((entry, i) => {
            const quick = fitsByIndex(state, req, profile, entry.id);
            const reasons = nodeRejections(state, shape, { keys, excluded }, i, []);
            expect(
              quick,
              `seed ${seed}, ${profile.name} on ${entry.id}: fast path ${quick}, full checks found ${reasons} rejections`,
            ).toBe(reasons === 0);
            if (quick) fits++;
            else rejected++;
          });
        }
      }
    }
    expect(fits, 'some nodes should fit').toBeGreaterThan(100);
    expect(rejected, 'some nodes should be rejected').toBeGreaterThan(100);
  });
});

describe('a placement pass keeps account as it goes', () => {
  const model = (name: string, diskGiB: number): PlacementRequest => ({
    model: name,
    weightsKey: name,
    profiles: [{ name: 'gpu1', engine: 'vllm', gpus: 1, diskGiB }],
  });

  it('disk taken by one model is not offered to the next', () => {
    const nodes = [
      syntheticNode('a', { localDiskFreeBytes: 100 * GiB }),
      syntheticNode('b', { localDiskFreeBytes: 100 * GiB, gpusInUse: [0] }),
    ];
    const [first, second] = placeMany({ nodes }, [model('x', 60), model('y', 60)]);
    expect(first!.ok && first!.placement.shards[0]!.nodeId, 'x packs onto b, the tighter node').toBe('b');
    expect(second!.ok && second!.placement.shards[0]!.nodeId, 'b has 40 GiB left, so y goes to a').toBe('a');
  });

  it('a second replica of the same model on a node needs no more disk: the weights are there', () => {
    const nodes = [syntheticNode('a', { localDiskFreeBytes: 100 * GiB })];
    const results = placeMany({ nodes }, [model('x', 60), model('x', 60)]);
    expect(results.map((r) => r.ok)).toEqual([true, true]);
  });

  it('RAM claimed by one CPU replica is not offered to the next', () => {
    const cpu = (name: string): PlacementRequest => ({
      model: name,
      weightsKey: name,
      profiles: [{ name: 'cpu', engine: 'builtin', gpus: 0, memoryGiB: 40 }],
    });
    const nodes = [syntheticNode('a', { gpus: [], memoryFreeBytes: 64 * GiB })];
    const results = placeMany({ nodes }, [cpu('x'), cpu('y')]);
    expect(results.map((r) => r.ok)).toEqual([true, false]);
    expect(!results[1]!.ok && results[1]!.rejections[0]!.reason).toBe('needs 40 GiB of RAM; 24 GiB of 1 TiB is free');
  });

  it('GPUs taken by a replica are in use for the next, which then reads why', () => {
    const req: PlacementRequest = { model: 'x', weightsKey: 'x', profiles: [{ name: 'tp8', engine: 'vllm', gpus: 8 }] };
    const results = placeMany({ nodes: [syntheticNode('a')] }, [req, req]);
    expect(results[0]!.ok).toBe(true);
    expect(!results[1]!.ok && results[1]!.rejections.map((r) => r.reason)).toEqual([
      'needs 8 GPUs; none is free (8 are in use)',
    ]);
  });
});
