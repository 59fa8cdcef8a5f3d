// Does load-aware routing pay? An uneven fleet of three sim engines behind
// the router, one paced open-loop load, and the two choices side by side in
// one run: `least-inflight` (the router's own in-flight count, power of two
// choices: the choice before engines were read) and `least-load` (the
// engines' reported running and waiting requests plus the router's sends
// since the sample, the default). The fleet:
//
//  - fast: --max-seqs sequences at --tokens-per-second;
//  - slow: the same at half the token rate (an older GPU, a noisy neighbour);
//  - busy: as fast, but a second client sends it long requests directly
//    (--background-rps of --background-tokens tokens: by default 0.8 a
//    second of 5 s each, its 4 sequences' worth), so its sequences are taken
//    and requests queue inside it: long prompts the router did not send and
//    cannot count.
//
// The load is open-loop: --rps streamed chat requests a second, sent on a
// fixed schedule whatever the answers (a closed loop slows down with the
// system and hides queueing). The two choices take turns in --slice-seconds
// slices over --seconds each, so a stall of this shared machine falls on
// both; requests still in flight when a slice ends finish under the choice
// that sent them. Engine load reaches the router as it does in llmgw: the
// agent's own scraper (dist/agent/load) reads each sim's /metrics every
// --scrape-ms and hands a sample over when it is news, as the agent's
// heartbeat does; the heartbeat's own transport (a loopback HTTP hop) is
// left out.
//
// Prints, per choice: requests sent and completed, errors, p50/p99 time to
// first token (first body chunk) and total latency, tokens/s received; then
// least-load's figures as ratios of least-inflight's, and the targets: p99
// TTFT at least 30% lower, throughput (completed requests and tokens a
// second) not lower.
//
//   npm run build && node bench/routing.mjs [--seconds 40] [--slice-seconds 10]
//     [--rps 10] [--max-tokens 40] [--tokens-per-second 80] [--max-seqs 4]
//     [--background-rps 0.8] [--background-tokens 400] [--scrape-ms 1000]
// Node's globals are imported by name: the lint config gives plain .mjs files no Node environment.
import console from 'node:console';
import { performance } from 'node:perf_hooks';
import process from 'node:process';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { Pool } from 'undici';
import { openLoop, q, stream } from './load.mjs';
import { distOf, startGateway, startSims } from './sims.mjs';

const { values: flags } = parseArgs({
  options: {
    seconds: { type: 'string', default: '40' },
    'slice-seconds': { type: 'string', default: '10' },
    rps: { type: 'string', default: '10' },
    'max-tokens': { type: 'string', default: '40' },
    'tokens-per-second': { type: 'string', default: '80' },
    'max-seqs': { type: 'string', default: '4' },
    'background-rps': { type: 'string', default: '0.8' },
    'background-tokens': { type: 'string', default: '400' },
    'scrape-ms': { type: 'string', default: '1000' },
  },
});

