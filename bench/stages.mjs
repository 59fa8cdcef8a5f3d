// Where a sequential request's added time goes, the gateway's against the
// bare Node proxy's (node:http in, undici out, nothing else), both in front
// of router.mjs's chunk server and both timed by the same probe
// (stage-probe.mjs: Node's and undici's diagnostics channels, no change to
// llmgw's code). Requests go one at a time, taking turns between the two,
// so both meet the same moments of the machine. Sequential streams are
// where #34's latency line is read (router.mjs's seqChunks), and one at a
// time a proxy's per-request cost is not shared with any other request.
//
// Per round and as the median of the rounds: for each proxy, the median
// time from the request parsed to its headers written to the engine
// ("before"), the engine's own time to its response headers ("engine"), and
// from there to the answer finished ("after"); its user and system CPU per
// request; and the gateway's stages minus the bare proxy's.
//
//   npm run build && node bench/stages.mjs [--chunks 1] [--requests 3000] [--rounds 3]
// Node's globals are imported by name: the lint config gives plain .mjs files no Node environment.
import console from 'node:console';
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { Pool } from 'undici';
import { spawnUntil } from './processes.mjs';

const { values: flags } = parseArgs({
  options: {
    chunks: { type: 'string', default: '1' },
    requests: { type: 'string', default: '3000' },
    rounds: { type: 'string', default: '3' },
  },
});
const requests = Number(flags.requests);
const rounds = Number(flags.rounds);
const routerBench = new URL('./router.mjs', import.meta.url).pathname;
const probe = new URL('./stage-probe.mjs', import.meta.url).pathname;
// The Node flags `npm start` gives llmgw (package.json), for both proxies alike.
const startScript = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).scripts.start;
const nodeFlags = startScript.match(/--[\w-]+=\S+/g) ?? [];

/** A proxy child with the probe loaded: its URL (and key), and its next `stages` report on asking. */
async function startProxy(args, re) {
  const proc = await spawnUntil([...nodeFlags, '--import', probe, routerBench, ...args], re, { stderr: 'pipe' });
  const waiting = [];
  let err = '';
  proc.child.stderr.setEncoding('utf8').on('data', (chunk) => {
    err += chunk;
    for (let nl = err.indexOf('\n'); nl >= 0; nl = err.indexOf('\n')) {
      const line = err.slice(0, nl);
      err = err.slice(nl + 1);
      if (line.startsWith('stages ')) waiting.shift()?.(JSON.parse(line.slice(7)));
      else console.error(line);
    }
  });
  const report = () =>
    new Promise((done) => {
      waiting.push(done);
      proc.child.kill('SIGUSR2');
    });
  return { ...proc, report };
}

const chunks = await spawnUntil([routerBench, '--serve-chunks', '--chunks', flags.chunks], /chunks listening on (\S+)/);
const chunksUrl = chunks.match[1];
const router = await startProxy(['--serve-router', `chunks=${chunksUrl}`], /router listening on (\S+) key (\S+)/);
const bare = await startProxy(['--serve-bare', chunksUrl], /bare proxy listening on (\S+)/);

const body = JSON.stringify({
  model: 'chunks',
  messages: [{ role: 'user', content: 'hello' }],
  stream: true,
  max_tokens: 16,
});
const ways = [
  {
    name: 'gateway',
    proc: router,
    pool: new Pool(router.match[1]),
    headers: { 'content-type': 'application/json', authorization: `Bearer ${router.match[2]}` },
  },
  { name: 'bare proxy', proc: bare, pool: new Pool(bare.match[1]), headers: { 'content-type': 'application/json' } },
];

async function send(way) {
  const res = await way.pool.request({ path: '/v1/chat/completions', method: 'POST', headers: way.headers, body });
  await res.body.text();
  if (res.statusCode !== 200) throw new Error(`${way.name} answered ${res.statusCode}`);
}

// Warm both (the JIT, the pools), then drop what the probes saw of it.
for (let i = 0; i < 3000; i++) for (const way of ways) await send(way);
for (const way of ways) await way.proc.report();

const fmt = (us) => `${us.toFixed(0)} µs`;
const median = (a) => [...a].sort((x, y) => x - y)[a.length >> 1];
const byRound = ways.map(() => []);
for (let round = 1; round <= rounds; round++) {
  for (let i = 0; i < requests; i++) for (const way of ways) await send(way);
  const reports = [];
  for (const way of ways) reports.push(await way.proc.report());
  const line = reports.map((r, w) => {
    byRound[w].push(r);
    return `${ways[w].name}: before ${fmt(r.before)}, engine ${fmt(r.engine)}, after ${fmt(r.after)}, CPU user ${fmt(r.userUs / requests)} system ${fmt(r.systemUs / requests)} per request (${r.requests} timed)`;
  });
  console.log(`round ${round}: ${line.join('; ')}`);
}

const med = (w, field) =>
  median(byRound[w].map((r) => (field === 'user' || field === 'system' ? r[`${field}Us`] / requests : r[field])));
console.log(
  `${flags.chunks}-chunk streams, one at a time, ${requests} per proxy per round, median of ${rounds} rounds:`,
);
for (const field of ['before', 'engine', 'after', 'user', 'system']) {
  const g = med(0, field);
  const b = med(1, field);
  const what = field === 'user' || field === 'system' ? `${field} CPU per request` : field;
  console.log(
    `  ${what.padEnd(24)} gateway ${fmt(g).padStart(7)}  bare proxy ${fmt(b).padStart(7)}  gateway − bare ${fmt(g - b).padStart(7)}`,
  );
}

for (const proc of [chunks, router, bare]) proc.child.kill('SIGTERM');
await Promise.all(ways.map((way) => way.pool.close()));
