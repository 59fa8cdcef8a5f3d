// The control plane's pure work at fleet size: a reconciler pass (from empty,
// idle, and after a node is lost), publishing assignments, folding one
// heartbeat's shard report, node usage, the node and replica views, and a
// filtered page of the node list, on a made-up fleet of --nodes (10,000)
// built in memory (no I/O, no processes). Each operation is also timed on a
// fleet of --base nodes (2,000) in the same run, with the catalog scaled
// alike, and the ratio printed: work that grows with the fleet shows a ratio
// near nodes/base (5), work that scans the fleet per node shows its square
// (25). Plain JS over dist/ so it runs with no TypeScript loader:
//
//   npm run build && node bench/fleet.mjs [--nodes 10000] [--base 2000] [--rounds 5]
//
// Figures are CPU time (user + system), as in bench/placement.mjs: on a
// shared machine wall time mostly measures the neighbours. Each is the
// fastest of --rounds after one warm-up round, not the median: the question
// is how the work grows, and a neighbour or a collection only ever adds to
// a round, so the fastest is the one nearest the work itself (medians swung
// 5x between runs for the replica views). Exits 1 when an operation grows
// faster than MAX_GROWTH × nodes/base, or the idle pass is not idle.
import { spawnSync } from 'node:child_process';
import console from 'node:console';
import process from 'node:process';
import { nodeViews, replicaViews } from '../dist/control/adminapi/views.js';
import { nodeViewPage, parseNodeQuery } from '../dist/control/adminapi/node-query.js';
import { syntheticFleet, syntheticRequests } from '../dist/control/placement/synthetic.js';
import { applyPlan, assignmentsByNode } from '../dist/control/reconciler/apply.js';
import { foldReport, ShardIndex } from '../dist/control/reconciler/fold-report.js';
import { nodeUsageOf } from '../dist/control/reconciler/node-usage.js';
import { planPass } from '../dist/control/reconciler/plan.js';
import { toPlacementNode } from '../dist/control/reconciler/snapshot.js';
import { arg, measure } from './measure.mjs';

// The control plane runs with npm start's Node flags (a 64 MiB young
// generation, see the README's router section); with Node's default, the
// 10,000-node fleet's views outgrow the young generation and time the
// collector instead of the work. BENCH_NODE_FLAGS='' runs with Node's
// defaults, as in bench/router.mjs.
const NODE_FLAGS = (process.env.BENCH_NODE_FLAGS ?? '--max-semi-space-size=64').split(' ').filter(Boolean);
if (!process.env.LLMGW_FLEET_BENCH_CHILD && NODE_FLAGS.length > 0) {
  const child = spawnSync(process.execPath, [...NODE_FLAGS, ...process.argv.slice(1)], {
    stdio: 'inherit',
    env: { ...process.env, LLMGW_FLEET_BENCH_CHILD: '1' },
  });
  process.exit(child.status ?? 1);
}

const nodeCount = arg('nodes', 10_000);
const baseCount = arg('base', 2_000);
const rounds = arg('rounds', 7);
/** Replicas asked for per node: 2 (a fleet of 10,000 runs about 20,000 replicas). */
const MODELS_PER_NODE = 0.5;
/** An operation may grow this much faster than the fleet before it counts as superlinear (noise, caches, GC). */
const MAX_GROWTH = 2;
const NOW = 1_700_000_000_000;
const PAGE_QUERIES = {
  'node list page: ?state=cordoned&limit=50': 'state=cordoned&limit=50',
  'node list page: ?label=zone=z1&q=h100&limit=50, late cursor': 'label=zone=z1&q=h100&limit=50&after=node-0500',
};

/** A fleet, its catalog, and the records of every replica placed and ready. */
function buildFleet(nodes) {
  const snapshot = syntheticFleet({
    seed: 7,
    nodeCount: nodes,
    gpusPerNode: 8,
    fabricCount: 4,
    cordonedFraction: 0.03,
    drainingFraction: 0.005,
    staleFraction: 0.005,
    unhealthyGpuFraction: 0.005,
  });
  const requests = syntheticRequests({ seed: 7, modelCount: Math.round(nodes * MODELS_PER_NODE), replicas: [2, 6] });
  const byModel = new Map();
  for (const r of requests) {
    const m = byModel.get(r.model);
    if (m) m.scaling.min = m.scaling.max += 1;
    else {
      byModel.set(r.model, {
        name: r.model,
        source: `hf://bench/${r.model}`,
        scaling: { min: 1, max: 1 },
        profiles: r.profiles.map((p) => ({
          name: p.name,
          engine: p.engine,
          gpus: p.gpus,
          shards: p.shards ?? 1,
          gpuClasses: p.gpuClasses ?? [],
          gpuMemoryGiB: p.gpuMemoryGiB ?? null,
          memoryGiB: p.memoryGiB ?? null,
          diskGiB: p.diskGiB ?? null,
          pool: p.pool ?? null,
        })),
        // What the agent assignment needs beyond placement.
        aliases: [],
      });
    }
  }
  const models = [...byModel.values()].map((m) => ({
    ...m,
    profiles: m.profiles.map((p) => ({ ...p, args: [], env: {} })),
  }));
  let next = 0;
  const newId = (kind) => `${kind === 'replica' ? 'rep' : 'sh'}-${String(next++).padStart(8, '0')}`;
  const first = planPass(
    { now: NOW, models, nodes: snapshot.nodes, replicas: [] },
    { maxCreatesPerPass: Number.MAX_SAFE_INTEGER },
  );
  const applied = applyPlan([], first, { now: NOW, newId, newSecret: () => 'llmgw-es-bench' });
  const records = applied.records.map((r) => ({
    ...r,
    state: 'ready',
    endpoint: `http://${r.shards[0].nodeId}:8000`,
    shards: r.shards.map((s) => ({ ...s, state: 'ready', endpoint: s.rank === 0 ? `http://${s.nodeId}:8000` : null })),
  }));
  return { snapshot, models, records, placed: records.length, asked: requests.length };
}

