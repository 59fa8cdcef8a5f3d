// Does fair share hold? Two teams on one saturated model, in one run: team A
// sends --flood times what the fleet can serve, team B a steady trickle, and
// B's time to first token is compared with B's alone on the same fleet.
//
// The fleet: --replicas sim engines, each --max-seqs sequences (its engine
// queues the rest, FIFO, as vLLM does), --ttft-ms before the first token
// (a long prompt's prefill) and on average --max-tokens (a quarter to 1.75
// times it, drawn per request) at --tokens-per-second after.
// The model declares capacity.per_replica = --max-seqs, so the gateway keeps
// what the engines cannot run in its fair-share queue. Phases, each
// --seconds of open-loop load (requests sent on a fixed schedule, whatever
// the answers):
//  1. alone: B's trickle only.
//  2. fair share: A's flood and B's trickle, to the model with a capacity.
//  3. no capacity: the same, to a model without one (every request goes to
//     the engines at once): what B meets without fair share. Requests still
//     unanswered --grace-seconds after the phase are cut and counted.
// Prints per phase and team: sent, answered, refused (429/503), p50/p99 TTFT;
// then B's p99 with A flooding over B's alone (target: at most 1.5), and A's
// share of the answers (A gets the rest of the capacity).
//
//   npm run build && node bench/fairness.mjs [--seconds 20] [--replicas 2] [--max-seqs 8]
//     [--ttft-ms 400] [--max-tokens 32] [--tokens-per-second 100] [--flood 10] [--trickle-rps 2]
//     [--grace-seconds 5]
// Node's globals are imported by name: the lint config gives plain .mjs files no Node environment.
import { spawn } from 'node:child_process';
import console from 'node:console';
import { setMaxListeners } from 'node:events';
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
    'max-seqs': { type: 'string', default: '8' },
    'ttft-ms': { type: 'string', default: '400' },
    'max-tokens': { type: 'string', default: '32' },
    'tokens-per-second': { type: 'string', default: '100' },
    flood: { type: 'string', default: '10' },
    'trickle-rps': { type: 'string', default: '2' },
    'grace-seconds': { type: 'string', default: '5' },
  },
});

const dist = (path) => new URL(`../dist/${path}`, import.meta.url).href;

if (flags['serve-sims']) await serveSims(JSON.parse(flags['serve-sims']));
else await main();

/** Child mode: the sims, in a process of their own so their pacing does not share the router's event loop. */
async function serveSims({ count, options }) {
  const { startSimEngine } = await import(dist('engine/sim/index.js'));
  const urls = [];
  for (let i = 0; i < count; i++)
    urls.push((await startSimEngine({ models: ['fair', 'plain'], shutdownGraceMs: 0, ...options })).url);
  console.log(JSON.stringify(urls));
  process.on('SIGTERM', () => process.exit(0));
}

