// Does prefix-cache routing pay on real prefill? bench/cache-routing.mjs's
// question on four builtin engines (node-llama-cpp, a tiny random-weight
// model made on the spot, as bench/builtin.mjs makes it) instead of sims.
// Each choice (--baseline, least-load, then prefix-cache) gets a fresh fleet
// of --replicas engines in a child process (their evaluation does not share
// the router's event loop), behind one router, fed the same multi-turn chats
// over --system-prompts shared system prompts, open loop; the choices run
// one after the other, not side by side, because eight engines on a small
// machine would slow each other more than routing changes anything. Every
// replica names kvEvents {kind:'http', path:'/kv-events'}, so the
// prefix-cache model's index follows what each engine holds.
//
// The builtin engine counts prompt tokens but not how many of them it found
// already in the sequence, so the child counts that through the engine's own
// runtime hook (deps.loadRuntime): when a request gets its sequence, the
// prompt's common prefix with the tokens the sequence holds is what
// node-llama-cpp reuses instead of evaluating. Prints prompt tokens, prefill
// tokens computed, hit rate, TTFT p50/p99 and the ratios.
//
//   npm run build && node bench/cache-routing-builtin.mjs [--replicas 4] [--seconds 40]
//     [--sessions-per-second 0.5] [--turns 4] [--system-prompts 2] [--system-tokens 1000]
//     [--parallel 2] [--max-tokens 8] [--think-ms 500] [--embedding-length 384] [--blocks 4]
//     [--baseline least-load] [--only least-load|prefix-cache]
// Node's globals are imported by name: the lint config gives plain .mjs files no Node environment.
import { spawn } from 'node:child_process';
import console from 'node:console';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import process from 'node:process';
import { setTimeout as sleep } from 'node:timers/promises';
import { URL, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { Pool } from 'undici';
import { q, stream } from './load.mjs';
import { startGateway } from './sims.mjs';

const { values: flags } = parseArgs({
  options: {
    'serve-engines': { type: 'string' },
    dist: { type: 'string', default: new URL('../dist/', import.meta.url).pathname },
    replicas: { type: 'string', default: '4' },
    seconds: { type: 'string', default: '40' },
    'sessions-per-second': { type: 'string', default: '0.5' },
    turns: { type: 'string', default: '4' },
    'system-prompts': { type: 'string', default: '2' },
    'system-tokens': { type: 'string', default: '1000' },
    parallel: { type: 'string', default: '2' },
    'max-tokens': { type: 'string', default: '8' },
    'think-ms': { type: 'string', default: '500' },
    'embedding-length': { type: 'string', default: '384' },
    blocks: { type: 'string', default: '4' },
    'scrape-ms': { type: 'string', default: '1000' },
    baseline: { type: 'string', default: 'least-load' },
    // Absent: both choices, the baseline first.
    only: { type: 'string' },
    seed: { type: 'string', default: '7' },
  },
});

const distDir = resolve(flags.dist);
const dist = (path) => pathToFileURL(`${distDir}/${path}`).href;
const SEQUENCE_TOKENS = 3072;

/**
 * Child mode: the engines, each on one thread, counting per request the
 * prompt tokens and the prefix its sequence already held; the counts are
 * served on GET / of a small listener of their own.
 */
async function serveEngines({ count, modelPath, parallel, names }) {
  const { startBuiltinEngine } = await import(dist('engine/builtin/index.js'));
  const { BuiltinRuntime } = await import(dist('engine/builtin/llama-runtime.js'));
  const counts = { queries: 0, hits: 0, requests: 0 };
  const loadRuntime = async (options, facts) => {
    const runtime = await BuiltinRuntime.load(options, facts);
    const withSequence = runtime.withSequence.bind(runtime);
    runtime.withSequence = (signal, prompt, work) =>
      withSequence(signal, prompt, (sequence) => {
        const held = sequence.contextTokens;
        let same = 0;
        while (same < prompt.length && same < held.length && prompt[same] === held[same]) same++;
        counts.requests++;
        counts.queries += prompt.length;
        counts.hits += same;
        return work(sequence);
      });
    return runtime;
  };
  const engines = [];
  for (let i = 0; i < count; i++) {
    const engine = await startBuiltinEngine(
      {
        modelPath,
        threads: 1,
        parallel,
        contextTokens: SEQUENCE_TOKENS * parallel,
        aliases: names,
        maxQueue: 64,
        log: () => undefined,
      },
      { loadRuntime },
    );
    await engine.ready;
    engines.push(engine);
  }
  const server = createServer((_, res) => res.end(JSON.stringify(counts)));
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  console.log(
    JSON.stringify({ urls: engines.map((e) => e.url), counters: `http://127.0.0.1:${server.address().port}` }),
  );
  const stop = async () => {
    await Promise.allSettled(engines.map((e) => e.close()));
    process.exit(0);
  };
  process.on('SIGTERM', stop);
  // Gone with the bench: its end of the pipe closes when it exits, however it exits.
  process.stdin.on('end', stop);
  process.stdin.resume();
}

async function startEngines(count, options) {
  const child = spawn(
    process.execPath,
    [new URL(import.meta.url).pathname, '--dist', distDir, '--serve-engines', JSON.stringify({ count, ...options })],
    { stdio: ['pipe', 'pipe', 'inherit'] },
  );
  const line = await new Promise((resolve, reject) => {
    let text = '';
    child.stdout.on('data', (d) => {
      text += d;
      if (text.includes('\n')) resolve(text.split('\n')[0]);
    });
    child.once('exit', (code) => reject(new Error(`the engines exited with ${code}`)));
  });
  const { urls, counters } = JSON.parse(line);
  return {
    urls,
    counts: async () => (await fetch(counters)).json(),
    stop: () => new Promise((r) => (child.once('exit', r), child.kill('SIGTERM'))),
  };
}

/** mulberry32: the workload is the same for both choices and across runs. */
function seeded(seed) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}

