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
import console from 'node:console';
import { setMaxListeners } from 'node:events';
import process from 'node:process';
import { parseArgs } from 'node:util';
import { Pool } from 'undici';
import { gatewayQueued, openLoop, q, stream, waitIdle } from './load.mjs';
import { startGateway, startSims } from './sims.mjs';

const { values: flags } = parseArgs({
  options: {
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

  const sims = await startSims(
    Array.from({ length: replicas }, () => ({
      models: ['fair', 'plain'],
      maxConcurrency: seqs,
      ttftMs,
      tokensPerSecond: tps,
    })),
  );
  const replicaList = sims.urls.map((endpoint, i) => ({ id: `sim${i}`, endpoint, draining: false }));
  // Two models on the same sims, `fair` with capacity.per_replica and `plain` without, and a key for each team.
  const gw = await startGateway({
    models: [
      { name: 'fair', capacity: { per_replica: seqs, queue_per_team: 4096, queue_timeout: '120s' } },
      { name: 'plain' },
    ],
    ready: (n) => (n === 'fair' || n === 'plain' ? replicaList : []),
    keys: { A: 'A', B: 'B' },
    router: { timeouts: { totalTimeoutMs: 600_000 } },
  });
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
          {
            model: phase.model,
            messages: [{ role: 'user', content: `${team} ${phase.name} ${i}` }],
            max_tokens: tokens,
            stream: true,
          },
          { key: gw.keys[team], signal: controller.signal },
        ).then((m) => record(s, m));
        pending.push(p);
      });
    await Promise.all([load('B', trickleRps), phase.flood ? load('A', floodRps) : Promise.resolve()]);
    const cut = setTimeout(() => controller.abort(), graceMs);
    await Promise.allSettled(pending);
    clearTimeout(cut);
    results[phase.name] = teams;
    // Let the engines' queues drain before the next phase (a cut request may still run there).
    await waitIdle(sims.urls, { queued: () => gatewayQueued(gw.registry) });
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

await main();
