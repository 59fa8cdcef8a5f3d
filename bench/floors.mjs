// What any gateway on this stack pays per whole answer, beside the router:
// the floor that #34's "CPU per request at most 1.2× the bare proxy's" is
// read against. Five ways to one instant sim, each its own process with
// npm start's Node flags, the same clients sending to all of them in turn,
// request by request (as bench/builds.mjs does for two builds, so every way
// is loaded at the same moments and a stall of the machine falls on all):
//
//  - bare: node:http in, undici out, nothing else (bench/router.mjs
//    --serve-bare, the router bench's floor);
//  - app: the client listener's own Fastify app (createJsonApp, as the
//    control plane builds it: request ids, error shapes, connection caps),
//    one route that relays the bytes and does nothing else;
//  - raw-metering: node:http again, plus the least a metering gateway does
//    for each request: hash the key and find it, parse the body for its
//    model, parse the answer for its usage, count the request and its time
//    per model (as src/gateway/core/hot-metrics.ts does, no prom-client call);
//  - metering: the same work on the app;
//  - router: the gateway itself (bench/router.mjs --serve-router).
//
// Prints each round's CPU time per request of each way (from /proc), each
// way's ratio to the bare proxy's by round, and the median and pooled
// ratios. No target: it says how much of the router's figure is the stack's
// and the least work any key-checking, metering gateway does.
//
//   npm run build && node bench/floors.mjs [--rounds 8] [--requests 6000] [--connections 50] [--ways bare,app,...]
// Node's globals are imported by name: the lint config gives plain .mjs files no Node environment.
import { Buffer } from 'node:buffer';
import console from 'node:console';
import { hash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { performance } from 'node:perf_hooks';
import process from 'node:process';
import { URL } from 'node:url';
import { parseArgs } from 'node:util';
import { Pool } from 'undici';
import { inTurn } from './lockstep.mjs';
import { cpuSeconds, simProcessArgs, spawnUntil } from './processes.mjs';

const WAYS = ['bare', 'app', 'raw-metering', 'metering', 'router'];
const { values: flags } = parseArgs({
  options: {
    serve: { type: 'string' },
    upstream: { type: 'string' },
    ways: { type: 'string', default: WAYS.join(',') },
    rounds: { type: 'string', default: '8' },
    requests: { type: 'string', default: '6000' },
    connections: { type: 'string', default: '50' },
  },
});
const dist = (path) => new URL(`../dist/${path}`, import.meta.url).href;
// The key every way is sent; only the metering ways check it (the router issues its own).
const KEY = 'floor-key';

if (flags.serve) await serve(flags.serve, flags.upstream);
else await main();

/** Child mode: one of the ways in front of `upstream`, printing its URL once it listens. */
async function serve(way, upstream) {
  const pool = new Pool(upstream);
  const metering = way === 'raw-metering' || way === 'metering' ? meter() : null;
  const relay = (req, res, body) => {
    const started = performance.now();
    let model = null;
    if (metering) {
      if (!metering.keys.has(hash('sha256', req.headers.authorization ?? '', 'hex'))) {
        res.writeHead(401, { 'content-type': 'application/json' });
        res.end('{"error":{"message":"unknown key"}}');
        return;
      }
      model = JSON.parse(body.toString()).model;
    }
    const parts = [];
    let status = 502;
    let type = 'application/json';
    pool.dispatch(
      { path: req.url, method: 'POST', headers: { 'content-type': 'application/json' }, body },
      {
        onRequestStart() {},
        onResponseStart(_c, code, headers) {
          status = code;
          type = headers['content-type'] ?? type;
        },
        onResponseData(_c, data) {
          parts.push(data);
        },
        onResponseEnd() {
          const answer = Buffer.concat(parts);
          res.writeHead(status, { 'content-type': type });
          res.end(answer);
          if (metering) metering.count(model, JSON.parse(answer.toString()).usage, performance.now() - started);
        },
        onResponseError() {
          if (res.headersSent) return void res.destroy();
          res.writeHead(502);
          res.end();
        },
      },
    );
  };
  let port;
  if (way === 'raw-metering') {
    const server = createServer((req, res) => {
      const chunks = [];
      req.on('data', (c) => chunks.push(c));
      req.on('end', () => relay(req, res, Buffer.concat(chunks)));
    });
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = server.address().port;
  } else {
    // As the control plane builds its client listener; the body taken as bytes, as the router's intake takes it.
    const { createJsonApp } = await import(dist('http/index.js'));
    const { openAiErrorShape } = await import(dist('gateway/index.js'));
    const { default: pino } = await import('pino');
    const app = createJsonApp({
      logger: pino({ level: 'silent' }),
      bodyLimitBytes: 8 << 20,
      shapeError: openAiErrorShape,
      requestLoggers: false,
      requestIds: true,
    });
    app.removeContentTypeParser('application/json');
    app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (_r, b, done) => done(null, b));
    app.post('/v1/chat/completions', { config: { public: true } }, (request, reply) => {
      reply.hijack();
      relay(request.raw, reply.raw, request.body);
    });
    await app.listen({ host: '127.0.0.1', port: 0 });
    port = app.server.address().port;
  }
  console.log(`${way} listening on http://127.0.0.1:${port}`);
  process.on('SIGTERM', () => process.exit(0));
}

