// Measures what the router adds: sim engines on loopback, hit directly and
// through the router in the same run by the same load generator (undici), so
// the difference is llmgw's. The sim, the router and the load generator each
// run in their own process; on a 2-core machine they still share the cores.
//
// Two sims, because two questions are asked:
//  - a sim that answers at once ("instant"): every microsecond the router
//    spends shows. Sequential phases measure its added latency; a saturating
//    phase at --connections measures its ceiling (requests/s through it as a
//    share of direct), which on two shared cores is a contest for CPU, not a
//    latency figure.
//  - a sim paced like an engine ("paced": --ttft-ms before the first token,
//    --tokens-per-second per stream): real engines take tens of milliseconds
//    at least, so this is how --connections concurrent clients meet the
//    router in a fleet. Its phases measure the added latency at that
//    concurrency and the tokens relayed per second as a share of direct.
//    Its clients wait a random 0..--think-ms before each request, as
//    independent clients do; without it equal answer times keep all of them
//    in lockstep, so every request of a wave arrives in the same millisecond.
//
// The sequential and paced non-streaming phases also run a bare Node proxy
// (node:http in, undici out, nothing else) beside the router, taking turns
// with it and with direct requests: the floor any Node proxy pays on this
// machine, for reading the router's own figure against. Taking turns, the
// --connections clients of that phase are shared three ways: about a third
// of them are in flight through the router at any moment. A second paced
// phase gives each its --connections clients to itself instead: all of them
// send directly for --slice-ms, then all through the router, then all
// through the bare proxy, round and round, so the router carries every one
// of them at once while a stall of the machine still falls on all three.
//
// The paced non-streaming phase runs --paced-seconds (20) after --warm-ms
// (1000) not counted: its p99 is the 1% slowest of ~6000 routed requests. In
// a 6 s run one pause of any process (a garbage collection, a descheduled
// thread) decides the p99 alone; and at the start every client sends its
// first request in the same few milliseconds while every pool opens its
// connections, which is the start of a run, not its steady state.
//
// A third backend, the chunk server, writes every stream as --chunks (64)
// separate chunks, each on its own turn of its event loop, as an engine on
// a GPU writes one per token (the sim corks a turn's tokens into one write).
// Two phases use it, direct, routed, bare proxy (and nginx, when `nginx` is
// on PATH; the bench never needs it, but the target of an added p50 within
// 2.5× nginx's is judged only with it) in turn: sequential streams, for the
// added p50/p90/p99 (a stream's tail: whatever a proxy does per chunk, and
// its pauses), and --cpu-connections (50) concurrent streams, for the CPU
// time per request of the router against the bare proxy's in the same run.
// The sequential phase also takes turns with a byte relay (node:net, no
// HTTP: each client connection paired with one to the chunk server, bytes
// copied as they come): Node's floor for moving a stream's bytes, so the
// bare proxy's added latency splits into Node's part and HTTP's.
// The same CPU figure for whole answers comes from the instant sim at
// --cpu-connections (cpuWhole): there the router's own work per request
// (key, checks, choice, metrics) weighs most.
//
// Prints per phase: latency p50/p99 direct and routed, the router's added
// latency (routed minus direct, per percentile), throughput routed/direct,
// for streams tokens/s relayed vs direct, and the router process's CPU time
// per request (from /proc: on a shared machine wall-clock latency is
// inflated by the neighbours, CPU time much less so). Ends with the targets
// and whether this run met them.
//
//   npm run build && node bench/router.mjs [--requests 5000] [--streams 600]
//     [--seconds 6] [--connections 200] [--stream-tokens 256] [--max-tokens 16]
//     [--ttft-ms 50] [--tokens-per-second 100] [--think-ms 20] [--warm-ms 1000] [--paced-seconds 20]
//     [--slice-ms 1000] [--chunks 64] [--cpu-connections 50]
//     [--phases seq,seqStream,conc,concEach,concStream,seqChunks,cpuChunks,cpuWhole,ceiling,gateways,traces,tenancy] [--gateways 1]
// --gateways N: the router is N gateway processes on one port (node:cluster
// workers, as `llmgw gateway --workers N` runs them), and its CPU per request
// is theirs and the primary's summed. The `gateways` phase asks what a second
// process buys: the instant sim at --cpu-connections (50) clients, given to
// direct, one gateway process and two by turns of --slice-ms, and the
// requests per second through two against one.
//
//   node bench/router.mjs --gateways 2 [--phases cpuWhole,gateways]
// --traces (or --phases traces): a router with tracing off, one sampling
// every request and one sampling --trace-ratio (0.1) of them, spans sent in
// OTLP batches to a sink on loopback, by turns, whole answers and streams;
// each one's CPU per request side by side (target: <= 1.10× at the ratio).
//
//   node bench/router.mjs --phases traces [--trace-ratio 0.1]
// --phases tenancy: a router with no teams or budgets and one whose key is
// in a team with model and per-minute limits and hard budgets in tokens and
// dollars, every model priced (bench/tenancy.mjs), both keys with the same
// limits of their own (--key-limits), by turns, whole answers
// and streams; each one's CPU per request side by side (target: <= 1.05×),
// in --rounds (7) rounds of --seconds (6) with the order swapped each round,
// each on two routers started afresh and warmed by turns first, judged by
// the median round (a loaded machine's bursts, and one process's luck in
// how V8 compiled it, spoil single runs).
//
//   node bench/router.mjs --phases tenancy [--rounds 7] [--seconds 6] [--tenancy-load together|turns]
// --load-samples: each sim served to the router as two replicas with engine load samples renewed every second, so
// least-load weighs samples as it does in a fleet of metered engines (also a router flag, for bench/builds.mjs's
// --flags-a/-b).
//   BENCH_PROF=/tmp/prof node bench/router.mjs   # also writes a CPU profile of the router process
//   BENCH_NODE_FLAGS='' node bench/router.mjs   # Node flags for the router and bare proxies ('' = Node's defaults; absent = npm start's)
// Node's globals are imported by name: the lint config gives plain .mjs files no Node environment.
import { spawn } from 'node:child_process';
import cluster from 'node:cluster';
import console from 'node:console';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { performance } from 'node:perf_hooks';
import process from 'node:process';
import { URL } from 'node:url';
import { parseArgs } from 'node:util';
import { cpuSeconds, simProcessArgs, spawnUntil } from './processes.mjs';
import { BENCH_KEY_LIMITS, BENCH_PRICE, tenancyParts } from './tenancy.mjs';
import { hasWrk, runWrk } from './wrk.mjs';
import { Pool } from 'undici';

const { values: flags } = parseArgs({
  options: {
    'serve-router': { type: 'string' },
    connections: { type: 'string', default: '200' },
    requests: { type: 'string', default: '5000' },
    streams: { type: 'string', default: '600' },
    seconds: { type: 'string', default: '6' },
    'max-tokens': { type: 'string', default: '16' },
    'stream-tokens': { type: 'string', default: '256' },
    'ttft-ms': { type: 'string', default: '50' },
    'tokens-per-second': { type: 'string', default: '100' },
    'think-ms': { type: 'string', default: '20' },
    'warm-ms': { type: 'string', default: '1000' },
    'paced-seconds': { type: 'string', default: '20' },
    'slice-ms': { type: 'string', default: '1000' },
    phases: { type: 'string' },
    'serve-bare': { type: 'string' },
    'serve-relay': { type: 'string' },
    'serve-chunks': { type: 'boolean' },
    chunks: { type: 'string', default: '64' },
    'cpu-connections': { type: 'string', default: '50' },
    gateways: { type: 'string', default: '1' },
    traces: { type: 'boolean' },
    trace: { type: 'string' },
    'trace-ratio': { type: 'string', default: '0.1' },
    tenancy: { type: 'boolean' },
    'key-limits': { type: 'boolean' },
    'load-samples': { type: 'boolean' },
    rounds: { type: 'string', default: '7' },
    'tenancy-load': { type: 'string', default: 'together' },
  },
});