const WORDS = 'the of and to in is that for it as was with be by on not he this are or his from at which but'.split(
  ' ',
);
function words(random, n) {
  return Array.from({ length: n }, () => WORDS[Math.floor(random() * WORDS.length)]).join(' ');
}

/** The sessions of the run, made once: [{ at, system, steps: [{ message, thinkMs }] }]. */
function workload(o) {
  const random = seeded(o.seed);
  const systems = Array.from(
    { length: o.systemPrompts },
    (_, i) => `System prompt ${i}. ${words(random, o.systemWords)}`,
  );
  const sessions = [];
  for (let at = 0; at < o.seconds * 1000; at += 1000 / o.sessionsPerSecond) {
    const steps = Array.from({ length: o.turns }, () => ({
      message: { role: 'user', content: words(random, 15 + Math.floor(random() * 30)) },
      thinkMs: o.thinkMs * (0.5 + random()),
    }));
    sessions.push({ at, system: systems[Math.floor(random() * systems.length)], steps });
  }
  return sessions;
}

async function main() {
  const o = {
    replicas: Number(flags.replicas),
    seconds: Number(flags.seconds),
    sessionsPerSecond: Number(flags['sessions-per-second']),
    turns: Number(flags.turns),
    systemPrompts: Number(flags['system-prompts']),
    // The tiny model's byte-level tokenizer makes about four tokens of each short word and its space.
    systemWords: Math.round(Number(flags['system-tokens']) / 4),
    maxTokens: Number(flags['max-tokens']),
    thinkMs: Number(flags['think-ms']),
    seed: Number(flags.seed),
  };
  const choices = flags.only ? [flags.only] : [flags.baseline, 'prefix-cache'];
  const { makeTinyModel } = await import(dist('dev/make-model/index.js'));
  const dir = await mkdtemp(join(tmpdir(), 'llmgw-cache-routing-'));
  const modelPath = join(dir, 'tiny.gguf');
  const info = await makeTinyModel(modelPath, {
    embeddingLength: Number(flags['embedding-length']),
    blockCount: Number(flags.blocks),
    headCount: 4,
    contextLength: SEQUENCE_TOKENS,
  });
  const parallel = Number(flags.parallel);
  console.log(
    `fleet: ${o.replicas} builtin engines per choice, 1 thread and ${parallel} sequences of ${SEQUENCE_TOKENS} tokens each; ` +
      `model width ${info.options.embeddingLength}, ${info.options.blockCount} blocks, vocab ${info.vocabularySize}`,
  );
  const rows = [];
  try {
    for (const choice of choices) {
      const fleet = await startEngines(o.replicas, { modelPath, parallel, names: choices });
      const { url, stopRouter } = await startRouter(choice, fleet.urls, Number(flags['scrape-ms']));
      const systemTokens = await tokenCount(fleet.urls[0], choice, workload(o)[0].system);
      const before = await fleet.counts();
      const r = { choice, sent: 0, errors: 0, ttft: [] };
      const pool = new Pool(url, { connections: 256 });
      const t0 = performance.now();
      const runs = [];
      for (const s of workload(o)) {
        await sleep(Math.max(0, t0 + s.at - performance.now()));
        runs.push(runSession(pool, choice, s, o.maxTokens, r));
      }
      await Promise.allSettled(runs);
      const after = await fleet.counts();
      await pool.close();
      await stopRouter();
      await fleet.stop();
      rows.push({ ...r, systemTokens, queries: after.queries - before.queries, hits: after.hits - before.hits });
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  report(o, rows);
}

const tokenCount = async (engine, model, prompt) =>
  (await (await fetch(`${engine}/tokenize`, { method: 'POST', body: JSON.stringify({ model, prompt }) })).json()).count;

/** One session: its turns in order, each after the last answer and a think time. */
async function runSession(pool, model, session, maxTokens, r) {
  const messages = [{ role: 'system', content: session.system }];
  for (const step of session.steps) {
    messages.push(step.message);
    r.sent++;
    const m = await chat(pool, { model, messages, max_tokens: maxTokens, temperature: 0, stream: true });
    if (!m.ok) {
      r.errors++;
      return;
    }
    r.ttft.push(m.ttftMs);
    messages.push({ role: 'assistant', content: m.text });
    await sleep(step.thinkMs);
  }
}

function report(o, rows) {
  const f = (n, d = 0) => (Number.isFinite(n) ? n.toFixed(d) : '-');
  console.log(
    `load: ${o.sessionsPerSecond} sessions/s open loop for ${o.seconds} s per choice, chats of ${o.turns} turns, ` +
      `${o.systemPrompts} system prompts of ${rows[0]?.systemTokens} tokens, ${o.maxTokens} tokens per answer`,
  );
  console.log('');
  console.log('choice          requests  err  prompt tokens  prefill tokens  hit rate   TTFT p50   TTFT p99');
  for (const r of rows) {
    r.prefill = r.queries - r.hits;
    r.p50 = q(r.ttft, 0.5);
    r.p99 = q(r.ttft, 0.99);
    console.log(
      `${r.choice.padEnd(15)} ${String(r.sent).padStart(8)} ${String(r.errors).padStart(4)} ${String(r.queries).padStart(14)} ${String(r.prefill).padStart(15)} ${f((r.hits / r.queries) * 100, 1).padStart(8)}% ${f(r.p50).padStart(7)} ms ${f(r.p99).padStart(7)} ms`,
    );
  }
  if (rows.length < 2) return;
  const [old, neu] = rows;
  console.log('');
  console.log(
    `prefix-cache / ${old.choice}: prefill ${f(neu.prefill / old.prefill, 2)}, TTFT p50 ${f(neu.p50 / old.p50, 2)}, TTFT p99 ${f(neu.p99 / old.p99, 2)}`,
  );
  const gain = neu.prefill < old.prefill && neu.p50 < old.p50;
  console.log(`target a measured gain (less prefill and a lower p50 TTFT): ${gain ? 'met' : 'MISSED'}`);
  process.exitCode = gain && neu.errors === 0 ? 0 : 1;
}

/**
 * The router in this process, as the control plane builds its client
 * listener, with one model routed by `routing` over `urls`; every replica
 * names its /kv-events (only prefix-cache reads it) and the agent's scraper
 * feeds engine load from /metrics.
 */
async function startRouter(routing, urls, scrapeMs) {
  const { LoadScraper } = await import(dist('agent/load/index.js'));
  const base = urls.map((endpoint, i) => ({
    id: `${routing}-${i}`,
    model: routing,
    endpoint,
    draining: false,
    engine: 'builtin',
    kvEvents: { kind: 'http', path: '/kv-events' },
  }));
  let ready = base;
  const scraper = new LoadScraper({
    targets: () => base.map((r) => ({ shardId: r.id, endpoint: r.endpoint })),
    intervalMs: scrapeMs,
    onChange: () => deliver(),
  });
  const deliver = () => {
    const now = Date.now();
    ready = base.map((r, i) => {
      const l = scraper.take(r.id);
      if (!l) return ready[i];
      const kv = l.kv_usage === undefined ? {} : { kvUsage: l.kv_usage };
      return { ...r, load: { running: l.running, waiting: l.waiting, ...kv, sampledAtMs: now - l.age_ms } };
    });
  };
  const beat = setInterval(deliver, 5000);
  scraper.start();
  const gw = await startGateway({
    dist,
    models: [{ name: routing, profiles: [{ engine: 'builtin' }], routing }],
    ready: (n) => (n === routing ? ready : []),
  });
  return {
    url: gw.url,
    stopRouter: async () => {
      clearInterval(beat);
      await scraper.stop();
      await gw.stop();
    },
  };
}

/** The first failure, on stderr: a run whose requests all fail says why once. */
const sayOnce = (what) => sayOnce.said || ((sayOnce.said = true), console.error(`first failure: ${what}`));

/** One streamed chat request: time to the first body chunk, and the answer's text; the first failure said. */
async function chat(pool, body) {
  const m = await stream(pool, body, { headers: { accept: 'text/event-stream' }, read: 'text' });
  if (m.error) sayOnce(m.error.message);
  else if (!m.ok) sayOnce(`${m.status} ${m.raw.slice(0, 300)}`);
  return m;
}

// Last, so every declaration above is initialised first.
if (flags['serve-engines']) await serveEngines(JSON.parse(flags['serve-engines']));
else await main();
