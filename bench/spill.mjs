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
import console from 'node:console';
import { setMaxListeners } from 'node:events';
import { loadavg } from 'node:os';
import process from 'node:process';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { Pool } from 'undici';
import { openLoop, q, stream, waitIdle } from './load.mjs';
import { distOf, engineLoad, startGateway as startSharedGateway, startSims } from './sims.mjs';

const { values: flags } = parseArgs({
  options: {
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
    ...Array.from({ length: replicas }, () => ({ models: ['m'], maxConcurrency: seqs, ttftMs, tokensPerSecond: tps })),
    { models: ['m'], ttftMs, tokensPerSecond: tps },
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
        stream(
          pool,
          { model: phase.model, messages: [{ role: 'user', content: id }], max_tokens: maxTokens, stream: true },
          { headers: { 'x-request-id': id }, signal: controller.signal },
        ).then((m) => {
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

/**
 * The gateway in this process, as the control plane builds its client
 * listener: `plain` and `spilling` on the same local sims (`spilling` with
 * the spill policy), and `far`, the remote.
 */
async function startGateway(localUrls, remoteUrl, maxQueueMs, sampleMs) {
  const dist = distOf();
  const { RequestLog } = await import(dist('gateway/index.js'));
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
  const requestLog = new RequestLog(100_000);
  const names = new Set(['plain', 'spilling', 'far']);
  const gw = await startSharedGateway({
    dist,
    models: [
      { name: 'plain' },
      { name: 'spilling', spill: { to: 'far', when: 'saturated', max_queue: `${maxQueueMs}ms` } },
      { name: 'far' },
    ],
    ready: (n) => (n === 'far' ? [remote] : names.has(n) ? locals : []),
    router: { timeouts: { totalTimeoutMs: 600_000 }, requestLog },
  });
  return {
    url: gw.url,
    requestLog: (model) => requestLog.list({ model, limit: 100_000 }),
    stop: async () => {
      sampling = false;
      await sampler;
      await gw.stop();
    },
  };
}

await main();
