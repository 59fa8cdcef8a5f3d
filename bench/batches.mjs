// Does a batch stay out of interactive traffic's way? One run, side by
// side: interactive streaming load on a sim fleet with no batch, then the
// same load while a batch of --lines lines runs on the same fleet, paced by
// the control plane's own pace (src/control/batches/live-pace.ts) and run
// by its own runner through the gateway at priority batch.
//
// The fleet: --replicas sim engines, each --max-seqs sequences (its engine
// queues the rest, as vLLM does), --ttft-ms before the first token and on
// average --max-tokens (a quarter to 1.75 times it, drawn per request) at
// --tokens-per-second. The model declares capacity.per_replica = --max-seqs.
// Interactive load is open loop at --rps requests a second for --seconds
// (well under what the fleet serves, so it has idle gaps); batch lines ask
// for --batch-tokens tokens each.
// Prints interactive p50/p99 TTFT without and with the batch, the ratio
// (target: at most 1.2), and the batch's lines per second and total time
// (target: every line answered, within --seconds + --grace-seconds of its
// start). Exit 1 when a target is missed.
//
//   npm run build && node bench/batches.mjs [--seconds 30] [--replicas 2] [--max-seqs 8] [--ttft-ms 200]
//     [--max-tokens 32] [--tokens-per-second 100] [--rps 10] [--lines 600] [--batch-tokens 16]
//     [--grace-seconds 60] [--headroom 0.5]
// Node's globals are imported by name: the lint config gives plain .mjs files no Node environment.
import console from 'node:console';
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import process from 'node:process';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { Pool } from 'undici';
import { openLoop, q, stream, waitIdle } from './load.mjs';
import { distOf, startGateway as startSharedGateway, startSims } from './sims.mjs';

const { values: flags } = parseArgs({
  options: {
    seconds: { type: 'string', default: '30' },
    replicas: { type: 'string', default: '2' },
    'max-seqs': { type: 'string', default: '8' },
    'ttft-ms': { type: 'string', default: '200' },
    'max-tokens': { type: 'string', default: '32' },
    'tokens-per-second': { type: 'string', default: '100' },
    rps: { type: 'string', default: '10' },
    lines: { type: 'string', default: '600' },
    'batch-tokens': { type: 'string', default: '16' },
    'grace-seconds': { type: 'string', default: '60' },
    headroom: { type: 'string', default: '0.5' },
  },
});

async function main() {
  const seconds = Number(flags.seconds);
  const replicas = Number(flags.replicas);
  const seqs = Number(flags['max-seqs']);
  const ttftMs = Number(flags['ttft-ms']);
  const maxTokens = Number(flags['max-tokens']);
  const tps = Number(flags['tokens-per-second']);
  const rps = Number(flags.rps);
  const lines = Number(flags.lines);
  const batchTokens = Number(flags['batch-tokens']);
  const graceMs = Number(flags['grace-seconds']) * 1000;
  const capacityRps = (replicas * seqs) / ((ttftMs + (maxTokens / tps) * 1000) / 1000);

  const sims = await startSims(
    Array.from({ length: replicas }, () => ({ models: ['chat'], maxConcurrency: seqs, ttftMs, tokensPerSecond: tps })),
  );
  const gw = await startGateway(sims.urls, seqs);
  const pool = new Pool(gw.url, { connections: 256 });

  // 1. Interactive load alone.
  const alone = await interactive(pool, gw.key, seconds, rps, maxTokens);
  await waitIdle(sims.urls);
  // 2. The same load while the batch runs.
  const batch = await gw.startBatch(lines, batchTokens);
  const during = await interactive(pool, gw.key, seconds, rps, maxTokens);
  const paused = gw.pausedLooks();
  const done = await batch.finished(seconds * 1000 + graceMs);
  await pool.close();
  await gw.stop();
  sims.stop();

  const f = (n, d = 0) => (Number.isFinite(n) ? n.toFixed(d) : '-');
  const load = loadavg();
  console.log(
    `fleet: ${replicas} sim engines × ${seqs} sequences, ${ttftMs} ms to first token, ${maxTokens} tokens at ${tps} tok/s: ` +
      `about ${f(capacityRps, 1)} interactive requests/s when full; capacity.per_replica ${seqs}`,
  );
  console.log(
    `load: ${rps} interactive requests/s (${f((100 * rps) / capacityRps)}% of the fleet), open loop, ${seconds} s per phase; ` +
      `batch of ${lines} lines × ${batchTokens} tokens; load average ${load.map((l) => l.toFixed(2)).join(' ')}`,
  );
  console.log('');
  console.log('phase          sent answered failed  TTFT p50  TTFT p99');
  for (const [name, s] of [
    ['no batch', alone],
    ['with batch', during],
  ]) {
    console.log(
      `${name.padEnd(14)} ${String(s.sent).padStart(4)} ${String(s.ok).padStart(8)} ${String(s.sent - s.ok).padStart(6)} ` +
        `${f(q(s.ttft, 0.5)).padStart(6)} ms ${f(q(s.ttft, 0.99)).padStart(6)} ms`,
    );
  }
  const ratio = q(during.ttft, 0.99) / q(alone.ttft, 0.99);
  console.log('');
  console.log(
    `batch: ${done.completed} completed, ${done.failed} failed of ${lines} in ${f(done.ms / 1000, 1)} s ` +
      `(${f(done.completed / (done.ms / 1000), 1)} lines/s); the pace said paused in ${paused.paused} of its ${paused.looks} looks`,
  );
  const ttftMet = ratio <= 1.2 && during.ok === during.sent && alone.ok === alone.sent;
  const batchMet = done.status === 'completed' && done.completed === lines;
  console.log(
    `interactive p99 TTFT with the batch / without: ${f(ratio, 2)}; target at most 1.2 with every request answered: ${ttftMet ? 'met' : 'MISSED'}; ` +
      `the batch completed in the idle gaps: ${batchMet ? 'met' : `MISSED (${done.status})`}`,
  );
  process.exitCode = ttftMet && batchMet ? 0 : 1;
}

