// Measures the sim engine's ceiling, so a router benchmark can tell whether
// it measured llmgw or the sim: requests/s for short non-streamed chats and
// tokens/s for long streams, driven by undici over loopback. The sim runs in
// its own process (as in a router benchmark) unless --in-process is given.
// Each phase stops at its request count or its time limit, whichever first.
// On Linux it also reads the sim process's CPU time, so it can state the
// ceiling per core-second of the sim: on a shared machine the wall-clock
// rate is bounded by the client and the neighbours, the CPU cost is not.
//
//   npm run build && node bench/sim.mjs [--connections 200] [--requests 20000]
//     [--streams 2000] [--seconds 10] [--max-tokens 16] [--stream-tokens 256]
//     [--in-process]
// Node's globals are imported by name: the lint config gives plain .mjs files no Node environment.
import console from 'node:console';
import { performance } from 'node:perf_hooks';
import process from 'node:process';
import { URL } from 'node:url';
import { parseArgs } from 'node:util';
import { Pool } from 'undici';
import { cpuSeconds, simProcessArgs, spawnUntil } from './processes.mjs';

const { values: flags } = parseArgs({
  options: {
    connections: { type: 'string', default: '200' },
    requests: { type: 'string', default: '20000' },
    streams: { type: 'string', default: '2000' },
    seconds: { type: 'string', default: '10' },
    'max-tokens': { type: 'string', default: '16' },
    'stream-tokens': { type: 'string', default: '256' },
    'in-process': { type: 'boolean', default: false },
  },
});
const connections = Number(flags.connections);
const limitMs = Number(flags.seconds) * 1000;
const simModule = new URL('../dist/engine/sim/index.js', import.meta.url);

/** Starts the sim; resolves with its URL and a stop function. */
async function startSim() {
  const args = ['--port', '0', '--model', 'bench'];
  if (flags['in-process']) {
    const { startSimEngine } = await import(simModule.href);
    const engine = await startSimEngine({ models: ['bench'] });
    return { url: engine.url, pid: null, stop: () => engine.close({ graceMs: 0 }) };
  }
  const { child, match } = await spawnUntil(simProcessArgs(simModule.href, args), /listening on (\S+)/);
  const url = match[1];
  return {
    url,
    pid: child.pid,
    stop: () =>
      new Promise((resolve) => {
        child.once('exit', resolve);
        child.kill('SIGTERM');
      }),
  };
}

/** Runs `one` from `connections` workers until `count` calls or the time limit; returns calls, errors and latencies. */
async function drive(count, one) {
  let started = 0;
  let errors = 0;
  const latenciesMs = [];
  const cpu0 = cpuSeconds(sim.pid);
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
  const cpu1 = cpuSeconds(sim.pid);
  const simCpuSeconds = cpu0 === null || cpu1 === null ? null : cpu1 - cpu0;
  latenciesMs.sort((a, b) => a - b);
  const pct = (p) => latenciesMs[Math.min(latenciesMs.length - 1, Math.floor(latenciesMs.length * p))]?.toFixed(1);
  return { done: latenciesMs.length, errors, seconds, simCpuSeconds, p50: pct(0.5), p99: pct(0.99) };
}

const sim = await startSim();
const pool = new Pool(sim.url, { connections, pipelining: 1 });
const headers = { 'content-type': 'application/json' };
const messages = [{ role: 'user', content: 'Benchmark the engine, please.' }];
const wholeBody = JSON.stringify({ model: 'bench', messages, max_tokens: Number(flags['max-tokens']) });
const streamTokens = Number(flags['stream-tokens']);
const streamBody = JSON.stringify({ model: 'bench', messages, max_tokens: streamTokens, stream: true });

try {
  // Warm both sides (JIT, connections) before measuring.
  await drive(Math.min(2000, Number(flags.requests)), async () => {
    const res = await pool.request({ path: '/v1/chat/completions', method: 'POST', headers, body: wholeBody });
    await res.body.dump();
    return res.statusCode === 200;
  });

  const whole = await drive(Number(flags.requests), async () => {
    const res = await pool.request({ path: '/v1/chat/completions', method: 'POST', headers, body: wholeBody });
    await res.body.text();
    return res.statusCode === 200;
  });

  const streamed = await drive(Number(flags.streams), async () => {
    const res = await pool.request({ path: '/v1/chat/completions', method: 'POST', headers, body: streamBody });
    let tail = '';
    for await (const chunk of res.body) tail = chunk.toString('latin1').slice(-32);
    return res.statusCode === 200 && tail.endsWith('data: [DONE]\n\n');
  });

  const where = flags['in-process'] ? 'in this process' : 'in its own process';
  console.log(`sim bench: sim ${where}, undici Pool of ${connections} connections, loopback, Node ${process.version}`);
  console.log(
    `non-streaming: ${whole.done} requests (max_tokens ${flags['max-tokens']}) in ${whole.seconds.toFixed(2)} s = ` +
      `${Math.round(whole.done / whole.seconds)} requests/s, errors ${whole.errors}, latency p50 ${whole.p50} ms p99 ${whole.p99} ms`,
  );
  if (whole.simCpuSeconds) {
    console.log(
      `  sim CPU ${whole.simCpuSeconds.toFixed(2)} s: ${Math.round(whole.done / whole.simCpuSeconds)} requests per sim core-second`,
    );
  }
  const okStreams = streamed.done - streamed.errors;
  console.log(
    `streaming: ${streamed.done} streams × ${streamTokens} tokens in ${streamed.seconds.toFixed(2)} s = ` +
      `${Math.round((okStreams * streamTokens) / streamed.seconds)} tokens/s (${Math.round(streamed.done / streamed.seconds)} streams/s), ` +
      `errors ${streamed.errors}, stream p50 ${streamed.p50} ms p99 ${streamed.p99} ms`,
  );
  if (streamed.simCpuSeconds) {
    console.log(
      `  sim CPU ${streamed.simCpuSeconds.toFixed(2)} s: ${Math.round((okStreams * streamTokens) / streamed.simCpuSeconds)} streamed tokens per sim core-second`,
    );
  }
} finally {
  await pool.close();
  await sim.stop();
}