const dist = (path) => new URL(`../dist/${path}`, import.meta.url).href;

if (flags['serve-router']) {
  await serveRouter(flags['serve-router']);
} else if (flags['serve-bare']) {
  await serveBare(flags['serve-bare']);
} else if (flags['serve-relay']) {
  await serveRelay(flags['serve-relay']);
} else if (flags['serve-chunks']) {
  await serveChunks(Number(flags.chunks));
} else {
  await main();
}

/**
 * Child mode: a client listener with the router in front of the sims at
 * `urls` ("instant=URL,paced=URL"). Prints its URL, a key and the pids that
 * serve it. With --gateways N above 1 this process is a node:cluster primary:
 * it forks N workers that each run the router on one shared port, and hands
 * each new connection to the next.
 */
async function serveRouter(urls) {
  const count = Number(flags.gateways);
  if (count > 1 && cluster.isPrimary) return serveRouterWorkers(count);
  const { createJsonApp } = await import(dist('http/index.js'));
  const { compileModel, ModelSchema } = await import(dist('control/catalog/index.js'));
  const { registerRouter, openAiErrorShape } = await import(dist('gateway/index.js'));
  const { MemoryKeyStore, MemoryUsageSink, issueKey } = await import(dist('control/keys/index.js'));
  const { Registry } = await import('prom-client');
  const { default: pino } = await import('pino');
  const logger = pino({ level: 'silent' });
  const models = new Map();
  const replicas = new Map();
  for (const pair of urls.split(',')) {
    const [name, url] = pair.split('=');
    models.set(
      name,
      compileModel(
        ModelSchema.parse({
          name,
          source: `file:///models/${name}`,
          profiles: [{ engine: 'sim' }],
          ...(flags.tenancy ? { price: BENCH_PRICE } : {}),
        }),
        'file',
      ),
    );
    // --load-samples: as in a fleet whose engines report their load, two replicas (both the same sim), each with an
    // engine sample the control plane renews every second, dated when it was read, a little before it arrives.
    const ids = flags['load-samples'] ? [`r0-${name}`, `r1-${name}`] : [`r-${name}`];
    const list = ids.map((id) => ({ id, endpoint: url, draining: false }));
    if (flags['load-samples']) {
      const renew = () => {
        for (const r of list) r.load = { running: 2, waiting: 0, sampledAtMs: Date.now() - 300 };
      };
      renew();
      setInterval(renew, 1000).unref();
    }
    replicas.set(name, list);
  }
  // As the control plane builds its client listener.
  const app = createJsonApp({
    logger,
    bodyLimitBytes: 8 << 20,
    shapeError: openAiErrorShape,
    requestLoggers: false,
    requestIds: true,
  });
  // --tenancy: the key in a team with limits and hard budgets, every model priced (bench/tenancy.mjs).
  const tenancy = flags.tenancy ? await tenancyParts(dist, models, logger) : null;
  const keys = tenancy?.keys ?? new MemoryKeyStore();
  // --trace URL: every request traced (sampled at 1) and its spans sent over OTLP in batches, as otlp_endpoint does.
  let tracing = null;
  if (flags.trace) {
    // Sooner and bigger batches than the SDK's defaults (5 s, 2048 spans), so no span is dropped for want of room:
    // the figure is every span made and sent.
    process.env.OTEL_BSP_SCHEDULE_DELAY ??= '200';
    process.env.OTEL_BSP_MAX_QUEUE_SIZE ??= '65536';
    const { startTracing } = await import(dist('tracing/index.js'));
    const t = await startTracing({
      url: flags.trace,
      sampleRatio: Number(flags['trace-ratio']),
      serviceName: 'llmgw',
      instance: 'bench',
    });
    tracing = { tracer: t.tracer, propagator: t.propagator, recordContent: false };
  }
  registerRouter(app, {
    catalog: { resolve: (n) => models.get(n), models: () => [...models.values()] },
    replicas: { ready: (n) => replicas.get(n) ?? [], describe: () => 'none', demand: () => false },
    keys,
    authRequired: true,
    usage: new MemoryUsageSink(),
    registry: new Registry(),
    logger,
    ...(tracing ? { tracing } : {}),
    ...(tenancy ? { budgets: tenancy.budgets } : {}),
  });
  process.on('SIGTERM', () => void app.close().then(() => process.exit(0)));
  if (cluster.isWorker) {
    // The primary's key, so one key works whichever worker takes the connection.
    const { hashKey } = await import(dist('gateway/index.js'));
    const secret = process.env.BENCH_ROUTER_KEY;
    await keys.create({
      id: 'key_bench',
      name: 'bench',
      prefix: secret.slice(0, 8),
      hash: hashKey(secret),
      allowedModels: null,
      requestsPerMinute: null,
      tokensPerMinute: null,
      expiresAtMs: null,
      createdAtMs: Date.now(),
      createdBy: 'bench',
      revokedAtMs: null,
    });
    await app.listen({ host: '127.0.0.1', port: 0 });
    process.send({ port: app.server.address().port });
    return;
  }
  await app.listen({ host: '127.0.0.1', port: 0 });
  // --key-limits: the key has the tenancy key's own limits and models, without a team or budgets (bench/tenancy.mjs).
  const own = flags['key-limits'] ? { allowedModels: [...models.keys()], ...BENCH_KEY_LIMITS } : {};
  const secret = tenancy?.secret ?? (await issueKey(keys, { name: 'bench', ...own }, Date.now(), 'bench')).secret;
  console.log(`router listening on http://127.0.0.1:${app.server.address().port} key ${secret} pids ${process.pid}`);
}

/** The primary of --gateways N: forks the workers (each runs serveRouter on the one port), prints when all listen, stops them on SIGTERM. */
async function serveRouterWorkers(count) {
  const { MemoryKeyStore, issueKey } = await import(dist('control/keys/index.js'));
  const { secret } = await issueKey(new MemoryKeyStore(), { name: 'bench' }, Date.now(), 'bench');
  const workers = [];
  const ports = await Promise.all(
    Array.from(
      { length: count },
      () =>
        new Promise((resolve, reject) => {
          const worker = cluster.fork({ BENCH_ROUTER_KEY: secret });
          workers.push(worker);
          worker.once('message', (m) => resolve(m.port));
          worker.once('exit', (code) => reject(new Error(`a gateway worker exited (${code}) before it listened`)));
        }),
    ),
  );
  const pids = [process.pid, ...workers.map((w) => w.process.pid)];
  console.log(`router listening on http://127.0.0.1:${ports[0]} key ${secret} pids ${pids.join(',')}`);
  process.on('SIGTERM', () => {
    let left = workers.length;
    for (const w of workers) {
      w.once('exit', () => --left === 0 && process.exit(0));
      w.process.kill('SIGTERM');
    }
  });
}

/**
 * Child mode: the least a Node proxy can be, as a reference for the router's
 * figures: node:http in, undici's dispatch out to `simUrl`, a whole answer
 * written in one go and a stream's chunks written as they come. No key, no
 * validation, no choice, no metrics, no usage.
 */
