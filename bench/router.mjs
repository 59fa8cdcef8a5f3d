// Measures what the router adds: one sim engine on loopback, hit directly and
// through the router in the same run by the same load generator (undici), so
// the difference is llmgw's. Four phases, each run direct then routed:
// non-streaming and streaming, sequential (1 connection) and concurrent (200
// connections). Each phase stops at its request count or time limit. The sim
// and the router each run in their own process (the router from this file,
// with --serve-router), so neither shares an event loop with the load
// generator; on a 2-core machine the three still share the cores, which
// bounds the concurrent numbers.
//
// Prints per phase: latency p50/p99 direct and routed, the router's added
// latency (routed minus direct, per percentile), throughput routed/direct,
// and for streams tokens/s relayed vs direct.
//
//   npm run build && node bench/router.mjs [--requests 3000] [--streams 600]
//     [--seconds 6] [--connections 200] [--stream-tokens 256] [--max-tokens 16]
//   BENCH_PROF=/tmp/prof node bench/router.mjs   # also writes a CPU profile of the router process
//
// On Linux it also prints the router process's CPU time per request: on a
// shared machine wall-clock latency is inflated by the neighbours, CPU time
// much less so.
// Node's globals are imported by name: the lint config gives plain .mjs files no Node environment.
import { spawn } from 'node:child_process';
import console from 'node:console';
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import process from 'node:process';
import { URL } from 'node:url';
import { parseArgs } from 'node:util';
import { Pool } from 'undici';

const { values: flags } = parseArgs({
  options: {
    'serve-router': { type: 'string' },
    connections: { type: 'string', default: '200' },
    requests: { type: 'string', default: '3000' },
    streams: { type: 'string', default: '600' },
    seconds: { type: 'string', default: '6' },
    'max-tokens': { type: 'string', default: '16' },
    'stream-tokens': { type: 'string', default: '256' },
  },
});

const dist = (path) => new URL(`../dist/${path}`, import.meta.url).href;

if (flags['serve-router']) {
  await serveRouter(flags['serve-router']);
} else {
  await main();
}

/** Child mode: a client listener with the router in front of one replica at `simUrl`. Prints its URL and a key. */
async function serveRouter(simUrl) {
  const { createJsonApp } = await import(dist('control/http/index.js'));
  const { compileModel, ModelSchema } = await import(dist('control/catalog/index.js'));
  const { registerRouter, MemoryKeyStore, MemoryUsageSink, issueKey, openAiErrorShape } = await import(dist('router/index.js'));
  const { Registry } = await import('prom-client');
  const { default: pino } = await import('pino');
  const logger = pino({ level: 'silent' });
  const model = compileModel(ModelSchema.parse({ name: 'bench', source: 'file:///models/bench', profiles: [{ engine: 'sim' }] }), 'file');
  const app = createJsonApp({ logger, bodyLimitBytes: 8 << 20, shapeError: openAiErrorShape });
  const keys = new MemoryKeyStore();
  registerRouter(app, {
    catalog: { resolve: (n) => (n === 'bench' ? model : undefined), models: () => [model] },
    replicas: { ready: () => [{ id: 'r1', endpoint: simUrl, draining: false }], describe: () => 'none', demand: () => false },
    keys,
    authRequired: true,
    usage: new MemoryUsageSink(),
    registry: new Registry(),
    logger,
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const { secret } = await issueKey(keys, { name: 'bench' }, Date.now(), 'bench');
  console.log(`router listening on http://127.0.0.1:${app.server.address().port} key ${secret}`);
  process.on('SIGTERM', () => void app.close().then(() => process.exit(0)));
}

/** Spawns `args` and resolves with the first stdout match of `re` and the child. */
function spawnUntil(args, re) {
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
      const m = re.exec(out);
      if (m) resolve({ match: m, child });
    });
    child.once('exit', (c) => reject(new Error(`${args.join(' ')} exited with ${c} before listening`)));
  });
}

function stop(child) {
  return new Promise((resolve) => {
    if (child.exitCode !== null) return resolve();
    child.once('exit', resolve);
    child.kill('SIGTERM');
  });
}

/** CPU seconds (user + system) a process has used, from /proc; null where there is no /proc. */
function cpuSeconds(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // utime and stime are fields 14 and 15 of stat, in clock ticks (100 per second on Linux).
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return null;
  }
}

/** Runs `one` from `connections` workers until `count` calls or the time limit; returns calls, errors, latencies. */
async function drive(connections, count, limitMs, one) {
  let started = 0;
  let errors = 0;
  const latenciesMs = [];
  const t0 = performance.now();
  const worker = async () => {
    while (started < count && performance.now() - t0 < limitMs) {
      started++;
      const s = performance.now();
      try {
        if (!(await one())) errors++;
      } catch {
        errors++;
      }
      latenciesMs.push(performance.now() - s);
    }
  };
  await Promise.all(Array.from({ length: connections }, worker));
  const seconds = (performance.now() - t0) / 1000;
  latenciesMs.sort((a, b) => a - b);
  const pct = (p) => latenciesMs[Math.min(latenciesMs.length - 1, Math.floor(latenciesMs.length * p))] ?? NaN;
  return { done: latenciesMs.length, errors, seconds, p50: pct(0.5), p99: pct(0.99), rate: latenciesMs.length / seconds };
}