/** The inventory's nodes (what the views read) for a placement snapshot: the report an agent would have sent. */
function inventoryOf(snapshot) {
  const nodes = snapshot.nodes.map((n) => ({
    id: n.id,
    hostname: `${n.id}.dc1.example`,
    mgmtAddr: `${n.id}:9090`,
    labels: n.labels,
    adminState: n.adminState,
    approval: 'approved',
    hardwareChange: null,
    agentVersion: '0.1.0',
    lastSeenMs: NOW - 3000,
    report: {
      hostname: `${n.id}.dc1.example`,
      gpus: (n.gpus ?? []).map((g) => ({
        index: g.index,
        class: g.class,
        memory_total_mib: g.memoryTotalMiB,
        problems: g.healthy ? [] : [g.problem ?? 'unhealthy'],
      })),
      memory_total_bytes: n.memoryTotalBytes,
      memory_available_bytes: n.memoryFreeBytes,
      disks: [
        {
          mount_point: '/var/lib/llmgw',
          shared: false,
          free_bytes: n.localDiskFreeBytes ?? 0,
          total_bytes: 4096 * 2 ** 30,
          paths: [],
        },
      ],
      weights: [],
      fabrics: n.fabrics,
      engines: n.engines.map((name) => ({ name })),
    },
  }));
  const liveness = new Map(snapshot.nodes.map((n) => [n.id, n.liveness]));
  return {
    list: () => [...nodes].sort((a, b) => a.id.localeCompare(b.id)),
    get: (id) => nodes.find((n) => n.id === id),
    liveness: (n) => liveness.get(n.id) ?? 'lost',
  };
}

/** The operations, timed on one fleet: name → fastest round's CPU ms; also what a reader needs to trust them. */
function timeFleet(nodes) {
  const built = measure(() => buildFleet(nodes));
  const { snapshot, models, records } = built.value;
  const inventory = inventoryOf(snapshot);
  const modelsByName = new Map(models.map((m) => [m.name, m]));
  const byNode = new Map(snapshot.nodes.map((n) => [n.id, n]));
  const nodeIds = [...byNode.keys()];
  const usage = nodeUsageOf(records);
  const sources = {
    catalog: { models: () => [] },
    inventory,
    now: () => NOW,
    nodeUsage: () => usage,
    replicas: () => records,
  };
  // One node goes lost: its replicas are marked lost and replaced.
  const victim = snapshot.nodes.find((n) => n.liveness === 'up' && usage.has(n.id));
  const afterLoss = snapshot.nodes.map((n) => (n === victim ? { ...n, liveness: 'lost' } : n));
  // A heartbeat's fold: every node in turn reports its shards ready, as they are (nothing changes).
  const statusesByNode = new Map();
  for (const r of records)
    for (const s of r.shards) {
      const list = statusesByNode.get(s.nodeId) ?? [];
      list.push({ shard_id: s.id, replica_id: r.id, state: 'ready', ...(s.endpoint ? { endpoint: s.endpoint } : {}) });
      statusesByNode.set(s.nodeId, list);
    }
  const shardIndex = new ShardIndex();
  const reporters = nodeIds.filter((id) => statusesByNode.has(id)).slice(0, 200);
  const ops = {
    'pass from empty, per replica placed (every one, no cap)': () =>
      planPass(
        { now: NOW, models, nodes: snapshot.nodes, replicas: [] },
        { maxCreatesPerPass: Number.MAX_SAFE_INTEGER },
      ),
    'placement snapshot from the inventory (every node)': () =>
      inventory.list().map((n) => toPlacementNode(n, inventory.liveness(n))),
    'reconciler pass, idle (all placed and ready)': () =>
      planPass({ now: NOW, models, nodes: snapshot.nodes, replicas: records }),
    'reconciler pass, one node lost': () => planPass({ now: NOW, models, nodes: afterLoss, replicas: records }),
    'publish assignments (every node)': () => assignmentsByNode(records, modelsByName, byNode, nodeIds),
    'fold one heartbeat, indexed (avg of 200 nodes)': () => {
      for (const id of reporters) foldReport(records, id, statusesByNode.get(id), NOW, shardIndex.on(records, id));
    },
    'fold one heartbeat, every replica walked (as before)': () => {
      for (const id of reporters) foldReport(records, id, statusesByNode.get(id), NOW);
    },
    'node usage (replicas and GPUs per node)': () => nodeUsageOf(records),
    'node views, every node': () => nodeViews(sources),
    'replica views, every replica': () => replicaViews(sources),
    'replica views, one model': () => replicaViews(sources, models[0].name),
  };
  for (const [label, text] of Object.entries(PAGE_QUERIES))
    ops[label] = () => nodeViewPage(sources, parseNodeQuery(new URLSearchParams(text)));
  const samples = Object.fromEntries(Object.keys(ops).map((k) => [k, []]));
  let idleActions = 0;
  let lossActions = 0;
  let pageSizes = {};
  let placedPerPass = 0;
  for (let round = 0; round <= rounds; round++) {
    for (const [name, fn] of Object.entries(ops)) {
      const m = measure(fn);
      if (name.startsWith('pass from empty')) placedPerPass = m.value.actions.filter((a) => a.kind === 'create').length;
      if (name.startsWith('reconciler pass, idle')) idleActions = m.value.actions.length;
      if (name.startsWith('reconciler pass, one node lost')) lossActions = m.value.actions.length;
      if (name.startsWith('node list page')) pageSizes[name] = `${m.value.nodes.length} of ${m.value.total}`;
      // The first round warms the JIT and is not counted.
      if (round > 0)
        samples[name].push(
          name.startsWith('fold one')
            ? m.cpuMs / reporters.length
            : name.startsWith('pass from empty')
              ? m.cpuMs / placedPerPass
              : m.cpuMs,
        );
    }
  }
  const fastest = Object.fromEntries(Object.entries(samples).map(([k, v]) => [k, Math.min(...v)]));
  return {
    fastest,
    placedPerPass,
    placed: built.value.placed,
    asked: built.value.asked,
    buildMs: built.cpuMs,
    idleActions,
    lossActions,
    pageSizes,
    replicas: records.length,
  };
}