async function startSims(count, options) {
  const child = spawn(
    process.execPath,
    [new URL(import.meta.url).pathname, '--serve-sims', JSON.stringify({ count, options })],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
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
  const trickleRps = Number(flags['trickle-rps']);
  const graceMs = Number(flags['grace-seconds']) * 1000;
  // What the fleet serves a second when full: every sequence busy, each request prefill plus generation.
  const capacityRps = (replicas * seqs) / ((ttftMs + (maxTokens / tps) * 1000) / 1000);
  const floodRps = Number(flags.flood) * capacityRps;

  const sims = await startSims(replicas, { maxConcurrency: seqs, ttftMs, tokensPerSecond: tps });
  const gw = await startGateway(sims.urls, seqs);
  // A pool per team, as two teams are two sets of clients: B's requests never wait behind A's for a connection.
  const pools = { A: new Pool(gw.url, { connections: 1024 }), B: new Pool(gw.url, { connections: 64 }) };

  const phases = [
    { name: 'alone', model: 'fair', flood: false },
    { name: 'fair share', model: 'fair', flood: true },
    { name: 'no capacity', model: 'plain', flood: true },
  ];
  const results = {};
  for (const phase of phases) {
    const teams = { A: newStats(), B: newStats() };
    const controller = new AbortController();
    // One listener per request in flight: thousands, on purpose.
    setMaxListeners(0, controller.signal);
    const pending = [];
    const load = (team, rps) =>
      openLoop(seconds * 1000, rps, (i) => {
        const s = teams[team];
        s.sent++;
        // Answers of different lengths, as real ones are: equal ones keep the fleet in lockstep, freeing every place at once.
        const tokens = Math.max(1, Math.round(maxTokens * (0.25 + 1.5 * Math.random())));
        const p = stream(
          pools[team],
          gw.keys[team],
          phase.model,
          `${team} ${phase.name} ${i}`,
          tokens,
          controller.signal,
        ).then((m) => record(s, m));
        pending.push(p);
      });
    await Promise.all([load('B', trickleRps), phase.flood ? load('A', floodRps) : Promise.resolve()]);
    const cut = setTimeout(() => controller.abort(), graceMs);
    await Promise.allSettled(pending);
    clearTimeout(cut);
    results[phase.name] = teams;
    // Let the engines' queues drain before the next phase (a cut request may still run there).
    await waitIdle(gw, sims.urls);
  }
  await Promise.all(Object.values(pools).map((p) => p.close()));
  await gw.stop();
  sims.stop();

  const f = (n, d = 0) => (Number.isFinite(n) ? n.toFixed(d) : '-');
  console.log(
    `fleet: ${replicas} sim engines × ${seqs} sequences, ${ttftMs} ms to first token, ${maxTokens} tokens at ${tps} tok/s: ` +
      `about ${f(capacityRps, 1)} requests/s when full; capacity.per_replica ${seqs}`,
  );
  console.log(
    `load: team B ${trickleRps} requests/s; team A ${f(floodRps, 1)} requests/s (${flags.flood}× the fleet); ${seconds} s per phase, open loop`,
  );
  console.log('');
  console.log('phase         team   sent answered refused   cut  TTFT p50  TTFT p99');
  for (const [name, teams] of Object.entries(results)) {
    for (const [team, s] of Object.entries(teams)) {
      if (s.sent === 0) continue;
      console.log(
        `${name.padEnd(13)} ${team.padEnd(4)} ${String(s.sent).padStart(6)} ${String(s.ok).padStart(8)} ${String(s.refused).padStart(7)} ${String(s.cut).padStart(5)} ` +
          `${f(q(s.ttft, 0.5)).padStart(6)} ms ${f(q(s.ttft, 0.99)).padStart(6)} ms`,
      );
    }
  }
  const alone = q(results.alone.B.ttft, 0.99);
  const fair = results['fair share'];
  const plain = results['no capacity'];
  const ratio = q(fair.B.ttft, 0.99) / alone;
  const plainB = plain.B.cut > 0 ? Infinity : q(plain.B.ttft, 0.99) / alone;
  const aShare = fair.A.ok / (fair.A.ok + fair.B.ok);
  console.log('');
  console.log(
    `B's p99 TTFT with A flooding / alone: fair share ${f(ratio, 2)}, without capacity ${plainB === Infinity ? `unbounded (${plain.B.cut} of B's requests still unanswered ${graceMs / 1000} s after the phase)` : f(plainB, 2)}`,
  );
  console.log(
    `A's answers under fair share: ${fair.A.ok} (${f(fair.A.ok / seconds, 1)}/s of the fleet's ~${f(capacityRps, 1)}/s; ${f(100 * aShare, 1)}% of all answered)`,
  );
  const met = ratio <= 1.5 && fair.B.ok === fair.B.sent;
  // A gets the rest: the fleet stays busy, A's answers a second at least the capacity less B's trickle, within 10%.
  const restMet = fair.A.ok / seconds >= 0.9 * (capacityRps - trickleRps);
  console.log(
    `target B's p99 within 1.5× of B alone, every B request answered: ${met ? 'met' : 'MISSED'}; A gets the rest of the capacity: ${restMet ? 'met' : 'MISSED'}`,
  );
  process.exitCode = met && restMet ? 0 : 1;
}

function newStats() {
  return { sent: 0, ok: 0, refused: 0, cut: 0, ttft: [] };
}

function record(s, m) {
  if (m.cut) s.cut++;
  else if (m.status === 429 || m.status === 503) s.refused++;
  else if (m.status === 200) {
    s.ok++;
    s.ttft.push(m.ttftMs);
  }
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

/**
 * The gateway in this process, as the control plane builds its client
 * listener: two models on the same sims, `fair` with capacity.per_replica
 * and `plain` without, and a key for each team.
 */
async function startGateway(urls, seqs) {
  const { createJsonApp } = await import(dist('http/index.js'));
  const { compileModel, ModelSchema } = await import(dist('control/catalog/index.js'));
  const { registerRouter, openAiErrorShape } = await import(dist('gateway/index.js'));
  const { MemoryKeyStore, MemoryUsageSink, issueKey } = await import(dist('control/keys/index.js'));
  const { Registry } = await import('prom-client');
  const { default: pino } = await import('pino');
  const logger = pino({ level: 'silent' });
  const compile = (name, extra) =>
    compileModel(
      ModelSchema.parse({ name, source: `file:///models/${name}`, profiles: [{ engine: 'sim' }], ...extra }),
      'file',
    );
  const models = new Map([
    ['fair', compile('fair', { capacity: { per_replica: seqs, queue_per_team: 4096, queue_timeout: '120s' } })],
    ['plain', compile('plain', {})],
  ]);
  const replicas = urls.map((endpoint, i) => ({ id: `sim${i}`, endpoint, draining: false }));
  const keyStore = new MemoryKeyStore();
  const keys = {};
  for (const team of ['A', 'B'])
    keys[team] = (await issueKey(keyStore, { name: team, team }, Date.now(), 'bench')).secret;
  const app = createJsonApp({
    logger,
    bodyLimitBytes: 8 << 20,
    shapeError: openAiErrorShape,
    requestLoggers: false,
    requestIds: true,
  });
  const registry = new Registry();
  registerRouter(app, {
    catalog: { resolve: (n) => models.get(n), models: () => [...models.values()] },
    replicas: { ready: (n) => (models.has(n) ? replicas : []), describe: () => 'none', demand: () => false },
    keys: keyStore,
    authRequired: true,
    usage: new MemoryUsageSink(),
    registry,
    logger,
    timeouts: { totalTimeoutMs: 600_000 },
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  return { url: `http://127.0.0.1:${app.server.address().port}`, keys, registry, stop: () => app.close() };
}

/** Waits until the gateway queues nothing and every sim is idle. */
async function waitIdle(gw, urls) {
  for (;;) {
    const metric = await gw.registry.getSingleMetric('llmgw_router_queued_requests')?.get();
    const queued = (metric?.values ?? []).reduce((n, v) => n + v.value, 0);
    let busy = 0;
    for (const url of urls) {
      const text = await (await fetch(`${url}/metrics`)).text();
      for (const m of text.matchAll(/^vllm:num_requests_(?:running|waiting)\{[^}]*\} (\d+)/gm)) busy += Number(m[1]);
    }
    if (queued === 0 && busy === 0) return;
    await sleep(200);
  }
}

/** One streamed request: its status and the time to the first body chunk; `cut` when the bench gave up on it. */
async function stream(pool, key, model, content, maxTokens, signal) {
  const t0 = performance.now();
  try {
    const res = await pool.request({
      path: '/v1/chat/completions',
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
      body: JSON.stringify({ model, messages: [{ role: 'user', content }], max_tokens: maxTokens, stream: true }),
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
