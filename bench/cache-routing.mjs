// Does routing by what each engine holds pay? Two identical fleets of sims
// with a simulated KV prefix cache (--kv-blocks blocks of 16 tokens, LRU,
// --prefill-ms-per-token per uncached prompt token), one behind a model
// routed as today (--baseline, least-load) and one behind `prefix-cache`,
// in one router, fed the same sessions at the same moments: multi-turn chats
// and agent loops (more steps, tool results, little think time) over
// --system-prompts shared system prompts of --system-tokens. Sessions start
// open loop (--sessions-per-second); a session's next turn follows its
// answer and think time. The sims' prefix_cache_queries/hits counters give
// prefill tokens computed and hit rate; the client times TTFT; the agent's
// scraper feeds engine load; the prefix-cache model follows GET /kv-events.
// Prints both choices, their ratios, the index's entries and heap bytes
// (kv-index-memory.mjs), and the targets: prefill and p50 TTFT −50%/−30%.
//
//   npm run build && node --expose-gc bench/cache-routing.mjs [--replicas 8] [--seconds 40]
//     [--sessions-per-second 2] [--turns 6] [--agent-share 0.4] [--system-prompts 4]
//     [--system-tokens 2000] [--kv-blocks 1500] [--prefill-ms-per-token 0.25] [--max-seqs 8]
//     [--tokens-per-second 60] [--max-tokens 24] [--think-ms 800] [--baseline least-load]
// Node's globals are imported by name: the lint config gives plain .mjs files no Node environment.
import console from 'node:console';
import { performance } from 'node:perf_hooks';
import process from 'node:process';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { Pool } from 'undici';
import { bytesPerEntry } from './kv-index-memory.mjs';
import { q, stream } from './load.mjs';
import { DEFAULT_DIST, distOf, startGateway, startSims } from './sims.mjs';

const { values: flags } = parseArgs({
  options: {
    dist: { type: 'string', default: DEFAULT_DIST },
    replicas: { type: 'string', default: '8' },
    seconds: { type: 'string', default: '40' },
    'sessions-per-second': { type: 'string', default: '2' },
    turns: { type: 'string', default: '6' },
    'agent-share': { type: 'string', default: '0.4' },
    'system-prompts': { type: 'string', default: '4' },
    'system-tokens': { type: 'string', default: '2000' },
    'kv-blocks': { type: 'string', default: '1500' },
    'prefill-ms-per-token': { type: 'string', default: '0.25' },
    'max-seqs': { type: 'string', default: '8' },
    'tokens-per-second': { type: 'string', default: '60' },
    'max-tokens': { type: 'string', default: '24' },
    'think-ms': { type: 'string', default: '800' },
    'scrape-ms': { type: 'string', default: '1000' },
    baseline: { type: 'string', default: 'least-load' },
    seed: { type: 'string', default: '7' },
  },
});

const dist = distOf(flags.dist);

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
function text(random, tokens) {
  // The sim counts 4 characters a token.
  let out = '';
  while (out.length < tokens * 4) out += `${WORDS[Math.floor(random() * WORDS.length)]} `;
  return out.slice(0, tokens * 4);
}

/** The sessions of the run, made once: [{ at, kind, system, steps: [{ message, thinkMs }] }]. */
function workload(o) {
  const random = seeded(o.seed);
  const systems = Array.from(
    { length: o.systemPrompts },
    (_, i) => `System prompt ${i}. ${text(random, o.systemTokens)}`,
  );
  const sessions = [];
  for (let at = 0; at < o.seconds * 1000; at += 1000 / o.sessionsPerSecond) {
    const agent = random() < o.agentShare;
    const steps = [];
    const n = agent ? o.turns * 2 : o.turns;
    for (let s = 0; s < n; s++) {
      const message =
        agent && s > 0
          ? { role: 'tool', content: `tool result: ${text(random, 200 + Math.floor(random() * 600))}` }
          : { role: 'user', content: text(random, 100 + Math.floor(random() * 300)) };
      steps.push({ message, thinkMs: agent ? 50 + random() * 150 : o.thinkMs * (0.5 + random()) });
    }
    sessions.push({ at, agent, system: systems[Math.floor(random() * systems.length)], steps });
  }
  return sessions;
}