async function serveBare(simUrl) {
  const { createServer } = await import('node:http');
  // No cap on connections, as the router's pools: a cap queues requests once more clients than it are in flight.
  const upstream = new Pool(simUrl);
  const server = createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const parts = [];
      let status = 502;
      let type = 'application/json';
      let streaming = false;
      upstream.dispatch(
        { path: req.url, method: 'POST', headers: { 'content-type': 'application/json' }, body: Buffer.concat(chunks) },
        {
          onRequestStart() {},
          onResponseStart(_c, code, headers) {
            status = code;
            type = headers['content-type'] ?? type;
            streaming = type.startsWith('text/event-stream');
            if (streaming) res.writeHead(status, { 'content-type': type });
          },
          onResponseData(_c, data) {
            if (streaming) res.write(data);
            else parts.push(data);
          },
          onResponseEnd() {
            if (streaming) return void res.end();
            res.writeHead(status, { 'content-type': type });
            res.end(Buffer.concat(parts));
          },
          onResponseError() {
            if (res.headersSent) return void res.destroy();
            res.writeHead(502);
            res.end();
          },
        },
      );
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  console.log(`bare proxy listening on http://127.0.0.1:${server.address().port}`);
  process.on('SIGTERM', () => server.close(() => process.exit(0)));
}

/**
 * Child mode: the least any Node process can do between a client and
 * `simUrl`: no HTTP at all, each client connection paired with a connection
 * of its own to the backend and the bytes copied both ways as they come
 * (Nagle off, as node:http and undici set it). Not a proxy anyone could
 * run: it reads no request and relays whatever it is sent. It says how much
 * of the bare proxy's added latency is Node moving bytes and how much is
 * HTTP in JavaScript (node:http's parser and chunked writes, undici's).
 */