const base = timeFleet(baseCount);
const big = timeFleet(nodeCount);
const scale = nodeCount / baseCount;
console.log(
  `fleets: ${baseCount} and ${nodeCount} nodes x 8 GPUs; replicas placed ${base.placed}/${base.asked} and ${big.placed}/${big.asked} (placing them, the first pass from empty plus building the fleet: ${base.buildMs.toFixed(0)} and ${big.buildMs.toFixed(0)} CPU ms)`,
);
console.log(
  `CPU ms, fastest of ${rounds} rounds after a warm-up round; growth = ${nodeCount} nodes / ${baseCount} nodes (the fleet grew ${scale}x; at most ${MAX_GROWTH * scale}x passes)`,
);
let ok = true;
console.log(`  ${'operation'.padEnd(58)} ${String(baseCount).padStart(9)} ${String(nodeCount).padStart(9)}  growth`);
for (const name of Object.keys(big.fastest)) {
  const a = base.fastest[name];
  const b = big.fastest[name];
  // Work too small to time (under 1 µs) cannot show a trend: its growth is not judged.
  const growth = a >= 0.001 ? b / a : null;
  const fine = growth === null || growth <= MAX_GROWTH * scale;
  ok &&= fine;
  console.log(
    `  ${name.padEnd(58)} ${a.toFixed(3).padStart(9)} ${b.toFixed(3).padStart(9)}  ${growth === null ? '-' : `${growth.toFixed(1)}x`} ${fine ? '' : 'SUPERLINEAR'}`,
  );
}
const perPlacementMs = big.fastest['pass from empty, per replica placed (every one, no cap)'];
console.log(
  `placement in a pass at ${nodeCount} nodes: ${big.placedPerPass} replicas in ${(perPlacementMs * big.placedPerPass).toFixed(0)} CPU ms, ${Math.round(1000 / perPlacementMs)} placements/s (the whole pass: classify, count, place)`,
);
// A heartbeat's fold grows with the fleet when it walks every replica, and the fleet sends more of them: the square, per second.
const perSecond = nodeCount / 5;
const walked = big.fastest['fold one heartbeat, every replica walked (as before)'];
const indexed = big.fastest['fold one heartbeat, indexed (avg of 200 nodes)'];
console.log(
  `heartbeats: ${nodeCount} nodes at one per 5 s send ${perSecond}/s; folding them costs ${((perSecond * indexed) / 10).toFixed(2)}% of a core indexed, ` +
    `${((perSecond * walked) / 10).toFixed(0)}% walking every replica`,
);
console.log(
  `pages: ${Object.entries(big.pageSizes)
    .map(([k, v]) => `${k.replace('node list page: ', '')} -> ${v}`)
    .join('; ')}`,
);
console.log(
  `the idle pass at ${nodeCount} nodes planned ${big.idleActions} actions (want 0); the pass after one node was lost planned ${big.lossActions}`,
);
if (big.idleActions !== 0 || base.idleActions !== 0) ok = false;
process.exitCode = ok ? 0 : 1;