async function main() {
  const o = {
    replicas: Number(flags.replicas),
    seconds: Number(flags.seconds),
    sessionsPerSecond: Number(flags['sessions-per-second']),
    turns: Number(flags.turns),
    agentShare: Number(flags['agent-share']),
    systemPrompts: Number(flags['system-prompts']),
    systemTokens: Number(flags['system-tokens']),
    maxTokens: Number(flags['max-tokens']),
    thinkMs: Number(flags['think-ms']),
    seed: Number(flags.seed),
  };
  const simOptions = {
    models: ['bench', 'least-load', 'prefix', 'least-inflight', 'prefix-cache'],
    kvCacheBlocks: Number(flags['kv-blocks']),
    prefillMsPerToken: Number(flags['prefill-ms-per-token']),
    maxConcurrency: Number(flags['max-seqs']),
    tokensPerSecond: Number(flags['tokens-per-second']),
    ttftMs: 20,
  };
  const choices = [flags.baseline, 'prefix-cache'];
  const fleets = {};
  for (const c of choices)
    fleets[c] = await startSims(
      Array.from({ length: o.replicas }, () => simOptions),
      { distDir: flags.dist },
    );
  const { url, router, stopRouter } = await startRouter(
    Object.fromEntries(choices.map((c) => [c, fleets[c].urls])),
    Number(flags['scrape-ms']),
  );
  const before = await cacheCounters(fleets);
  const sessions = workload(o);
  const pool = new Pool(url, { connections: 512 });
  const results = Object.fromEntries(choices.map((c) => [c, { sent: 0, errors: 0, ttft: [] }]));
  const t0 = performance.now();
  const runs = [];
  for (const s of sessions) {
    await sleep(Math.max(0, t0 + s.at - performance.now()));
    for (const c of choices) runs.push(runSession(pool, c, s, o.maxTokens, results[c]));
  }
  await Promise.allSettled(runs);
  const after = await cacheCounters(fleets);
  const index = router.chooser.cache.index;
  const entries = index.size;
  await pool.close();
  await stopRouter();
  for (const c of choices) fleets[c].stop();
  report(o, simOptions, choices, results, before, after, entries);
}

/** One session against one choice's model: its turns in order, each after the last answer and a think time. */
async function runSession(pool, model, session, maxTokens, r) {
  const messages = [{ role: 'system', content: session.system }];
  for (const step of session.steps) {
    messages.push(step.message);
    r.sent++;
    const m = await chat(pool, { model, messages, max_tokens: maxTokens, stream: true });
    if (!m.ok) {
      r.errors++;
      return;
    }
    r.ttft.push(m.ttftMs);
    messages.push({ role: 'assistant', content: m.text });
    await sleep(step.thinkMs);
  }
}

/** Sums each fleet's prefix-cache counters (tokens queried, tokens found cached) from its sims' /metrics. */
async function cacheCounters(fleets) {
  const out = {};
  for (const [name, fleet] of Object.entries(fleets)) {
    let queries = 0;
    let hits = 0;
    for (const u of fleet.urls) {
      const body = await (await fetch(`${u}/metrics`)).text();
      queries += Number(/^vllm:prefix_cache_queries_total(?:\{[^}]*\})? (\S+)/m.exec(body)?.[1] ?? 0);
      hits += Number(/^vllm:prefix_cache_hits_total(?:\{[^}]*\})? (\S+)/m.exec(body)?.[1] ?? 0);
    }
    out[name] = { queries, hits };
  }
  return out;
}