async function serveRelay(simUrl) {
  const { createServer, connect } = await import('node:net');
  const upstream = new URL(simUrl);
  const server = createServer((client) => {
    const engine = connect(Number(upstream.port), upstream.hostname);
    client.setNoDelay(true);
    engine.setNoDelay(true);
    client.on('data', (data) => engine.write(data));
    engine.on('data', (data) => client.write(data));
    for (const [a, b] of [
      [client, engine],
      [engine, client],
    ]) {
      a.on('close', () => b.destroy());
      a.on('error', () => b.destroy());
    }
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  console.log(`byte relay listening on http://127.0.0.1:${server.address().port}`);
  process.on('SIGTERM', () => process.exit(0));
}

/**
 * Child mode: a backend that answers every request with a stream of `count`
 * chat chunks, each written on its own turn of the event loop (so each is
 * its own socket write and, mostly, its own read at the proxy), then the
 * usage chunk when the body asks for it, then [DONE]. The sim corks a turn's
 * tokens into one write; an engine on a GPU writes one chunk per token,
 * which is what a stream's per-chunk costs in a proxy are measured against.
 */
async function serveChunks(count) {
  const { createServer } = await import('node:http');
  const head = 'data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1,"model":"chunks","choices":';
  const token = (i) => `${head}[{"index":0,"delta":{"content":" word${i}"},"logprobs":null,"finish_reason":null}]}\n\n`;
  const server = createServer((req, res) => {
    const parts = [];
    req.on('data', (c) => parts.push(c));
    req.on('end', () => {
      const usage = /"include_usage"\s*:\s*true/.test(Buffer.concat(parts).toString('latin1'));
      res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
      let i = 0;
      const next = () => {
        if (res.destroyed) return;
        if (i < count) {
          res.write(token(i++));
          setImmediate(next);
          return;
        }
        if (usage)
          res.write(
            `${head}[],"usage":{"prompt_tokens":8,"completion_tokens":${count},"total_tokens":${count + 8}}}\n\n`,
          );
        res.end('data: [DONE]\n\n');
      };
      next();
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  console.log(`chunks listening on http://127.0.0.1:${server.address().port}`);
  process.on('SIGTERM', () => server.close(() => process.exit(0)));
}

/**
 * nginx in front of `url`, when `nginx` is on PATH (null otherwise: the bench
 * never needs it). One process (master_process off), so /proc/<pid> is all
 * of its CPU; buffering off and keep-alive upstream, as a streaming proxy is
 * configured in front of engines.
 */
async function startNginx(url) {
  const { spawnSync } = await import('node:child_process');
  const { mkdtempSync, rmSync, writeFileSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const { join } = await import('node:path');
  const probe = spawnSync('nginx', ['-v'], { stdio: 'ignore' });
  if (probe.error || probe.status !== 0) return null;
  const dir = mkdtempSync(join(tmpdir(), 'llmgw-bench-nginx-'));
  const port = 20000 + Math.floor(Math.random() * 20000);
  const upstream = new URL(url);
  writeFileSync(
    join(dir, 'nginx.conf'),
    `daemon off; master_process off; worker_processes 1; pid ${dir}/nginx.pid; error_log ${dir}/error.log error;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path ${dir}/body; proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fcgi; uwsgi_temp_path ${dir}/uwsgi; scgi_temp_path ${dir}/scgi;
  upstream backend { server ${upstream.host}; keepalive 256; }
  server {
    listen 127.0.0.1:${port};
    location / {
      proxy_pass http://backend;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
    }
  }
}
`,
  );
  const child = spawn('nginx', ['-p', dir, '-c', join(dir, 'nginx.conf')], { stdio: ['ignore', 'ignore', 'inherit'] });
  // Its config, pid file and temp paths go with it.
  child.on('exit', () => rmSync(dir, { recursive: true, force: true }));
  const base = `http://127.0.0.1:${port}`;
  // nginx prints nothing when it is up: poll until it answers.
  const probePool = new Pool(base);
  for (let i = 0; i < 100; i++) {
    try {
      const res = await probePool.request({ path: '/', method: 'GET' });
      await res.body.dump();
      break;
    } catch {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
  await probePool.close();
  return { child, url: base };
}

/** An OTLP/HTTP sink on loopback for the traced router: answers 200 to every batch and keeps only counts. */
async function startSink() {
  let batches = 0;
  let bytes = 0;
  const server = createServer((req, res) => {
    req.on('data', (c) => (bytes += c.length));
    req.on('end', () => {
      batches++;
      res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    batches: () => batches,
    bytes: () => bytes,
    close: () => new Promise((resolve) => (server.closeAllConnections(), server.close(() => resolve()))),
  };
}

function stop(child) {
  return new Promise((resolve) => {
    if (child.exitCode !== null) return resolve();
    child.once('exit', resolve);
    child.kill('SIGTERM');
  });
}

/**
 * Runs the calls in `ones` from `connections` workers until `count` counted
 * calls in all or the time limit; returns, per entry of `ones`, calls, errors
 * and latencies. With several entries each worker takes them in turn, so
 * direct and routed requests share every moment of the run and a stall of the
 * machine falls on both alike (two runs one after the other would each meet
 * different neighbours). `thinkMs` > 0: each worker waits a random
 * 0..thinkMs before each call (not counted in its latency), as independent
 * clients do; without it, equal answer times keep the workers in lockstep
 * and every request of a wave arrives in the same millisecond.
 * `warmMs` > 0: calls started in the first warmMs run as usual but are not
 * counted, so a concurrent phase measures the steady state rather than its
 * start, when every worker sends its first request in the same few
 * milliseconds and every pool opens its connections at once.
 * `slice` ({ ms, settleMs }): instead of taking turns per call, every worker
 * calls the same entry for `ms`, then the next, round and round, so each
 * entry meets all `connections` at once while the machine's stalls still
 * fall on all of them alike; calls started in the first `settleMs` of a
 * slice (while the previous entry's last calls finish) are not counted.
 */
async function drive(connections, count, limitMs, ones, thinkMs = 0, warmMs = 0, slice = null) {
  const list = Array.isArray(ones) ? ones : [ones];
  let started = 0;
  const errors = list.map(() => 0);
  const latencies = list.map(() => []);
  /** Every call per entry, counted or not: what the servers did, for CPU per request. */
  const sent = list.map(() => 0);
  const t0 = performance.now();
  const worker = async (w) => {
    let turn = w;
    while (started < count && performance.now() - t0 < warmMs + limitMs) {
      if (thinkMs > 0) await new Promise((resolve) => setTimeout(resolve, Math.random() * thinkMs));
      const since = performance.now() - t0;
      let counted = since >= warmMs;
      let i;
      if (slice) {
        i = Math.floor(since / slice.ms) % list.length;
        counted &&= since % slice.ms >= slice.settleMs;
      } else {
        i = turn++ % list.length;
      }
      if (counted) started++;
      sent[i]++;
      const s = performance.now();
      let ok = false;
      try {
        ok = await list[i]();
      } catch {
        ok = false;
      }
      if (!counted) continue;
      if (!ok) errors[i]++;
      latencies[i].push(performance.now() - s);
    }
  };
  await Promise.all(Array.from({ length: connections }, (_, w) => worker(w)));
  // Sliced, each entry had its share of the time (less each slice's settling) to itself.
  const share = slice ? (1 - slice.settleMs / slice.ms) / list.length : 1;
  const seconds = ((performance.now() - t0 - warmMs) / 1000) * share;
  const results = latencies.map((ms, i) => {
    ms.sort((a, b) => a - b);
    const pct = (p) => ms[Math.min(ms.length - 1, Math.floor(ms.length * p))] ?? NaN;
    return {
      done: ms.length,
      sent: sent[i],
      errors: errors[i],
      seconds,
      p50: pct(0.5),
      p90: pct(0.9),
      p99: pct(0.99),
      rate: ms.length / seconds,
    };
  });
  return Array.isArray(ones) ? results : results[0];
}

async function main() {
  const startSim = (name, extra) =>
    spawnUntil(
      simProcessArgs(dist('engine/sim/index.js'), ['--port', '0', '--model', name, ...extra]),
      /listening on (\S+)/,
    );
  const instant = await startSim('instant', []);
  const paced = await startSim('paced', [
    '--ttft-ms',
    flags['ttft-ms'],
    '--tokens-per-second',
    flags['tokens-per-second'],
  ]);
  const chunksSim = await spawnUntil(
    [new URL(import.meta.url).pathname, '--serve-chunks', '--chunks', flags.chunks],
    /chunks listening on (\S+)/,
  );
  const sims = { instant, paced, chunks: chunksSim };
  // The router runs with the Node flags `npm start` gives llmgw (package.json), unless BENCH_NODE_FLAGS names others ('' = Node's defaults).
  const startScript = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).scripts.start;
  const nodeFlags =
    process.env.BENCH_NODE_FLAGS !== undefined
      ? process.env.BENCH_NODE_FLAGS.split(' ').filter(Boolean)
      : (startScript.match(/--[\w-]+=\S+/g) ?? []);
  const routerUrls = `instant=${instant.match[1]},paced=${paced.match[1]},chunks=${chunksSim.match[1]}`;
  /** A router of `gateways` processes; its CPU time is every one of theirs summed (the primary's too). */
  const startRouter = async (gateways, extra = []) => {
    const proc = await spawnUntil(
      [
        ...(process.env.BENCH_PROF ? ['--cpu-prof', '--cpu-prof-dir', process.env.BENCH_PROF] : []),
        ...nodeFlags,
        new URL(import.meta.url).pathname,
        '--serve-router',
        routerUrls,
        '--gateways',
        String(gateways),
        ...(flags['load-samples'] ? ['--load-samples'] : []),
        ...extra,
      ],
      /router listening on (\S+) key (\S+) pids (\S+)/,
    );
    const pids = proc.match[3].split(',').map(Number);
    const cpu = () => {
      const each = pids.map((pid) => cpuSeconds(pid));
      return each.includes(null) ? null : each.reduce((a, b) => a + b, 0);
    };
    return { ...proc, url: proc.match[1], key: proc.match[2], cpu };
  };
  const gatewayCount = Number(flags.gateways);
  const routerProc = await startRouter(gatewayCount);
  const routerUrl = routerProc.url;
  const key = routerProc.key;
  // One bare proxy per sim, run with the router's Node flags, so each figure has its floor beside it.
  const startBare = (sim) =>
    spawnUntil(
      [...nodeFlags, new URL(import.meta.url).pathname, '--serve-bare', sim.match[1]],
      /bare proxy listening on (\S+)/,
    );
  const bareProcs = {
    instant: await startBare(instant),
    paced: await startBare(paced),
    chunks: await startBare(chunksSim),
  };
  // nginx in front of the chunk backend, only where it is installed: a figure from outside Node beside the bare proxy's.
  const nginx = await startNginx(chunksSim.match[1]);
  // And Node's own floor for the sequential streams: the bytes relayed with no HTTP (serveRelay).
  const relay = await spawnUntil(
    [...nodeFlags, new URL(import.meta.url).pathname, '--serve-relay', chunksSim.match[1]],
    /byte relay listening on (\S+)/,
  );

  const connections = Number(flags.connections);
  const limitMs = Number(flags.seconds) * 1000;
  const streamTokens = Number(flags['stream-tokens']);
  const messages = [{ role: 'user', content: 'Benchmark the router, please.' }];
  const bodies = (model) => ({
    whole: JSON.stringify({ model, messages, max_tokens: Number(flags['max-tokens']) }),
    stream: JSON.stringify({ model, messages, max_tokens: streamTokens, stream: true }),
  });
  const pools = [];
  const target = (url, headers) => {
    const pool = new Pool(url, { connections, pipelining: 1 });
    pools.push(pool);
    return { pool, headers: { 'content-type': 'application/json', ...headers } };
  };
  const routerTarget = target(routerUrl, { authorization: `Bearer ${key}` });
  const targets = {
    instant: {
      direct: target(instant.match[1], {}),
      router: routerTarget,
      bare: target(bareProcs.instant.match[1], {}),
      bodies: bodies('instant'),
    },
    paced: {
      direct: target(paced.match[1], {}),
      router: routerTarget,
      bare: target(bareProcs.paced.match[1], {}),
      bodies: bodies('paced'),
    },
    chunks: {
      direct: target(chunksSim.match[1], {}),
      router: routerTarget,
      bare: target(bareProcs.chunks.match[1], {}),
      nginx: nginx ? target(nginx.url, {}) : null,
      relay: target(relay.match[1], {}),
      bodies: bodies('chunks'),
    },
  };
  const whole = (t, b) => async () => {
    const res = await t.pool.request({
      path: '/v1/chat/completions',
      method: 'POST',
      headers: t.headers,
      body: b.whole,
    });
    await res.body.text();
    return res.statusCode === 200;
  };
  const streamed = (t, b) => async () => {
    const res = await t.pool.request({
      path: '/v1/chat/completions',
      method: 'POST',
      headers: t.headers,
      body: b.stream,
    });
    let tail = '';
    for await (const chunk of res.body) tail = chunk.toString('latin1').slice(-32);
    return res.statusCode === 200 && tail.endsWith('data: [DONE]\n\n');
  };

  /**
   * The `gateways` phase: a router of one gateway process and one of two,
   * each given all --cpu-connections clients by turns of --slice-ms (direct
   * to the instant sim too, for its ceiling), so a stall of the machine
   * falls on all three alike. Requests per second through two against one.
   */
  const compareGateways = async () => {
    const [one, two] = [await startRouter(1), await startRouter(2)];
    const tOne = target(one.url, { authorization: `Bearer ${one.key}` });
    const tTwo = target(two.url, { authorization: `Bearer ${two.key}` });
    const b = targets.instant.bodies;
    try {
      for (const t of [tOne, tTwo]) await drive(cpuConns, 3000, limitMs, whole(t, b));
      const cpu0 = [one.cpu(), two.cpu()];
      const [d, r1, r2] = await drive(
        cpuConns,
        Number.MAX_SAFE_INTEGER,
        Number(flags['paced-seconds']) * 1000,
        [whole(targets.instant.direct, b), whole(tOne, b), whole(tTwo, b)],
        0,
        Number(flags['warm-ms']),
        { ms: Number(flags['slice-ms']), settleMs: 300 },
      );
      const cpu1 = [one.cpu(), two.cpu()];
      const us = (i, r) => (cpu0[i] === null || cpu1[i] === null ? null : ((cpu1[i] - cpu0[i]) * 1e6) / r.sent);
      const res = { d, one: r1, two: r2, ratio: r2.rate / r1.rate, cpuOne: us(0, r1), cpuTwo: us(1, r2) };
      const cpuText = (x) => (x === null ? '' : `, CPU ${Math.round(x)} µs/request`);
      console.log(
        `instant sim, non-streaming, ${cpuConns} connections to each (direct, 1 gateway process, 2 by turns of ${flags['slice-ms']} ms): ` +
          `direct ${Math.round(d.rate)}/s p50 ${fmt(d.p50)} ms (errors ${d.errors}); ` +
          `1 gateway ${Math.round(r1.rate)}/s p50 ${fmt(r1.p50)} ms p99 ${fmt(r1.p99)} ms${cpuText(res.cpuOne)} (errors ${r1.errors}); ` +
          `2 gateways ${Math.round(r2.rate)}/s p50 ${fmt(r2.p50)} ms p99 ${fmt(r2.p99)} ms${cpuText(res.cpuTwo)} (errors ${r2.errors}); ` +
          `2 vs 1: ${res.ratio.toFixed(2)}× requests/s` +
          (d.errors || r1.errors || r2.errors ? ' — ERRORS' : ''),
      );
      if (hasWrk()) res.wrk = await gatewaysByWrk([one, two], b.whole);
      return res;
    } finally {
      // Their pools are closed with the others at the end.
      await Promise.all([stop(one.child), stop(two.child)]);
    }
  };
  /**
   * The same question asked with wrk (bench/wrk.mjs says why): the routers
   * of one and two gateway processes loaded in turn, --rounds runs of
   * --seconds each at --cpu-connections, the first one first in even
   * rounds and the other in odd ones, after a warm-up of each. Requests per
   * second of all rounds pooled, two against one, and CPU per request.
   */
  const gatewaysByWrk = async (routers, body) => {
    const load = (r, seconds) =>
      runWrk({
        url: `${r.url}/v1/chat/completions`,
        headers: { authorization: `Bearer ${r.key}` },
        body,
        connections: cpuConns,
        seconds,
      });
    for (const r of routers) await load(r, 2);
    const sums = routers.map(() => ({ requests: 0, seconds: 0, bad: 0, cpu: 0, rates: [] }));
    for (let n = 0; n < Number(flags.rounds); n++) {
      for (const i of n % 2 ? [1, 0] : [0, 1]) {
        const c0 = routers[i].cpu();
        const w = await load(routers[i], Number(flags.seconds));
        const c1 = routers[i].cpu();
        const sum = sums[i];
        sum.requests += w.requests;
        sum.seconds += w.seconds;
        sum.bad += w.non2xx + w.socketErrors;
        sum.cpu = sum.cpu === null || c0 === null || c1 === null ? null : sum.cpu + (c1 - c0);
        sum.rates.push(w.rate);
      }
    }
    const [one, two] = sums.map((x) => ({
      rate: x.requests / x.seconds,
      cpuUs: x.cpu === null ? null : (x.cpu * 1e6) / x.requests,
      bad: x.bad,
      rates: x.rates,
    }));
    const ratio = two.rate / one.rate;
    const text = (name, x) =>
      `${name} ${Math.round(x.rate)}/s (${x.rates.map(Math.round).join(', ')} by round)` +
      `${x.cpuUs === null ? '' : `, CPU ${Math.round(x.cpuUs)} µs/request`}${x.bad ? `, ${x.bad} ERRORS` : ''}`;
    console.log(
      `instant sim, non-streaming, ${cpuConns} connections from wrk (one thread) to each in turn, ${flags.rounds} rounds of ${flags.seconds} s: ` +
        `${text('1 gateway', one)}; ${text('2 gateways', two)}; 2 vs 1: ${ratio.toFixed(2)}× requests/s`,
    );
    return { one, two, ratio, errors: one.bad + two.bad };
  };
  /**
   * Each of `routers` (targets `ts`) given all --cpu-connections clients by
   * turns of --slice-ms for --paced-seconds, after a warm-up of each alone;
   * their results and CPU per request, read `afterMs` past the last answer.
   */
  const byTurns = async (
    routers,
    ts,
    make,
    b,
    afterMs,
    { warm = true, seconds = flags['paced-seconds'], together = false } = {},
  ) => {
    if (warm) for (const t of ts) await drive(cpuConns, 2000, limitMs, make(t, b));
    const cpu0 = routers.map((r) => r.cpu());
    const rs = await drive(
      cpuConns,
      Number.MAX_SAFE_INTEGER,
      Number(seconds) * 1000,
      ts.map((t) => make(t, b)),
      0,
      Number(flags['warm-ms']),
      // Together: each client sends to every router in turn, request by request, so all of them are loaded at once.
      together ? null : { ms: Number(flags['slice-ms']), settleMs: 300 },
    );
    if (afterMs) await new Promise((resolve) => setTimeout(resolve, afterMs));
    const cpu1 = routers.map((r) => r.cpu());
    const us = rs.map((r, i) => (cpu0[i] === null || cpu1[i] === null ? null : ((cpu1[i] - cpu0[i]) * 1e6) / r.sent));
    return { rs, us };
  };
  /**
   * The `tenancy` phase (--phases tenancy): a router with no teams or
   * budgets beside one whose key is in a team with model and per-minute
   * limits and hard budgets in tokens and dollars, every model priced
   * (bench/tenancy.mjs); whole answers from the instant sim, then
   * --chunks-chunk streams. Each router's CPU per request, side by side in
   * one run. With --tenancy-load together (the default) the --cpu-connections
   * clients send to both routers in turn, request by request, so both are
   * loaded at the same moments: CPU time per request on this VM moved by up
   * to 40% between consecutive seconds of one process, which by turns of
   * --slice-ms fell on one router and not the other (15 rounds' ratios
   * spread 0.92 to 1.26 by turns, 1.00 to 1.17 together, in runs one after
   * the other). With turns, each is given all the clients by turns of
   * --slice-ms. Both
   * keys have the same limits of their own (allowed models, requests and
   * tokens per minute: --key-limits), which keys had before teams: the
   * difference is the team's narrowing, the budgets and the prices.
   */
  const compareTenancy = async () => {
    const names = ['key limits, no teams or budgets', 'key limits, team, budgets, prices'];
    const out = {};
    for (const [kind, sim, make] of [
      ['whole', 'instant', whole],
      ['stream', 'chunks', streamed],
    ]) {
      // --rounds rounds of --seconds each, the first router first in even rounds and second in odd ones; the
      // figure is the median round's ratio, so a burst of the neighbours' load spoils one round, not the result.
      // Each round starts both routers afresh and warms them by turns before it counts: one process's luck (how
      // V8 compiled its hot functions, where its heap landed) moved a whole run of rounds by up to 30% on this
      // VM, in either direction, so a run of rounds on the same two processes measured them, not the code.
      const rounds = [];
      for (let n = 1; n <= Number(flags.rounds); n++) {
        const routers = [await startRouter(1, ['--key-limits']), await startRouter(1, ['--tenancy'])];
        try {
          const ts = routers.map((r) => target(r.url, { authorization: `Bearer ${r.key}` }));
          const order = n % 2 ? [1, 0] : [0, 1];
          const { rs, us } = await byTurns(
            order.map((i) => routers[i]),
            order.map((i) => ts[i]),
            make,
            targets[sim].bodies,
            0,
            { warm: true, seconds: flags.seconds, together: flags['tenancy-load'] === 'together' },
          );
          const back = n % 2 ? [1, 0] : [0, 1];
          rounds.push({ rs: back.map((i) => rs[i]), us: back.map((i) => us[i]) });
        } finally {
          await Promise.all(routers.map((r) => stop(r.child)));
        }
      }
      const ratios = rounds.map((r) => (r.us[0] && r.us[1] ? r.us[1] / r.us[0] : null));
      const ratio = ratios.includes(null) ? null : [...ratios].sort((x, y) => x - y)[Math.floor(ratios.length / 2)];
      const sum = (i, f) => rounds.reduce((n, r) => n + f(r, i), 0);
      const us = [0, 1].map((i) => sum(i, (r) => r.us[i] * r.rs[i].sent) / sum(i, (r) => r.rs[i].sent));
      const errors = sum(0, (r) => r.rs[0].errors + r.rs[1].errors);
      out[kind] = { us, ratio, pooled: us[1] / us[0], errors };
      console.log(
        `${kind === 'whole' ? 'instant sim, non-streaming' : `${chunkCount}-chunk streams`}, ${cpuConns} connections ${flags['tenancy-load'] === 'together' ? 'to both routers at once, request by request' : `to each router by turns of ${flags['slice-ms']} ms`}, ${rounds.length} rounds of ${flags.seconds} s on fresh routers: ` +
          names
            .map(
              (name, i) =>
                `${name} CPU ${Math.round(us[i])} µs/request over ${sum(i, (r) => r.rs[i].sent)} requests (${rounds.map((r) => Math.round(r.us[i])).join(', ')} by round; ${Math.round(sum(i, (r) => r.rs[i].rate) / rounds.length)}/s)`,
            )
            .join('; ') +
          `; CPU/request with tenancy vs without: by round ${ratios.map((x) => (x === null ? '?' : x.toFixed(3))).join(', ')}; median ${ratio === null ? '?' : `${ratio.toFixed(3)}×`}, pooled ${out[kind].pooled.toFixed(3)}×` +
          (errors ? ` — ${errors} ERRORS` : ''),
      );
    }
    return out;
  };
  /**
   * The `traces` phase (--traces, or --phases traces): a router with tracing
   * off, one sampling every request and one sampling --trace-ratio of them,
   * spans sent in OTLP batches to a sink on loopback, each given all
   * --cpu-connections clients by turns of --slice-ms; whole answers from the
   * instant sim (the router's own work weighs most there), then --chunks-chunk
   * streams. Each router's CPU per request, side by side in one run.
   */
  const compareTracing = async () => {
    const sink = await startSink();
    const ratio = flags['trace-ratio'];
    const routers = [
      await startRouter(1),
      await startRouter(1, ['--trace', sink.url, '--trace-ratio', '1']),
      await startRouter(1, ['--trace', sink.url, '--trace-ratio', ratio]),
    ];
    const names = ['untraced', 'traced (all sampled)', `traced (${ratio} sampled)`];
    const ts = routers.map((r) => target(r.url, { authorization: `Bearer ${r.key}` }));
    const out = {};
    try {
      for (const [kind, sim, make] of [
        ['whole', 'instant', whole],
        ['stream', 'chunks', streamed],
      ]) {
        // The last batch goes out within the schedule delay (200 ms): its export is counted too.
        const { rs, us } = await byTurns(routers, ts, make, targets[sim].bodies, 1000);
        const res = {
          us,
          all: us[0] && us[1] ? us[1] / us[0] : null,
          sampled: us[0] && us[2] ? us[2] / us[0] : null,
        };
        out[kind] = res;
        console.log(
          `${kind === 'whole' ? 'instant sim, non-streaming' : `${chunkCount}-chunk streams`}, ${cpuConns} connections to each router by turns of ${flags['slice-ms']} ms: ` +
            rs
              .map(
                (r, i) =>
                  `${names[i]} ${Math.round(r.rate)}/s p50 ${fmt(r.p50)} ms p99 ${fmt(r.p99)} ms, CPU ${Math.round(us[i] ?? NaN)} µs/request (errors ${r.errors})`,
              )
              .join('; ') +
            `; CPU/request vs untraced: all sampled ${res.all === null ? '?' : `${res.all.toFixed(3)}×`}, ${ratio} sampled ${res.sampled === null ? '?' : `${res.sampled.toFixed(3)}×`}` +
            `; the sink took ${sink.batches()} OTLP batches, ${(sink.bytes() / 2 ** 20).toFixed(1)} MiB` +
            (rs.some((r) => r.errors) ? ' — ERRORS' : ''),
        );
      }
      return out;
    } finally {
      await Promise.all(routers.map((r) => stop(r.child)));
      await sink.close();
    }
  };
  const fmt = (x) => x.toFixed(2);
  const thinkMs = Number(flags['think-ms']);
  const chunkCount = Number(flags.chunks);
  const cpuConns = Number(flags['cpu-connections']);
  const results = {};
  try {
    // Warm every path (JIT, pools) before measuring.
    // A server runs warm: concurrent and sequential rounds first, so the sequential phase does not time the JIT's tiers.
    for (const side of ['direct', 'router', 'bare']) {
      await drive(Math.min(50, connections), 1500, limitMs, whole(targets.instant[side], targets.instant.bodies));
      await drive(1, 3000, limitMs, whole(targets.instant[side], targets.instant.bodies));
    }
    for (const side of ['direct', 'router', 'bare', 'nginx']) {
      if (targets.chunks[side])
        await drive(cpuConns, 500, limitMs, streamed(targets.chunks[side], targets.chunks.bodies));
    }
    const requests = Number(flags.requests);
    const streams = Number(flags.streams);
    const warmMs = Number(flags['warm-ms']);
    const phases = [
      {
        id: 'seq',
        name: 'instant sim, non-streaming, sequential',
        sim: 'instant',
        conns: 1,
        count: requests,
        make: whole,
        tokens: 0,
        interleave: true,
      },
      {
        id: 'seqStream',
        name: 'instant sim, streaming, sequential',
        sim: 'instant',
        conns: 1,
        count: streams,
        make: streamed,
        tokens: streamTokens,
      },
      {
        id: 'conc',
        name: `paced sim, non-streaming, ${connections} connections (direct, routed and bare proxy in turn)`,
        sim: 'paced',
        conns: connections,
        count: requests * 10,
        make: whole,
        tokens: 0,
        think: thinkMs,
        interleave: true,
        warmMs,
        limitMs: Number(flags['paced-seconds']) * 1000,
      },
      {
        id: 'concEach',
        name: `paced sim, non-streaming, ${connections} connections to each (direct, routed and bare proxy by turns of ${flags['slice-ms']} ms)`,
        sim: 'paced',
        conns: connections,
        count: requests * 10,
        make: whole,
        tokens: 0,
        think: thinkMs,
        interleave: true,
        warmMs,
        limitMs: Number(flags['paced-seconds']) * 1500,
        slice: { ms: Number(flags['slice-ms']), settleMs: 300 },
      },
      {
        id: 'concStream',
        name: `paced sim, streaming, ${connections} connections`,
        sim: 'paced',
        conns: connections,
        count: streams * 3,
        make: streamed,
        tokens: streamTokens,
        think: thinkMs,
        warmMs,
      },
      {
        id: 'seqChunks',
        name: `${chunkCount}-chunk streams, sequential (direct, routed, bare proxy, byte relay${nginx ? ', nginx' : ''} in turn)`,
        sim: 'chunks',
        conns: 1,
        count: streams,
        make: streamed,
        tokens: chunkCount,
        interleave: true,
        relay: true,
        tail: true,
      },
      {
        id: 'cpuChunks',
        name: `${chunkCount}-chunk streams, ${cpuConns} connections (direct, routed, bare proxy${nginx ? ', nginx' : ''} in turn)`,
        sim: 'chunks',
        conns: cpuConns,
        count: streams * 5,
        make: streamed,
        tokens: chunkCount,
        interleave: true,
        warmMs,
      },
      {
        id: 'cpuWhole',
        name: `instant sim, non-streaming, ${cpuConns} connections (direct, routed, bare proxy in turn)`,
        sim: 'instant',
        conns: cpuConns,
        count: requests * 3,
        make: whole,
        tokens: 0,
        interleave: true,
        warmMs,
      },
      {
        id: 'ceiling',
        name: `instant sim, non-streaming, ${connections} connections (the router's ceiling)`,
        sim: 'instant',
        conns: connections,
        count: requests * 3,
        make: whole,
        tokens: 0,
        warmMs,
      },
    ];
    const only = flags.phases ? new Set(flags.phases.split(',')) : null;
    for (const p of phases) {
      if (only && !only.has(p.id)) continue;
      const t = targets[p.sim];
      const simPid = sims[p.sim].child.pid;
      const sim0 = cpuSeconds(simPid);
      const cpu0 = routerProc.cpu();
      const bare0 = cpuSeconds(bareProcs[p.sim].child.pid);
      const phaseMs = p.limitMs ?? limitMs;
      let d;
      let r;
      let b = null;
      let n = null;
      let rl = null;
      let simRequests;
      const nginx0 = t.nginx ? cpuSeconds(nginx.child.pid) : null;
      if (p.interleave) {
        // Direct, routed, the bare proxy (the byte relay where the phase asks, nginx where there is one) in turn, in one run.
        const ways = [p.make(t.direct, t.bodies), p.make(t.router, t.bodies), p.make(t.bare, t.bodies)];
        if (p.relay) ways.push(p.make(t.relay, t.bodies));
        if (t.nginx) ways.push(p.make(t.nginx, t.bodies));
        const each = await drive(p.conns, p.count * ways.length, phaseMs, ways, p.think, p.warmMs, p.slice);
        [d, r, b] = each;
        if (p.relay) rl = each[3];
        if (t.nginx) n = each.at(-1);
        simRequests = each.reduce((sum, x) => sum + x.sent, 0);
      } else {
        d = await drive(p.conns, p.count, phaseMs, p.make(t.direct, t.bodies), p.think, p.warmMs);
        simRequests = d.sent;
      }
      const bare1 = cpuSeconds(bareProcs[p.sim].child.pid);
      const bareUs = b && bare0 !== null && bare1 !== null ? ((bare1 - bare0) * 1e6) / b.sent : null;
      const nginx1 = t.nginx ? cpuSeconds(nginx.child.pid) : null;
      const nginxUs = n && nginx0 !== null && nginx1 !== null ? ((nginx1 - nginx0) * 1e6) / n.sent : null;
      const sim1 = cpuSeconds(simPid);
      const simUs = sim0 === null || sim1 === null ? null : ((sim1 - sim0) * 1e6) / simRequests;
      const cpuR0 = p.interleave ? cpu0 : routerProc.cpu();
      if (!p.interleave) r = await drive(p.conns, p.count, phaseMs, p.make(t.router, t.bodies), p.think, p.warmMs);
      const cpu1 = routerProc.cpu();
      // The router's own CPU per request: unlike wall-clock latency, not inflated by neighbours on a shared machine.
      const cpuUs = cpuR0 === null || cpu1 === null ? null : ((cpu1 - cpuR0) * 1e6) / r.sent;
      const res = {
        d,
        r,
        b,
        addedP50: r.p50 - d.p50,
        addedP90: r.p90 - d.p90,
        addedP99: r.p99 - d.p99,
        throughput: r.rate / d.rate,
        tokenShare: null,
        cpuUs,
        bareUs,
        nginxAddedP50: n ? n.p50 - d.p50 : null,
        rl,
      };
      // The tail phases also print p90: a p99 far above it is a stall, not a steady cost.
      const added = (x) =>
        p.tail
          ? `p50 ${fmt(x.p50 - d.p50)} ms p90 ${fmt(x.p90 - d.p90)} ms p99 ${fmt(x.p99 - d.p99)} ms`
          : `p50 ${fmt(x.p50 - d.p50)} ms p99 ${fmt(x.p99 - d.p99)} ms`;
      let line =
        `${p.name}: direct p50 ${fmt(d.p50)} ms p99 ${fmt(d.p99)} ms ${Math.round(d.rate)}/s (${d.done}, errors ${d.errors}); ` +
        `routed p50 ${fmt(r.p50)} ms p99 ${fmt(r.p99)} ms ${Math.round(r.rate)}/s (${r.done}, errors ${r.errors}); ` +
        `added ${added(r)}` +
        (p.interleave
          ? `; direct, routed and bare proxy${rl ? ' and byte relay' : ''}${n ? ' and nginx' : ''} in turn`
          : `; throughput ${res.throughput.toFixed(2)}× direct`) +
        (cpuUs === null
          ? ''
          : `; router CPU ${Math.round(cpuUs)} µs/request${p.tokens ? ` (${((cpuUs * 1000) / p.tokens).toFixed(0)} ns/token)` : ''}`) +
        (simUs === null ? '' : ` (the sim's own: ${Math.round(simUs)} µs/request)`);
      if (p.tokens) {
        const dt = ((d.done - d.errors) * p.tokens) / d.seconds;
        const rt = ((r.done - r.errors) * p.tokens) / r.seconds;
        res.tokenShare = rt / dt;
        line += `; tokens/s direct ${Math.round(dt)} routed ${Math.round(rt)} (${Math.round(100 * res.tokenShare)}%)`;
      }
      if (b)
        line += `; a bare Node proxy (node:http + undici, nothing else) adds ${added(b)}${bareUs === null ? '' : `, CPU ${Math.round(bareUs)} µs/request`}`;
      if (rl) line += `; a byte relay (node:net, no HTTP) adds ${added(rl)}`;
      if (n) line += `; nginx adds ${added(n)}${nginxUs === null ? '' : `, CPU ${Math.round(nginxUs)} µs/request`}`;
      if (cpuUs !== null && bareUs !== null)
        line += `; router CPU/request ${(cpuUs / bareUs).toFixed(2)}× the bare proxy's`;
      if (d.errors || r.errors || b?.errors || n?.errors) line += ' — ERRORS';
      results[p.id] = res;
      console.log(line);
    }
    if (!only || only.has('gateways')) results.gateways = await compareGateways();
    if (flags.traces || only?.has('traces')) results.traces = await compareTracing();
    if (only?.has('tenancy')) results.tenancy = await compareTenancy();
  } finally {
    await Promise.all(pools.map((p) => p.close()));
    await stop(routerProc.child);
    await Promise.all(Object.values(bareProcs).map((b) => stop(b.child)));
    if (nginx) await stop(nginx.child);
    await stop(relay.child);
    await Promise.all(Object.values(sims).map((s) => stop(s.child)));
  }
  // Beside each latency target: what a bare Node proxy added in the same run, the floor on this machine.
  const floor = (res, pick) => (res.b ? ` (bare Node proxy: ${fmt(pick(res.b) - pick(res.d))} ms)` : '');
  const checks = [
    [
      'seq',
      (r) => [`sequential added p50 < 0.5 ms`, r.addedP50 < 0.5, `${fmt(r.addedP50)} ms${floor(r, (x) => x.p50)}`],
    ],
    [
      'conc',
      (r) => [
        `${connections} connections in turn (paced) added p50 < 1 ms`,
        r.addedP50 < 1,
        `${fmt(r.addedP50)} ms${floor(r, (x) => x.p50)}`,
      ],
    ],
    [
      'conc',
      (r) => [
        `${connections} connections in turn (paced) added p99 < 5 ms`,
        r.addedP99 < 5,
        `${fmt(r.addedP99)} ms${floor(r, (x) => x.p99)}`,
      ],
    ],
    [
      'concEach',
      (r) => [
        `${connections} connections to each (paced) added p50 < 1 ms`,
        r.addedP50 < 1,
        `${fmt(r.addedP50)} ms${floor(r, (x) => x.p50)}`,
      ],
    ],
    [
      'concEach',
      (r) => [
        `${connections} connections to each (paced) added p99 < 5 ms`,
        r.addedP99 < 5,
        `${fmt(r.addedP99)} ms${floor(r, (x) => x.p99)}`,
      ],
    ],
    [
      'seqChunks',
      (r) => [
        `${chunkCount}-chunk streams, sequential, added p99 < 1 ms`,
        r.addedP99 < 1,
        `${fmt(r.addedP99)} ms (p90 ${fmt(r.addedP90)} ms)${floor(r, (x) => x.p99)}`,
      ],
    ],
    [
      'seqChunks',
      (r) => [
        `${chunkCount}-chunk streams, sequential, added p50 <= 2.5× nginx's`,
        r.nginxAddedP50 !== null && r.addedP50 <= 2.5 * r.nginxAddedP50,
        r.nginxAddedP50 === null
          ? 'nginx is not installed'
          : `${(r.addedP50 / r.nginxAddedP50).toFixed(2)}× (+${fmt(r.addedP50)} ms against +${fmt(r.nginxAddedP50)})${floor(r, (x) => x.p50)}` +
            (r.rl === null
              ? ''
              : `; against nginx's, the bare proxy ${((r.b.p50 - r.d.p50) / r.nginxAddedP50).toFixed(2)}×, the byte relay (no HTTP) ${((r.rl.p50 - r.d.p50) / r.nginxAddedP50).toFixed(2)}×`),
      ],
    ],
    [
      'cpuChunks',
      (r) => [
        `${chunkCount}-chunk streams at ${cpuConns} connections, router CPU/request <= 1.2× the bare proxy's`,
        r.bareUs !== null && r.cpuUs <= 1.2 * r.bareUs,
        r.bareUs === null
          ? 'no /proc'
          : `${(r.cpuUs / r.bareUs).toFixed(2)}× (${Math.round(r.cpuUs)} vs ${Math.round(r.bareUs)} µs)`,
      ],
    ],
    [
      'cpuWhole',
      (r) => [
        `non-streaming at ${cpuConns} connections, router CPU/request <= 1.2× the bare proxy's`,
        r.bareUs !== null && r.cpuUs <= 1.2 * r.bareUs,
        r.bareUs === null
          ? 'no /proc'
          : `${(r.cpuUs / r.bareUs).toFixed(2)}× (${Math.round(r.cpuUs)} vs ${Math.round(r.bareUs)} µs)`,
      ],
    ],
    [
      'gateways',
      (r) => [
        `2 gateways > 1 at ${cpuConns} connections (requests/s, instant sim${r.wrk ? ', load from wrk' : ''})`,
        r.wrk ? r.wrk.ratio > 1 && r.wrk.errors === 0 : r.ratio > 1,
        r.wrk
          ? `${r.wrk.ratio.toFixed(2)}× (${Math.round(r.wrk.two.rate)} vs ${Math.round(r.wrk.one.rate)}/s; from the bench's own load generator ${r.ratio.toFixed(2)}×)`
          : `${r.ratio.toFixed(2)}× (${Math.round(r.two.rate)} vs ${Math.round(r.one.rate)}/s; wrk is not installed, and this load generator's own CPU is most of what a second process would use)`,
      ],
    ],
    [
      'traces',
      (r) => [
        `tracing on, ${flags['trace-ratio']} of requests sampled, <= 1.10× router CPU/request (non-streaming)`,
        r.whole.sampled !== null && r.whole.sampled <= 1.1,
        r.whole.sampled === null
          ? 'no /proc'
          : `${r.whole.sampled.toFixed(3)}× (all sampled: ${r.whole.all.toFixed(3)}×)`,
      ],
    ],
    [
      'traces',
      (r) => [
        `tracing on, ${flags['trace-ratio']} of requests sampled, <= 1.10× router CPU/request (${chunkCount}-chunk streams)`,
        r.stream.sampled !== null && r.stream.sampled <= 1.1,
        r.stream.sampled === null
          ? 'no /proc'
          : `${r.stream.sampled.toFixed(3)}× (all sampled: ${r.stream.all.toFixed(3)}×)`,
      ],
    ],
    ...['whole', 'stream'].map((kind) => [
      'tenancy',
      (r) => [
        `teams, limits and budgets on, <= 1.05× router CPU/request (${kind === 'whole' ? 'non-streaming' : `${chunkCount}-chunk streams`})`,
        r[kind].ratio !== null && r[kind].ratio <= 1.05 && r[kind].errors === 0,
        r[kind].ratio === null
          ? 'no /proc'
          : `${r[kind].ratio.toFixed(3)}×, the median of ${flags.rounds} rounds (pooled ${r[kind].pooled.toFixed(3)}×: ${Math.round(r[kind].us[1])} vs ${Math.round(r[kind].us[0])} µs)${r[kind].errors ? `, ${r[kind].errors} errors` : ''}`,
      ],
    ]),
    [
      'concStream',
      (r) => [
        `streamed tokens relayed >= 90% of direct (paced, ${connections} streams)`,
        r.tokenShare >= 0.9,
        `${Math.round(100 * r.tokenShare)}%`,
      ],
    ],
  ]
    .filter(([id]) => results[id])
    .map(([id, check]) => check(results[id]));
  console.log('targets:');
  for (const [what, ok, got] of checks) console.log(`  ${ok ? 'met   ' : 'MISSED'} ${what}: ${got}`);
  console.log(
    `router bench: the router as ${gatewayCount} gateway process${gatewayCount > 1 ? 'es' : ''}; sims (paced: ttft ${flags['ttft-ms']} ms, ${flags['tokens-per-second']} tokens/s per stream; clients think 0-${thinkMs} ms between paced requests; the first ${flags['warm-ms']} ms of each concurrent phase not counted) and router each in their own process, undici load generator, loopback, Node ${process.version}`,
  );
  if (checks.some(([, ok]) => !ok)) process.exitCode = 1;
}
