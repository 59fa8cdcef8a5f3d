// Two builds of the router side by side: what a change to the request path
// buys, in CPU per request. Each build's router (bench/router.mjs
// --serve-router, from that build's tree) runs in front of one instant sim;
// the same --connections clients send to both in turn, request by request,
// so both are loaded at the same moments. CPU time per request of one
// process on this VM moves by up to 40% between consecutive seconds, and
// two identical routers loaded side by side by separate clients read 0.87
// to 1.20 of each other by round; in lockstep, 0.98 to 1.04.
//
//   npm run build    # in each tree
//   node bench/builds.mjs --a /path/to/tree-a --b /path/to/tree-b [--rounds 5] [--requests 15000]
//     [--connections 50] [--stream] [--flags-a '--tenancy'] [--flags-b '--key-limits']
//
// Each tree needs dist/ and bench/. Prints each round's CPU per request,
// the ratio a/b by round, its median and the pooled ratio. --stream sends
// 64-chunk streams from the chunk server instead of whole answers.
// --flags-a and --flags-b pass router flags (bench/router.mjs's: --tenancy,
// --key-limits, --load-samples) to one side: the same build against itself
// with teams and budgets on is the tenancy phase's question, asked this way.
// Given to both, --load-samples measures least-load as a fleet whose engines
// report their load runs it: two replicas per model, samples renewed each second.
// Node's globals are imported by name: the lint config gives plain .mjs files no Node environment.
import console from 'node:console';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import process from 'node:process';
import { parseArgs } from 'node:util';
import { inTurn } from './lockstep.mjs';
import { cpuSeconds, simProcessArgs, spawnUntil } from './processes.mjs';

const { values: flags } = parseArgs({
  options: {
    a: { type: 'string' },
    b: { type: 'string' },
    rounds: { type: 'string', default: '5' },
    requests: { type: 'string', default: '15000' },
    connections: { type: 'string', default: '50' },
    stream: { type: 'boolean', default: false },
    'flags-a': { type: 'string', default: '' },
    'flags-b': { type: 'string', default: '' },
  },
});
if (!flags.a || !flags.b) {
  console.error('name the two trees to compare: --a DIR --b DIR (each built, with dist/ and bench/)');
  process.exit(2);
}
const trees = [resolve(flags.a), resolve(flags.b)];
// The router runs with npm start's Node flags, as bench/router.mjs runs it.
const NODE_FLAGS = ['--max-semi-space-size=64'];

const backend = flags.stream
  ? await spawnUntil([`${trees[0]}/bench/router.mjs`, '--serve-chunks', '--chunks', '64'], /chunks listening on (\S+)/)
  : await spawnUntil(
      simProcessArgs(pathToFileURL(`${trees[0]}/dist/engine/sim/index.js`).href, ['--port', '0', '--model', 'instant']),
      /listening on (\S+)/,
    );
const routers = [];
for (const [i, tree] of trees.entries()) {
  const extra = (i === 0 ? flags['flags-a'] : flags['flags-b']).split(' ').filter(Boolean);
  const r = await spawnUntil(
    [...NODE_FLAGS, `${tree}/bench/router.mjs`, '--serve-router', `instant=${backend.match[1]}`, ...extra],
    /router listening on (\S+) key (\S+)/,
  );
  routers.push({ child: r.child, url: r.match[1], key: r.match[2] });
}

const connections = Number(flags.connections);
// bench/router.mjs's bodies (its --max-tokens and --stream-tokens defaults): a stream without max_tokens would have
// a budgeted key's router (--tenancy) add one to the body, which the tenancy phase it stands in for never does.
const messages = [{ role: 'user', content: 'Benchmark the router, please.' }];
const body = JSON.stringify(
  flags.stream
    ? { model: 'instant', messages, max_tokens: 256, stream: true }
    : { model: 'instant', messages, max_tokens: 16 },
);

/** `count` requests to each router, every client sending to both in turn (which goes first alternates by client). */
const lockstep = (count) => inTurn(routers, count, { connections, body });

try {
  // Warm: both compiled and their heaps grown before anything counts.
  await lockstep(3000);
  const count = Number(flags.requests);
  const us = [[], []];
  for (let round = 0; round < Number(flags.rounds); round++) {
    const before = routers.map((r) => cpuSeconds(r.child.pid));
    const errors = await lockstep(count);
    const after = routers.map((r) => cpuSeconds(r.child.pid));
    if (errors) console.log(`round ${round + 1}: ${errors} answers were not 200`);
    for (const i of [0, 1]) us[i].push(((after[i] - before[i]) * 1e6) / count);
  }
  const ratios = us[0].map((x, i) => x / us[1][i]);
  const median = [...ratios].sort((x, y) => x - y)[Math.floor(ratios.length / 2)];
  const sum = (xs) => xs.reduce((s, x) => s + x, 0);
  const list = (xs, digits) => xs.map((x) => x.toFixed(digits)).join(', ');
  console.log(
    `${flags.stream ? '64-chunk streams' : 'whole answers'}, ${connections} connections, both routers in lockstep, ` +
      `${us[0].length} rounds of ${count} requests each: CPU µs/request a (${trees[0]}) ${list(us[0], 0)}; ` +
      `b (${trees[1]}) ${list(us[1], 0)}; a/b by round ${list(ratios, 3)}; median ${median.toFixed(3)}, ` +
      `pooled ${(sum(us[0]) / sum(us[1])).toFixed(3)}`,
  );
} finally {
  for (const p of [backend.child, ...routers.map((r) => r.child)]) p.kill('SIGTERM');
}