function report(o, sim, choices, results, before, after, entries) {
  const f = (n, d = 0) => (Number.isFinite(n) ? n.toFixed(d) : '-');
  const rows = choices.map((c) => {
    const queries = after[c].queries - before[c].queries;
    const hits = after[c].hits - before[c].hits;
    const r = results[c];
    return {
      c,
      sent: r.sent,
      errors: r.errors,
      prefill: queries - hits,
      hitRate: hits / queries,
      p50: q(r.ttft, 0.5),
      p99: q(r.ttft, 0.99),
    };
  });
  console.log(
    `fleet: ${o.replicas} sims per choice, ${sim.kvCacheBlocks} KV blocks of 16 tokens each, ${sim.prefillMsPerToken} ms prefill per uncached token, ${sim.maxConcurrency} sequences at ${sim.tokensPerSecond} tok/s`,
  );
  console.log(
    `load: ${o.sessionsPerSecond} sessions/s open loop for ${o.seconds} s (${Math.round(o.agentShare * 100)}% agent loops of ${o.turns * 2} steps, the rest chats of ${o.turns} turns), ${o.systemPrompts} system prompts of ${o.systemTokens} tokens, ${o.maxTokens} tokens per answer`,
  );
  console.log('');
  console.log('choice          requests  err  prefill tokens  hit rate   TTFT p50   TTFT p99');
  for (const r of rows)
    console.log(
      `${r.c.padEnd(15)} ${String(r.sent).padStart(8)} ${String(r.errors).padStart(4)} ${String(r.prefill).padStart(15)} ${f(r.hitRate * 100, 1).padStart(8)}% ${f(r.p50).padStart(7)} ms ${f(r.p99).padStart(7)} ms`,
    );
  const [old, neu] = rows;
  console.log('');
  console.log(
    `prefix-cache / ${old.c}: prefill ${f(neu.prefill / old.prefill, 2)}, TTFT p50 ${f(neu.p50 / old.p50, 2)}, TTFT p99 ${f(neu.p99 / old.p99, 2)}`,
  );
  return bytesPerEntry(dist, o.replicas, entries).then((m) => {
    const per = typeof m === 'number' ? m : m.perEntry;
    console.log(
      `index: ${entries} (replica, block) entries over ${o.replicas} replicas at the end; ${f(per)} heap bytes per entry (measured on ${typeof m === 'number' ? '-' : m.size} entries; run with --expose-gc), ${f((entries * per) / 2 ** 20, 1)} MiB`,
    );
    const prefillMet = neu.prefill <= 0.5 * old.prefill;
    const ttftMet = neu.p50 <= 0.7 * old.p50;
    console.log(
      `target prefill −50% or better: ${prefillMet ? 'met' : 'MISSED'}; p50 TTFT −30% or better: ${ttftMet ? 'met' : 'MISSED'}`,
    );
    process.exitCode = prefillMet && ttftMet && neu.errors === 0 ? 0 : 1;
  });
}

/**
 * The router in this process, as the control plane builds its client
 * listener, with one model per choice over its own fleet; every sim
 * publishes its cache on /kv-events (only the prefix-cache model reads it).
 */
async function startRouter(urlsByModel, scrapeMs) {
  const { LoadScraper } = await import(dist('agent/load/index.js'));
  const base = Object.entries(urlsByModel).flatMap(([model, urls]) =>
    urls.map((endpoint, i) => ({
      id: `${model}-${i}`,
      model,
      endpoint,
      draining: false,
      engine: 'sim',
      kvEvents: { kind: 'http', path: '/kv-events' },
    })),
  );
  let byModel = new Map();
  const scraper = new LoadScraper({
    targets: () => base.map((r) => ({ shardId: r.id, endpoint: r.endpoint })),
    intervalMs: scrapeMs,
    onChange: () => deliver(),
  });
  const deliver = () => {
    const now = Date.now();
    const next = new Map();
    for (const r of base) {
      const l = scraper.take(r.id);
      const replica = l
        ? {
            ...r,
            load: {
              running: l.running,
              waiting: l.waiting,
              ...(l.kv_usage === undefined ? {} : { kvUsage: l.kv_usage }),
              sampledAtMs: now - l.age_ms,
            },
          }
        : (byModel.get(r.model)?.find((x) => x.id === r.id) ?? r);
      if (!next.has(r.model)) next.set(r.model, []);
      next.get(r.model).push(replica);
    }
    byModel = next;
  };
  deliver();
  const beat = setInterval(deliver, 5000);
  scraper.start();
  const gw = await startGateway({
    dist,
    models: Object.keys(urlsByModel).map((routing) => ({ name: routing, routing })),
    ready: (n) => byModel.get(n) ?? [],
  });
  return {
    router: gw.router,
    url: gw.url,
    stopRouter: async () => {
      clearInterval(beat);
      await scraper.stop();
      await gw.stop();
    },
  };
}

/** The first failure, on stderr: a run whose requests all fail says why once. */
function sayOnce(what) {
  if (sayOnce.said) return;
  sayOnce.said = true;
  console.error(`first failure: ${what}`);
}

/** One streamed chat request: time to the first body chunk, and the answer's text; the first failure said. */
async function chat(pool, body) {
  const m = await stream(pool, body, { headers: { accept: 'text/event-stream' }, read: 'text' });
  if (m.error) sayOnce(m.error.message);
  else if (!m.ok) sayOnce(`${m.status} ${m.raw.slice(0, 300)}`);
  return m;
}

// Last, so every declaration above is initialised first.
await main();
