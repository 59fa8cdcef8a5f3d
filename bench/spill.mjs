// Does spill-over keep time to first token bounded when the local fleet is
// full? One model on local sim engines that run --max-seqs requests at a
// time each (their engines queue the rest, FIFO, as vLLM does), and a remote
// beside them (a sim with room for everything, standing in for a hosted API
// or a peer fleet). A steady open-loop load of --load times what the local
// fleet can serve is sent, streamed, in two phases on the same engines:
//  1. no spill: the model has no spill policy: everything queues locally.
//  2. spill: `spill: {to: far, when: saturated, max_queue: --max-queue-ms}`.
// The bound on p99 TTFT is the engines' own time to first token plus the
// policy's max_queue (a request may wait that long in a local queue before
// it is better sent away) plus --slack-ms for the hop and a loaded machine.
// Prints per phase: sent, answered, cut (still unanswered --grace-seconds
// after the phase; the TTFT figures are over the answered ones), the local
// and remote shares, p50/p99 TTFT, and the rules the request log gave; exits 1 when the spill phase's
// p99 misses the bound (or a request failed).
//
// The gateway runs in this process as the control plane builds its client
// listener; each local engine's load is read from its /metrics every
// --sample-ms (what an agent's heartbeat carries), so the spill decision
// sees the same samples it sees in a fleet.
//
//   npm run build && node bench/spill.mjs [--seconds 20] [--replicas 2] [--max-seqs 4] [--ttft-ms 200]
//     [--max-tokens 24] [--tokens-per-second 60] [--load 2] [--max-queue-ms 500] [--slack-ms 300]
//     [--sample-ms 250] [--grace-seconds 10]
// Node's globals are imported by name: the lint config gives plain .mjs files no Node environment.
import { spawn } from 'node:child_process';
import console from 'node:console';
import { setMaxListeners } from 'node:events';
import { loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import process from 'node:process';
import { setTimeout as sleep } from 'node:timers/promises';
import { URL } from 'node:url';
import { parseArgs } from 'node:util';
import { Pool } from 'undici';

const { values: flags } = parseArgs({
  options: {
    'serve-sims': { type: 'string' },
    seconds: { type: 'string', default: '20' },
    replicas: { type: 'string', default: '2' },
    'max-seqs': { type: 'string', default: '4' },
    'ttft-ms': { type: 'string', default: '200' },
    'max-tokens': { type: 'string', default: '24' },
    'tokens-per-second': { type: 'string', default: '60' },
    load: { type: 'string', default: '2' },
    'max-queue-ms': { type: 'string', default: '500' },
    'slack-ms': { type: 'string', default: '300' },
    'sample-ms': { type: 'string', default: '250' },
    'grace-seconds': { type: 'string', default: '10' },
  },
});

const dist = (path) => new URL(`../dist/${path}`, import.meta.url).href;

if (flags['serve-sims']) await serveSims(JSON.parse(flags['serve-sims']));
else await main();

/** Child mode: sims in a process of their own, so their pacing does not share the gateway's event loop. */
async function serveSims(groups) {
  const { startSimEngine } = await import(dist('engine/sim/index.js'));
  const urls = [];
  for (const { count, options } of groups)
    for (let i = 0; i < count; i++)
      urls.push((await startSimEngine({ models: ['m'], shutdownGraceMs: 0, ...options })).url);
  console.log(JSON.stringify(urls));
  process.on('SIGTERM', () => process.exit(0));
}

async function startSims(groups) {
  const child = spawn(process.execPath, [new URL(import.meta.url).pathname, '--serve-sims', JSON.stringify(groups)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const line = await new Promise((resolve, reject) => {
    let text = '';
    child.stdout.on('data', (d) => {
      text += d;
      if (text.includes('\n')) resolve(text.split('\n')[0]);
    });
    child.once('exit', (code) => reject(new Error(`the sims exited with ${code}`)));
  });
  return { urls: JSON.parse(line), stop: () => child.kill('SIGTERM') };
}

async function main() {
  const seconds = Number(flags.seconds);
  const replicas = Number(flags.replicas);
  const seqs = Number(flags['max-seqs']);
  const ttftMs = Number(flags['ttft-ms']);
  const maxTokens = Number(flags['max-tokens']);
  const tps = Number(flags['tokens-per-second']);
  const maxQueueMs = Number(flags['max-queue-ms']);
  const boundMs = ttftMs + maxQueueMs + Number(flags['slack-ms']);
  const graceMs = Number(flags['grace-seconds']) * 1000;
  const serviceMs = ttftMs + (maxTokens / tps) * 1000;
  const capacityRps = (replicas * seqs) / (serviceMs / 1000);
  const rps = Number(flags.load) * capacityRps;

  // The local engines, then one remote with room for everything sent to it.
  const sims = await startSims([
    { count: replicas, options: { maxConcurrency: seqs, ttftMs, tokensPerSecond: tps } },
    { count: 1, options: { ttftMs, tokensPerSecond: tps } },
  ]);
  const localUrls = sims.urls.slice(0, replicas);
  const remoteUrl = sims.urls[replicas];
  const loadsBefore = loadavg()[0];
  // The sims are a child process: ended on the way out, whatever happened.
  process.once('exit', () => sims.stop());
  const gw = await startGateway(localUrls, remoteUrl, maxQueueMs, Number(flags['sample-ms']));
  const pool = new Pool(gw.url, { connections: 1024 });

  const results = {};
  for (const phase of [
    { name: 'no spill', model: 'plain' },
    { name: 'spill', model: 'spilling' },
  ]) {
    const s = { sent: 0, ok: 0, failed: 0, cut: 0, ttft: [], ids: [] };
    const controller = new AbortController();
    // One listener per request in flight: hundreds, on purpose.
    setMaxListeners(0, controller.signal);
    const pending = [];
    await openLoop(seconds * 1000, rps, (i) => {
      s.sent++;
      const id = `${phase.model}-${i}`;
      s.ids.push(id);
      pending.push(
        stream(pool, phase.model, id, maxTokens, controller.signal).then((m) => {
          if (m.cut) s.cut++;
          else if (m.status === 200) {
            s.ok++;
            s.ttft.push(m.ttftMs);
          } else s.failed++;
        }),
      );
    });
    const cut = setTimeout(() => controller.abort(), graceMs);
    await Promise.allSettled(pending);
    clearTimeout(cut);
    // Where each answered request went and why, from the request log.
    const records = gw.requestLog(phase.model).filter((r) => r.status === 200);
    const servedBy = (r) => r.attempts.at(-1)?.replica;
    s.remote = records.filter((r) => servedBy(r) === 'remote:far').length;
    s.local = records.length - s.remote;
    s.rules = new Map();
    for (const r of records) {
      const rule = (r.attempts[0]?.rule ?? '(none)').replace(/\d+ ms/g, 'N ms');
      s.rules.set(rule, (s.rules.get(rule) ?? 0) + 1);
    }
    results[phase.name] = s;
    await waitIdle(sims.urls);
  }
  const loadsAfter = loadavg()[0];
  await pool.close();
  await gw.stop();
  sims.stop();

  const f = (n, d = 0) => (Number.isFinite(n) ? n.toFixed(d) : '-');
  console.log(
    `local fleet: ${replicas} sim engines × ${seqs} sequences, ${ttftMs} ms to first token, ${maxTokens} tokens at ${tps} tok/s: ` +
      `about ${f(capacityRps, 1)} requests/s when full; remote: one sim with no cap`,
  );
  console.log(
    `load: ${f(rps, 1)} requests/s (${flags.load}× the local fleet), streamed, open loop, ${seconds} s per phase; ` +
      `spill max_queue ${maxQueueMs} ms; p99 TTFT bound ${boundMs} ms (${ttftMs} + ${maxQueueMs} + ${flags['slack-ms']} slack)`,
  );
  console.log(`load average (1 min): ${f(loadsBefore, 1)} before, ${f(loadsAfter, 1)} after`);
  console.log('');
  console.log('phase      sent answered failed  cut  local remote  TTFT p50  TTFT p99');
  for (const [name, s] of Object.entries(results)) {
    const share = (n) => `${f((100 * n) / Math.max(1, s.local + s.remote))}%`;
    console.log(
      `${name.padEnd(9)} ${String(s.sent).padStart(5)} ${String(s.ok).padStart(8)} ${String(s.failed).padStart(6)} ${String(s.cut).padStart(4)} ` +
        `${share(s.local).padStart(6)} ${share(s.remote).padStart(6)} ${f(q(s.ttft, 0.5)).padStart(6)} ms ${f(q(s.ttft, 0.99)).padStart(6)} ms`,
    );
  }
  console.log('');
  for (const [name, s] of Object.entries(results)) {
    console.log(`rules, ${name}:`);
    for (const [rule, n] of [...s.rules].sort((a, b) => b[1] - a[1]))
      console.log(`  ${String(n).padStart(5)}  ${rule}`);
  }
  const spill = results.spill;
  const p99 = q(spill.ttft, 0.99);
  const met = p99 <= boundMs && spill.ok === spill.sent;
  console.log('');
  console.log(
    `spill p99 TTFT ${f(p99)} ms against the bound ${boundMs} ms (no spill: ${f(q(results['no spill'].ttft, 0.99))} ms); ` +
      `local ${spill.local}, remote ${spill.remote}: ${met ? 'met' : 'MISSED'}`,
  );
  process.exitCode = met ? 0 : 1;
}

function q(xs, p) {
  if (!xs.length) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(p * s.length))];
}

/** Calls `send(i)` `rps` times a second for `ms`, on a fixed schedule. */
async function openLoop(ms, rps, send) {
  const gapMs = 1000 / rps;
  const start = performance.now();
  let next = start;
  for (let i = 0; next - start < ms; i++) {
    send(i);
    next += gapMs;
    const wait = next - performance.now();
    if (wait > 0) await sleep(wait);
  }
}

/** The running and waiting counts a sim's /metrics reports (vLLM's names). */
async function engineLoad(url) {
  const text = await (await fetch(`${url}/metrics`)).text();
  const read = (name) => {
    let n = 0;
    for (const m of text.matchAll(new RegExp(`^vllm:${name}\\{[^}]*\\} (\\d+)`, 'gm'))) n += Number(m[1]);
    return n;
  };
  return { running: read('num_requests_running'), waiting: read('num_requests_waiting') };
}

/**
 * The gateway in this process, as the control plane builds its client
 * listener: `plain` and `spilling` on the same local sims (`spilling` with
 * the spill policy), and `far`, the remote.
 */
async function startGateway(localUrls, remoteUrl, maxQueueMs, sampleMs) {
  const { createJsonApp } = await import(dist('http/index.js'));
  const { compileModel, ModelSchema } = await import(dist('control/catalog/index.js'));
  const { registerRouter, openAiErrorShape, RequestLog } = await import(dist('gateway/index.js'));
  const { MemoryKeyStore, MemoryUsageSink } = await import(dist('control/keys/index.js'));
  const { Registry } = await import('prom-client');
  const { default: pino } = await import('pino');
  const logger = pino({ level: 'silent' });
  const compile = (name, extra) =>
    compileModel(
      ModelSchema.parse({ name, source: `file:///models/${name}`, profiles: [{ engine: 'sim' }], ...extra }),
      'file',
    );
  const models = new Map([
    ['plain', compile('plain', {})],
    ['spilling', compile('spilling', { spill: { to: 'far', when: 'saturated', max_queue: `${maxQueueMs}ms` } })],
    ['far', compile('far', {})],
  ]);
  let locals = localUrls.map((endpoint, i) => ({ id: `local${i}`, endpoint, draining: false, servedNames: ['m'] }));
  const remote = {
    id: 'remote:far',
    endpoint: remoteUrl,
    draining: false,
    servedNames: ['m'],
    engine: 'remote',
    remote: { kind: 'endpoint', timeoutMs: 0 },
  };
  // What an agent's heartbeat does: each local engine's load, sampled.
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      const loads = await Promise.all(locals.map((r) => engineLoad(r.endpoint).catch(() => null)));
      const at = Date.now();
      locals = locals.map((r, i) => (loads[i] ? { ...r, load: { ...loads[i], sampledAtMs: at } } : r));
      await sleep(sampleMs);
    }
  })();
  const app = createJsonApp({
    logger,
    bodyLimitBytes: 8 << 20,
    shapeError: openAiErrorShape,
    requestLoggers: false,
    requestIds: true,
  });
  const requestLog = new RequestLog(100_000);
  registerRouter(app, {
    catalog: { resolve: (n) => models.get(n), models: () => [...models.values()] },
    replicas: {
      ready: (n) => (n === 'far' ? [remote] : models.has(n) ? locals : []),
      describe: () => 'none',
      demand: () => false,
    },
    keys: new MemoryKeyStore(),
    authRequired: false,
    usage: new MemoryUsageSink(),
    registry: new Registry(),
    logger,
    timeouts: { totalTimeoutMs: 600_000 },
    requestLog,
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  return {
    url: `http://127.0.0.1:${app.server.address().port}`,
    requestLog: (model) => requestLog.list({ model, limit: 100_000 }),
    stop: async () => {
      sampling = false;
      await sampler;
      await app.close();
    },
  };
}

/** Waits until every sim is idle. */
async function waitIdle(urls) {
  for (;;) {
    let busy = 0;
    for (const url of urls) {
      const l = await engineLoad(url);
      busy += l.running + l.waiting;
    }
    if (busy === 0) return;
    await sleep(200);
  }
}

/** One streamed request: its status and the time to the first body chunk; `cut` when the bench gave up on it. */
async function stream(pool, model, id, maxTokens, signal) {
  const t0 = performance.now();
  try {
    const res = await pool.request({
      path: '/v1/chat/completions',
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-request-id': id },
      body: JSON.stringify({ model, messages: [{ role: 'user', content: id }], max_tokens: maxTokens, stream: true }),
      signal,
    });
    let ttftMs = NaN;
    for await (const chunk of res.body) {
      if (Number.isNaN(ttftMs)) ttftMs = performance.now() - t0;
      void chunk;
    }
    return { status: res.statusCode, ttftMs, cut: false };
  } catch {
    return { status: 0, ttftMs: NaN, cut: signal.aborted };
  }
}