/** The least bookkeeping of a metering gateway: known key hashes, and per model a count, a time and the tokens. */
function meter() {
  const keys = new Set([hash('sha256', `Bearer ${KEY}`, 'hex')]);
  const perModel = new Map();
  return {
    keys,
    count(model, usage, ms) {
      let row = perModel.get(model);
      if (!row) perModel.set(model, (row = { requests: 0, ms: 0, prompt: 0, completion: 0 }));
      row.requests++;
      row.ms += ms;
      row.prompt += usage?.prompt_tokens ?? 0;
      row.completion += usage?.completion_tokens ?? 0;
    },
  };
}

async function main() {
  const ways = flags.ways.split(',');
  const unknown = ways.filter((w) => !WAYS.includes(w));
  if (unknown.length > 0 || ways[0] !== 'bare') {
    console.error(`--ways: bare first, then any of ${WAYS.join(', ')} (not ${unknown.join(', ') || 'without bare'})`);
    process.exit(2);
  }
  const sim = await spawnUntil(
    simProcessArgs(dist('engine/sim/index.js'), ['--port', '0', '--model', 'instant']),
    /listening on (\S+)/,
  );
  const upstream = sim.match[1];
  // npm start's Node flags, as bench/router.mjs runs its router and bare proxies.
  const startScript = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).scripts.start;
  const nodeFlags = startScript.match(/--[\w-]+=\S+/g) ?? [];
  const routerBench = new URL('router.mjs', import.meta.url).pathname;
  const self = new URL(import.meta.url).pathname;
  const procs = [];
  try {
    for (const way of ways) {
      const args =
        way === 'bare'
          ? [routerBench, '--serve-bare', upstream]
          : way === 'router'
            ? [routerBench, '--serve-router', `instant=${upstream}`]
            : [self, '--serve', way, '--upstream', upstream];
      const p = await spawnUntil([...nodeFlags, ...args], /listening on (http\S+)(?: key (\S+))?.*\n/);
      procs.push({ way, child: p.child, url: p.match[1], key: p.match[2] ?? KEY });
    }
    const body = JSON.stringify({
      model: 'instant',
      messages: [{ role: 'user', content: 'Benchmark the router, please.' }],
      max_tokens: 16,
    });
    const connections = Number(flags.connections);
    const inTurnOf = (count) => inTurn(procs, count, { connections, body });
    // Warm: every way compiled and its heap grown before anything counts.
    await inTurnOf(3000);
    const count = Number(flags.requests);
    const us = procs.map(() => []);
    for (let round = 0; round < Number(flags.rounds); round++) {
      const before = procs.map((p) => cpuSeconds(p.child.pid));
      const errors = await inTurnOf(count);
      const after = procs.map((p) => cpuSeconds(p.child.pid));
      procs.forEach((_, i) => us[i].push(((after[i] - before[i]) * 1e6) / count));
      const each = procs.map((p, i) => `${p.way} ${us[i][round].toFixed(0)}`).join(', ');
      const ratios = procs.map((_, i) => (us[i][round] / us[0][round]).toFixed(2)).join(' ');
      console.log(`round ${round + 1}: CPU µs/request ${each}; /bare ${ratios}${errors ? `; ${errors} not 200` : ''}`);
    }
    const sum = (xs) => xs.reduce((s, x) => s + x, 0);
    const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
    console.log(
      `${us[0].length} rounds of ${count} whole answers to each way, ${connections} clients sending to all in turn; ` +
        `CPU per request against the bare proxy's, median by round (pooled): ` +
        procs
          .map((p, i) => {
            const ratios = us[i].map((x, r) => x / us[0][r]);
            return `${p.way} ${median(ratios).toFixed(2)}× (${(sum(us[i]) / sum(us[0])).toFixed(2)}×)`;
          })
          .join(', '),
    );
  } finally {
    for (const p of [sim, ...procs]) p.child.kill('SIGTERM');
  }
}