async function main() {
  const simCode = `import { runSimEngineCli } from ${JSON.stringify(dist('engine/sim/index.js'))}; await runSimEngineCli(process.argv.slice(1));`;
  const simProc = await spawnUntil(['--input-type=module', '-e', simCode, '--', '--port', '0', '--model', 'bench'], /listening on (\S+)/);
  const simUrl = simProc.match[1];
  const routerProc = await spawnUntil([...(process.env.BENCH_PROF ? ['--cpu-prof', '--cpu-prof-dir', process.env.BENCH_PROF] : []), new URL(import.meta.url).pathname, '--serve-router', simUrl], /router listening on (\S+) key (\S+)/);
  const routerUrl = routerProc.match[1];
  const key = routerProc.match[2];

  const connections = Number(flags.connections);
  const limitMs = Number(flags.seconds) * 1000;
  const streamTokens = Number(flags['stream-tokens']);
  const messages = [{ role: 'user', content: 'Benchmark the router, please.' }];
  const wholeBody = JSON.stringify({ model: 'bench', messages, max_tokens: Number(flags['max-tokens']) });
  const streamBody = JSON.stringify({ model: 'bench', messages, max_tokens: streamTokens, stream: true });
  const targets = {
    direct: { pool: new Pool(simUrl, { connections, pipelining: 1 }), headers: { 'content-type': 'application/json' } },
    router: {
      pool: new Pool(routerUrl, { connections, pipelining: 1 }),
      headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    },
  };
  const whole = (t) => async () => {
    const res = await t.pool.request({ path: '/v1/chat/completions', method: 'POST', headers: t.headers, body: wholeBody });
    await res.body.text();
    return res.statusCode === 200;
  };
  const streamed = (t) => async () => {
    const res = await t.pool.request({ path: '/v1/chat/completions', method: 'POST', headers: t.headers, body: streamBody });
    let tail = '';
    for await (const chunk of res.body) tail = chunk.toString('latin1').slice(-32);
    return res.statusCode === 200 && tail.endsWith('data: [DONE]\n\n');
  };

  const lines = [];
  try {
    // Warm both paths (JIT, pools) before measuring.
    for (const t of Object.values(targets)) await drive(Math.min(50, connections), 1500, limitMs, whole(t));
    const phases = [
      { name: 'non-streaming, sequential', conns: 1, count: Number(flags.requests), make: whole, tokens: 0 },
      { name: `non-streaming, ${connections} connections`, conns: connections, count: Number(flags.requests) * 3, make: whole, tokens: 0 },
      { name: 'streaming, sequential', conns: 1, count: Number(flags.streams), make: streamed, tokens: streamTokens },
      { name: `streaming, ${connections} connections`, conns: connections, count: Number(flags.streams) * 3, make: streamed, tokens: streamTokens },
    ];
    for (const p of phases) {
      const sim0 = cpuSeconds(simProc.child.pid);
      const d = await drive(p.conns, p.count, limitMs, p.make(targets.direct));
      const sim1 = cpuSeconds(simProc.child.pid);
      const simUs = sim0 === null || sim1 === null ? null : ((sim1 - sim0) * 1e6) / d.done;
      const cpu0 = cpuSeconds(routerProc.child.pid);
      const r = await drive(p.conns, p.count, limitMs, p.make(targets.router));
      const cpu1 = cpuSeconds(routerProc.child.pid);
      // The router's own CPU per request: unlike wall-clock latency, not inflated by neighbours on a shared machine.
      const cpuUs = cpu0 === null || cpu1 === null ? null : ((cpu1 - cpu0) * 1e6) / r.done;
      const fmt = (x) => x.toFixed(2);
      let line =
        `${p.name}: direct p50 ${fmt(d.p50)} ms p99 ${fmt(d.p99)} ms ${Math.round(d.rate)}/s (${d.done}, errors ${d.errors}); ` +
        `routed p50 ${fmt(r.p50)} ms p99 ${fmt(r.p99)} ms ${Math.round(r.rate)}/s (${r.done}, errors ${r.errors}); ` +
        `added p50 ${fmt(r.p50 - d.p50)} ms p99 ${fmt(r.p99 - d.p99)} ms; throughput ${(r.rate / d.rate).toFixed(2)}× direct` +
        (cpuUs === null ? '' : `; router CPU ${Math.round(cpuUs)} µs/request${p.tokens ? ` (${((cpuUs * 1000) / p.tokens).toFixed(0)} ns/token)` : ''}`) +
        (simUs === null ? '' : ` (the sim's own, direct: ${Math.round(simUs)} µs/request)`);
      if (p.tokens) {
        const dt = ((d.done - d.errors) * p.tokens) / d.seconds;
        const rt = ((r.done - r.errors) * p.tokens) / r.seconds;
        line += `; tokens/s direct ${Math.round(dt)} routed ${Math.round(rt)} (${Math.round((100 * rt) / dt)}%)`;
      }
      lines.push(line);
      console.log(line);
    }
  } finally {
    await Promise.all(Object.values(targets).map((t) => t.pool.close()));
    await stop(routerProc.child);
    await stop(simProc.child);
  }
  console.log(`router bench: sim and router each in their own process, undici load generator, loopback, Node ${process.version}`);
}
