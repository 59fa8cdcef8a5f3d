// Placement's speed on a large made-up fleet, against the targets a
// reconciler pass needs: a catalog placed from empty, an idle pass that
// re-checks every replica, and explain for a model that fits nowhere.
// Plain JS over dist/ so it runs with no TypeScript loader:
//
//   npm run build && node bench/placement.mjs [--nodes 2000] [--models 1000] [--warmup 3] [--rounds 7]
//
// A control plane places on every pass for as long as it runs, so the
// targets are for warm code: the warm-up rounds let the JIT settle and are
// not counted (the very first, cold, round is printed on its own). Each
// figure is the median of the counted rounds, in this process's CPU time
// (user + system) rather than wall time: on a shared machine the wall clock
// mostly measures the neighbours. Wall time is printed beside it. (Forcing a
// collection before each figure, with --expose-gc, was tried: it throws away
// what the JIT learned and made every figure worse, so garbage is simply
// kept low.) Exits 1 when a target is missed.
import console from 'node:console';
import process from 'node:process';
import { checkReplicas, explain, place, placeMany } from '../dist/control/placement/index.js';
// The made-up fleets are not part of placement's interface: straight from their module.
import { occupy, syntheticFleet, syntheticRequests, syntheticWeightsKey } from '../dist/control/placement/synthetic.js';
import { arg, measure } from './measure.mjs';

const nodeCount = arg('nodes', 2000);
const modelCount = arg('models', 1000);
const warmup = arg('warmup', 3);
const rounds = arg('rounds', 7);

const TARGET_PLACEMENTS_PER_S = 10_000;
const TARGET_IDLE_PASS_MS = 20;
const TARGET_EXPLAIN_MS = 10;

const weightsKeys = Array.from({ length: modelCount }, (_, i) => syntheticWeightsKey(i));
const snapshot = syntheticFleet({
  seed: 1,
  nodeCount,
  gpusPerNode: 8,
  fabricCount: 4,
  cordonedFraction: 0.05,
  unhealthyGpuFraction: 0.005,
  weightsKeys,
  holdFraction: 0.1,
});
const requests = syntheticRequests({ seed: 1, modelCount, replicas: [1, 3] });
const nowhere = {
  model: 'nowhere',
  weightsKey: 'weights-nowhere',
  profiles: [
    { name: 'h200-tp8', engine: 'vllm', gpus: 8, gpuClasses: ['h200-141gb'], gpuMemoryGiB: 141, diskGiB: 800 },
    { name: 'cpu-huge', engine: 'builtin', gpus: 0, memoryGiB: 8192, diskGiB: 800 },
  ],
};

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

// The quick operations run several times a round, so their medians rest on
// enough samples to say something on a busy machine.
const SAMPLES_PER_ROUND = 5;
const cpuMs = { place: [], idle: [], fail: [], explain: [] };
const wallMs = { place: [], idle: [], fail: [], explain: [] };
const cold = {};
let placed = 0;
let failed = 0;
let lastExplain = null;
let idleProblems = 0;

function record(name, m, round) {
  if (round === 0 && cold[name] === undefined) cold[name] = m.cpuMs;
  if (round < warmup) return;
  cpuMs[name].push(m.cpuMs);
  wallMs[name].push(m.wallMs);
}

for (let round = 0; round < warmup + rounds; round++) {
  const many = measure(() => placeMany(snapshot, requests));
  record('place', many, round);
  const placements = [];
  const replicas = [];
  many.value.forEach((r, i) => {
    if (!r.ok) return;
    placements.push(r.placement);
    replicas.push({ id: `r${i}`, model: requests[i].model, fabric: r.placement.fabric, shards: r.placement.shards });
  });
  placed = placements.length;
  failed = many.value.length - placed;
  const after = occupy(snapshot, placements);

  for (let s = 0; s < SAMPLES_PER_ROUND; s++) {
    const idle = measure(() => checkReplicas(after, replicas));
    idleProblems = idle.value.length;
    record('idle', idle, round);

    const failure = measure(() => place(after, nowhere));
    record('fail', failure, round);
    if (failure.value.ok) throw new Error('the nowhere model was placed; the benchmark fleet is not what it should be');
    const r = failure.value;
    const summary = measure(() =>
      explain(nowhere.model, r.rejections, { nodeCount: r.nodeCount, profiles: nowhere.profiles, notes: r.notes }),
    );
    record('explain', summary, round);
    lastExplain = summary.value;
  }
}

const placementsPerS = placed / (median(cpuMs.place) / 1000);
const rows = [
  [
    'placements/s (placeMany from empty)',
    placementsPerS,
    `>= ${TARGET_PLACEMENTS_PER_S}`,
    placementsPerS >= TARGET_PLACEMENTS_PER_S,
  ],
  [
    'idle pass ms (checkReplicas, all replicas)',
    median(cpuMs.idle),
    `< ${TARGET_IDLE_PASS_MS}`,
    median(cpuMs.idle) < TARGET_IDLE_PASS_MS,
  ],
  [
    'explain ms (summary of a model that fits nowhere)',
    median(cpuMs.explain),
    `< ${TARGET_EXPLAIN_MS}`,
    median(cpuMs.explain) < TARGET_EXPLAIN_MS,
  ],
  ['no-fit place ms (every check, every node, with reasons)', median(cpuMs.fail), '(no target)', true],
];

console.log(
  `fleet: ${nodeCount} nodes x 8 GPUs, ${modelCount} models, ${requests.length} replicas asked for; ${placed} placed, ${failed} did not fit`,
);
console.log(
  `first round (cold, CPU ms): placeMany ${cold.place.toFixed(1)}, idle ${cold.idle.toFixed(2)}, ` +
    `no-fit place ${cold.fail.toFixed(1)}, explain ${cold.explain.toFixed(2)}`,
);
console.log(
  `medians over ${rounds} rounds after ${warmup} warm-up rounds (CPU time; ${SAMPLES_PER_ROUND} samples a round for the quick ones):`,
);
for (const [label, value, target, ok] of rows) {
  console.log(
    `  ${label.padEnd(58)} ${value.toFixed(value >= 100 ? 0 : 2).padStart(10)}  target ${target.padEnd(10)} ${ok ? 'ok' : 'MISSED'}`,
  );
}
console.log(
  `  wall ms (medians): placeMany ${median(wallMs.place).toFixed(1)}, idle ${median(wallMs.idle).toFixed(2)}, ` +
    `no-fit place ${median(wallMs.fail).toFixed(1)}, explain ${median(wallMs.explain).toFixed(2)}`,
);
if (idleProblems !== 0)
  console.log(`  the idle pass found ${idleProblems} problems; it should find none when nothing changed`);
console.log('explain:');
console.log(lastExplain.text.replace(/^/gm, '  '));

process.exitCode = rows.every((r) => r[3]) && idleProblems === 0 ? 0 : 1;