async function main() {
  const seconds = Number(flags.seconds);
  const sliceMs = Number(flags['slice-seconds']) * 1000;
  const rps = Number(flags.rps);
  const maxTokens = Number(flags['max-tokens']);
  const tps = Number(flags['tokens-per-second']);
  const seqs = Number(flags['max-seqs']);
  const bgRps = Number(flags['background-rps']);
  const bgTokens = Number(flags['background-tokens']);
  const scrapeMs = Number(flags['scrape-ms']);

  const models = ['bench', 'least-inflight', 'least-load'];
  const sims = await startSims({
    fast: { models, tokensPerSecond: tps, maxConcurrency: seqs, ttftMs: 20 },
    slow: { models, tokensPerSecond: tps / 2, maxConcurrency: seqs, ttftMs: 20 },
    busy: { models, tokensPerSecond: tps, maxConcurrency: seqs, ttftMs: 20 },
  });
  const { router, url, stopRouter } = await startRouter(sims.urls, scrapeMs);

  // The other client: long requests straight to the busy engine, on a schedule, for the whole run.
  const bgPool = new Pool(sims.urls.busy, { connections: 64 });
  let running = true;
  const background = (async () => {
    const gapMs = 1000 / bgRps;
    let next = performance.now();
    const inflight = new Set();
    while (running) {
      const p = stream(bgPool, body(bgTokens, 'bench', 'a long prompt'), streamed).finally(() => inflight.delete(p));
      inflight.add(p);
      next += gapMs;
      await sleep(Math.max(0, next - performance.now()));
    }
    await Promise.allSettled([...inflight]);
  })();
  // Let the busy engine fill before measuring.
  await sleep(Math.min(5000, (bgTokens / tps) * 1000));

  const pool = new Pool(url, { connections: 256 });
  const policies = ['least-inflight', 'least-load'];
  const results = Object.fromEntries(
    policies.map((p) => [p, { sent: 0, done: 0, errors: 0, ttft: [], total: [], tokens: 0, offeredMs: 0 }]),
  );
  const pending = new Set();
  for (let slice = 0; slice < Math.round((2 * seconds * 1000) / sliceMs); slice++) {
    const policy = policies[slice % 2];
    const r = results[policy];
    r.offeredMs += await openLoop(
      sliceMs,
      rps,
      () => {
        r.sent++;
        const p = stream(pool, body(maxTokens, policy, `question ${r.sent}`), streamed)
          .then((m) => {
            if (!m.ok) return void r.errors++;
            r.done++;
            r.ttft.push(m.ttftMs);
            r.total.push(m.totalMs);
            r.tokens += m.tokens;
          })
          .finally(() => pending.delete(p));
        pending.add(p);
      },
      // As this bench always has: a late send still lets the answers' callbacks run before the next one.
      { yieldWhenLate: true },
    );
  }
  await Promise.allSettled([...pending]);
  running = false;
  await background;
  await pool.close();
  await bgPool.close();
  await stopRouter();
  sims.stop();
  void router;

  const row = (name) => {
    const r = results[name];
    const secondsOffered = r.offeredMs / 1000;
    return {
      name,
      sent: r.sent,
      done: r.done,
      errors: r.errors,
      ttftP50: q(r.ttft, 0.5),
      ttftP99: q(r.ttft, 0.99),
      totalP50: q(r.total, 0.5),
      totalP99: q(r.total, 0.99),
      reqPerS: r.done / secondsOffered,
      tokPerS: r.tokens / secondsOffered,
    };
  };
  const old = row('least-inflight');
  const neu = row('least-load');
  const f = (n, d = 0) => (Number.isFinite(n) ? n.toFixed(d) : '-');
  console.log(
    `fleet: fast ${tps} tok/s, slow ${tps / 2} tok/s, busy ${tps} tok/s with ${bgRps}/s requests of ${bgTokens} tokens sent to it directly; ${seqs} sequences each`,
  );
  console.log(
    `load: ${rps} streamed requests/s of ${maxTokens} tokens, open loop, ${seconds} s per choice in ${sliceMs / 1000} s slices; engine metrics read every ${scrapeMs} ms`,
  );
  console.log('');
  console.log('choice           sent  done  err   TTFT p50   TTFT p99  total p50  total p99    req/s    tok/s');
  for (const r of [old, neu]) {
    console.log(
      `${r.name.padEnd(15)} ${String(r.sent).padStart(5)} ${String(r.done).padStart(5)} ${String(r.errors).padStart(4)} ` +
        `${f(r.ttftP50).padStart(7)} ms ${f(r.ttftP99).padStart(7)} ms ${f(r.totalP50).padStart(7)} ms ${f(r.totalP99).padStart(7)} ms ${f(r.reqPerS, 2).padStart(8)} ${f(r.tokPerS).padStart(8)}`,
    );
  }
  const ratio = (a, b) => a / b;
  console.log('');
  console.log(
    `least-load / least-inflight: TTFT p50 ${f(ratio(neu.ttftP50, old.ttftP50), 2)}, TTFT p99 ${f(ratio(neu.ttftP99, old.ttftP99), 2)}, ` +
      `total p50 ${f(ratio(neu.totalP50, old.totalP50), 2)}, total p99 ${f(ratio(neu.totalP99, old.totalP99), 2)}, ` +
      `req/s ${f(ratio(neu.reqPerS, old.reqPerS), 3)}, tok/s ${f(ratio(neu.tokPerS, old.tokPerS), 3)}`,
  );
  // Throughput may differ by a request or two at a slice's edge: 1% is within the schedule's own noise.
  const ttftMet = neu.ttftP99 <= 0.7 * old.ttftP99;
  const tputMet = neu.reqPerS >= 0.99 * old.reqPerS && neu.tokPerS >= 0.99 * old.tokPerS && neu.errors <= old.errors;
  console.log(
    `target p99 TTFT at least 30% lower: ${ttftMet ? 'met' : 'MISSED'}; no loss of throughput: ${tputMet ? 'met' : 'MISSED'}`,
  );
  process.exitCode = ttftMet && tputMet ? 0 : 1;
}

/**
 * The router in this process, as the control plane builds its client
 * listener, in front of the three sims as replicas of two models that
 * differ only in `routing`. The replica directory carries each sim's
 * latest load sample, delivered when the scraper says it is news (the
 * agent pokes its heartbeat then) and every 5 s (the heartbeat's own beat).
 */
async function startRouter(urls, scrapeMs) {
  const dist = distOf();
  const { LoadScraper } = await import(dist('agent/load/index.js'));
  const base = Object.entries(urls).map(([name, endpoint]) => ({ id: name, endpoint, draining: false }));
  let replicas = base;
  const scraper = new LoadScraper({
    targets: () => base.map((r) => ({ shardId: r.id, endpoint: r.endpoint })),
    intervalMs: scrapeMs,
    onChange: () => deliver(),
  });
  const deliver = () => {
    const now = Date.now();
    replicas = base.map((r) => {
      const l = scraper.take(r.id);
      return l
        ? {
            ...r,
            load: {
              running: l.running,
              waiting: l.waiting,
              ...(l.kv_usage === undefined ? {} : { kvUsage: l.kv_usage }),
              sampledAtMs: now - l.age_ms,
            },
          }
        : r;
    });
  };
  const beat = setInterval(deliver, 5000);
  scraper.start();
  const policies = ['least-inflight', 'least-load'];
  const gw = await startGateway({
    dist,
    models: policies.map((routing) => ({ name: routing, routing })),
    ready: (n) => (policies.includes(n) ? replicas : []),
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

/** A streamed chat request's body. */
function body(maxTokens, model, content) {
  return { model, messages: [{ role: 'user', content }], max_tokens: maxTokens, stream: true };
}

/** How this bench streams: asking for server-sent events, counting the content chunks received (tokens). */
const streamed = { headers: { accept: 'text/event-stream' }, read: 'tokens' };

await main();