async function interactive(pool, key, seconds, rps, maxTokens) {
  const s = { sent: 0, ok: 0, ttft: [] };
  const pending = [];
  await openLoop(seconds * 1000, rps, (i) => {
    s.sent++;
    // Answers of different lengths, as real ones are.
    const tokens = Math.max(1, Math.round(maxTokens * (0.25 + 1.5 * Math.random())));
    const content = `interactive ${i}`;
    const body = { model: 'chat', messages: [{ role: 'user', content }], max_tokens: tokens, stream: true };
    pending.push(
      stream(pool, body, { key }).then((m) => {
        if (m.status === 200) {
          s.ok++;
          s.ttft.push(m.ttftMs);
        }
      }),
    );
  });
  await Promise.allSettled(pending);
  return s;
}

/**
 * The control plane's parts, in this process: a SQLite store, the Files and
 * Batch APIs with their runner, the live pace, and the gateway in front of
 * the sims with one model declaring capacity.
 */
async function startGateway(urls, seqs) {
  const dist = distOf();
  const { issueKey } = await import(dist('control/keys/index.js'));
  const { Store } = await import(dist('control/store/index.js'));
  const { openBatches } = await import(dist('control/batches/index.js'));
  const { compileBatches, BATCH_DEFAULTS } = await import(dist('control/config/batches.js'));
  const { LiveBatchPace } = await import(dist('control/batches/live-pace.js'));
  const { MemoryTeams, TeamKeys } = await import(dist('control/teams/index.js'));
  const dir = mkdtempSync(join(tmpdir(), 'llmgw-bench-batches-'));
  const store = await Store.open({ location: { kind: 'sqlite', path: join(dir, 'db') } });
  const replicas = urls.map((endpoint, i) => ({ id: `sim${i}`, endpoint, draining: false }));
  const directory = { ready: (n) => (n === 'chat' ? replicas : []), describe: () => 'none', demand: () => false };
  let batches;
  let batchKey;
  const gw = await startSharedGateway({
    dist,
    models: [{ name: 'chat', capacity: { per_replica: seqs, queue_per_team: 4096, queue_timeout: '120s' } }],
    ready: directory.ready,
    keys: { apps: 'people' },
    router: async ({ keyStore, logger }) => {
      batchKey = await issueKey(keyStore, { name: 'evals', team: 'research' }, Date.now(), 'bench');
      const settings = compileBatches({ ...BATCH_DEFAULTS, files_dir: join(dir, 'files') }, join(dir, 'db'));
      // The runner reads a line's key as the control plane gives it, narrowed by its team (none here: its own limits).
      const keys = new TeamKeys(keyStore, new MemoryTeams(), (n) => (n === 'chat' ? n : undefined));
      batches = openBatches({ store, settings, keys, now: Date.now, logger });
      return { timeouts: { totalTimeoutMs: 600_000 }, batches: batches.service };
    },
  });
  const { router, registry } = gw;
  const model = gw.models.get('chat');
  const key = gw.keys.apps;
  let live = null;
  let looks = 0;
  let pausedLooks = 0;
  await batches.run(router, (inFlight) => {
    live = new LiveBatchPace({
      catalog: { resolve: (n) => (n === 'chat' ? model : undefined) },
      replicas: directory,
      use: () => router.replicaUse(),
      interactiveWaiting: (m) => router.interactiveWaiting(m),
      batchInFlight: inFlight,
      now: Date.now,
      options: { headroomFraction: Number(flags.headroom) },
      registry,
    });
    return {
      slots(m) {
        const n = live.slots(m);
        looks++;
        if (live.report(m)?.reason === 'paused') pausedLooks++;
        return n;
      },
    };
  });
  const caller = { keyId: batchKey.record.id, team: 'research' };
  return {
    url: gw.url,
    key,
    pausedLooks: () => ({ looks, paused: pausedLooks }),
    async startBatch(n, tokens) {
      const body = Array.from({ length: n }, (_, i) =>
        JSON.stringify({
          custom_id: `line-${i}`,
          method: 'POST',
          url: '/v1/chat/completions',
          body: { model: 'chat', messages: [{ role: 'user', content: `batch ${i}` }], max_tokens: tokens },
        }),
      ).join('\n');
      const file = await batches.service.uploadFile(caller, {
        filename: 'bench.jsonl',
        purpose: 'batch',
        bytes: Buffer.from(body),
      });
      const started = performance.now();
      const b = await batches.service.createBatch(caller, {
        input_file_id: file.id,
        endpoint: '/v1/chat/completions',
        completion_window: '24h',
      });
      return {
        async finished(withinMs) {
          for (;;) {
            const now = await batches.service.getBatch(caller, b.id);
            const ended = ['completed', 'failed', 'expired', 'cancelled'].includes(now.status);
            if (ended || performance.now() - started > withinMs) {
              return {
                status: now.status,
                completed: now.request_counts.completed,
                failed: now.request_counts.failed,
                ms: performance.now() - started,
              };
            }
            await sleep(100);
          }
        },
      };
    },
    async stop() {
      await batches.close();
      await gw.stop();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

await main();
