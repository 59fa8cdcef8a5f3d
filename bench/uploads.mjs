// Measures what hostile uploads cost the control plane's other listeners:
// the heartbeat latency of a fleet (p50/p99/max) while ten uploads of the
// shape that once stalled it arrive at once (issue #33, finding 4: 200,000
// one-byte form fields and a 12 MB file on POST /v1/audio/transcriptions,
// within the 25 MiB upload limit; parsed whole in one call, each held every
// listener 5.7 s). Target: heartbeat p99 under 100 ms while they arrive.
//
// `llmgw control` runs as a child process on a SQLite store; --nodes
// simulated nodes join and report once, then keep-alive heartbeats (answered
// at once, no long-poll) are sent by a process of their own
// (bench/heartbeat-prober.mjs, as bench/heartbeats.mjs times its probes) at
// --probes-per-second throughout: --quiet-seconds alone first (the
// baseline), then --rounds rounds of --uploads uploads sent together, each
// round once the last one's uploads are all answered. Each upload is written
// on a raw socket, its whole body at once, as a client that does not wait
// for an early answer sends it, by this process at nice --sender-nice
// (default 10): on a real network the sending is another host's work, and on
// a small machine it would otherwise take the control plane's and the
// probes' CPU (0 measures them sharing it). --llmgw runs another build's
// control plane, for before-and-after runs.
//
//   npm run build && node bench/uploads.mjs [--uploads 10] [--rounds 10]
//     [--fields 200000] [--file-mb 12] [--nodes 20] [--probes-per-second 50]
//     [--quiet-seconds 5] [--sender-nice 10] [--llmgw path/to/bin/llmgw.js]
// Node's globals are imported by name: the lint config gives plain .mjs files no Node environment.
import { fork, spawn } from 'node:child_process';
import console from 'node:console';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { setPriority, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import process from 'node:process';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath, pathToFileURL, URL } from 'node:url';
import { parseArgs } from 'node:util';
import { controlListening, cpuSeconds } from './processes.mjs';
import { PROTOCOL_VERSION, reportHash } from '../dist/protocol/index.js';
import { LLMGW_VERSION } from '../dist/version.js';

const { values: flags } = parseArgs({
  options: {
    uploads: { type: 'string', default: '10' },
    rounds: { type: 'string', default: '10' },
    fields: { type: 'string', default: '200000' },
    'file-mb': { type: 'string', default: '12' },
    nodes: { type: 'string', default: '20' },
    'probes-per-second': { type: 'string', default: '50' },
    'quiet-seconds': { type: 'string', default: '5' },
    'sender-nice': { type: 'string', default: '10' },
    llmgw: { type: 'string', default: fileURLToPath(new URL('../bin/llmgw.js', import.meta.url)) },
  },
});
const numbers = {};
for (const name of [
  'uploads',
  'rounds',
  'fields',
  'file-mb',
  'nodes',
  'probes-per-second',
  'quiet-seconds',
  'sender-nice',
]) {
  numbers[name] = Number(flags[name]);
  if (!Number.isFinite(numbers[name]) || numbers[name] < 0) throw new Error(`--${name} wants a number, 0 or more`);
}
const TARGET_P99_MS = 100;
const joinToken = randomBytes(24).toString('base64url');
const adminToken = randomBytes(24).toString('base64url');

/** The attack's body: a model field, `fields` one-byte fields and a file of `fileBytes` zeros; a one-letter boundary keeps each field at 52 bytes. */
function attackForm(fields, fileBytes) {
  const field = Buffer.from('--x\r\ncontent-disposition: form-data; name="f"\r\n\r\n1\r\n');
  return Buffer.concat([
    Buffer.from('--x\r\ncontent-disposition: form-data; name="model"\r\n\r\nwhisper\r\n'),
    Buffer.alloc(field.length * fields).fill(field),
    Buffer.from(
      '--x\r\ncontent-disposition: form-data; name="file"; filename="a.wav"\r\ncontent-type: audio/wav\r\n\r\n',
    ),
    Buffer.alloc(fileBytes),
    Buffer.from('\r\n--x--\r\n'),
  ]);
}

/**
 * A module the control plane is started with (`--import`): every 100 ms it
 * appends when and the longest event-loop delay of that 100 ms to `file`, so
 * the control plane's own stalls can be told from the probes' (a probe's
 * latency also holds its own process's turn and the machine's).
 */
const LOOP_DELAY_PRELOAD = `
import { appendFileSync } from 'node:fs';
import { monitorEventLoopDelay } from 'node:perf_hooks';
const file = process.env.LLMGW_BENCH_LOOP_DELAY_FILE;
const h = monitorEventLoopDelay({ resolution: 10 });
h.enable();
setInterval(() => {
  appendFileSync(file, \`\${Date.now()} \${(h.max / 1e6).toFixed(1)}\\n\`);
  h.reset();
}, 100).unref();
`;

/** Starts `llmgw control` as a child; resolves with its URLs once it prints its listening line. */
async function startControl(store, preload, loopDelayFile) {
  const args = [
    '--import',
    pathToFileURL(preload).href,
    flags.llmgw,
    'control',
    '--client-addr',
    '127.0.0.1:0',
    '--admin-addr',
    '127.0.0.1:0',
    '--agent-addr',
    '127.0.0.1:0',
    '--store',
    store,
    '--log-level',
    'info',
  ];
  const child = spawn(process.execPath, args, {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: {
      ...process.env,
      LLMGW_JOIN_TOKEN: joinToken,
      LLMGW_ADMIN_TOKEN: adminToken,
      LLMGW_BENCH_LOOP_DELAY_FILE: loopDelayFile,
    },
  });
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  const urls = await controlListening(child, exited);
  return {
    pid: child.pid,
    urls,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) process.kill(child.pid, 'SIGKILL');
      await exited;
    },
  };
}

/** POSTs JSON (with a bearer credential when given) and returns the answer's JSON; throws on any status but 2xx. */
async function postJson(url, body, credential = null) {
  const headers = {
    'content-type': 'application/json',
    ...(credential ? { authorization: `Bearer ${credential}` } : {}),
  };
  const res = await globalThis.fetch(url, { method: 'POST', headers, body: JSON.stringify(body) });
  const text = await res.text();
  if (!res.ok) throw new Error(`${url}: ${res.status} ${text.slice(0, 200)}`);
  return JSON.parse(text);
}

/**
 * One upload on a raw socket: the head, then the whole body in one write.
 * Resolves with the answer's status and llmgw code and when it came, or the
 * error that ended the connection first.
 */
function upload(clientUrl, key, body) {
  const { hostname, port, host } = new URL(clientUrl);
  const startedAt = performance.now();
  return new Promise((resolve) => {
    const socket = connect(Number(port), hostname);
    let received = Buffer.alloc(0);
    let settled = false;
    const settle = (outcome) => {
      if (settled) return;
      settled = true;
      socket.destroy();
      resolve({ ...outcome, tookMs: performance.now() - startedAt });
    };
    socket.on('data', (chunk) => {
      received = Buffer.concat([received, chunk]);
      const end = received.indexOf('\r\n\r\n');
      if (end === -1) return;
      const head = received.toString('latin1', 0, end);
      const length = Number(/^content-length:\s*(\d+)/im.exec(head)?.[1] ?? 0);
      if (received.length < end + 4 + length) return;
      let code = '';
      try {
        code = JSON.parse(received.toString('utf8', end + 4, end + 4 + length)).error?.llmgw_code ?? '';
      } catch {
        // Not JSON: the status alone says enough.
      }
      settle({ status: Number(head.split(' ')[1]), code });
    });
    socket.on('error', (err) => settle({ status: 0, code: err.code ?? err.message }));
    socket.on('close', () => settle({ status: 0, code: 'closed' }));
    socket.write(
      `POST /v1/audio/transcriptions HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${key}\r\nContent-Type: multipart/form-data; boundary=x\r\nContent-Length: ${body.length}\r\n\r\n`,
    );
    socket.write(body);
  });
}

function percentile(sorted, p) {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))];
}

/** The control plane's longest event-loop delay in [fromMs, toMs) (epoch ms), from its 100 ms samples: the worst and the 99th percentile of the samples. */
function loopDelays(text, fromMs, toMs) {
  const samples = text
    .split('\n')
    .filter(Boolean)
    .map((line) => line.split(' ').map(Number))
    .filter(([at]) => at >= fromMs && at < toMs + 100)
    .map(([, maxMs]) => maxMs)
    .sort((a, b) => a - b);
  return { p99: percentile(samples, 0.99), max: samples.at(-1) ?? NaN };
}

/** Latencies of the probes sent in [fromMs, toMs) (epoch ms), failed ones as Infinity: p50 / p99 / max, and how many. */
function latencies(results, fromMs, toMs) {
  const inWindow = results.filter((r) => r.atMs >= fromMs && r.atMs < toMs);
  const sorted = inWindow.map((r) => (r.error ? Infinity : r.tookMs)).sort((a, b) => a - b);
  return {
    count: sorted.length,
    failed: inWindow.filter((r) => r.error).length,
    p50: percentile(sorted, 0.5),
    p99: percentile(sorted, 0.99),
    max: sorted.at(-1) ?? NaN,
    firstError: inWindow.find((r) => r.error)?.error ?? null,
  };
}

const dir = await mkdtemp(join(tmpdir(), 'llmgw-uploads-bench-'));
await writeFile(join(dir, 'loop-delay.mjs'), LOOP_DELAY_PRELOAD);
const loopDelayFile = join(dir, 'loop-delay.txt');
await writeFile(loopDelayFile, '');
const control = await startControl(`sqlite:${join(dir, 'llmgw.db')}`, join(dir, 'loop-delay.mjs'), loopDelayFile);
let prober = null;
try {
  const { client: clientUrl, agent: agentUrl, admin: adminUrl } = control.urls;
  const key = (await postJson(`${adminUrl}/api/v1/keys`, { name: 'uploads-bench' }, adminToken)).secret;
  // Each node joins and reports once, so that its keep-alives (the probes) are answered as a fleet's are.
  const targets = [];
  for (let i = 0; i < numbers.nodes; i++) {
    const id = `up-${String(i).padStart(3, '0')}`;
    const report = {
      hostname: `${id}.bench.local`,
      cpu_count: 16,
      memory_total_bytes: 64 * 2 ** 30,
      memory_available_bytes: 60 * 2 ** 30,
      gpus: [],
      engines: [{ name: 'sim' }],
    };
    const joined = await postJson(`${agentUrl}/agent/v1/join`, {
      join_token: joinToken,
      node_id: id,
      hostname: report.hostname,
      agent_version: LLMGW_VERSION,
      protocol_version: PROTOCOL_VERSION,
      labels: {},
    });
    const hash = reportHash(report);
    const beat = {
      node_id: id,
      agent_version: LLMGW_VERSION,
      protocol_version: PROTOCOL_VERSION,
      report_hash: hash,
      shards: [],
    };
    await postJson(`${agentUrl}/agent/v1/heartbeat`, { ...beat, report }, joined.credential);
    targets.push({ url: agentUrl, id, credential: joined.credential, body: JSON.stringify(beat) });
  }
  const body = attackForm(numbers.fields, numbers['file-mb'] * 2 ** 20);
  prober = fork(fileURLToPath(new URL('./heartbeat-prober.mjs', import.meta.url)), [], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  prober.send({ type: 'start', perSecond: numbers['probes-per-second'], targets });
  // This process sends the uploads; the control plane and the prober were started before, at the usual priority.
  setPriority(numbers['sender-nice']);
  const epochNow = () => performance.timeOrigin + performance.now();
  const quietFrom = epochNow();
  await sleep(numbers['quiet-seconds'] * 1000);
  const uploadsFrom = epochNow();
  const cpuFrom = cpuSeconds(control.pid);
  const outcomes = [];
  for (let round = 0; round < numbers.rounds; round++) {
    outcomes.push(...(await Promise.all(Array.from({ length: numbers.uploads }, () => upload(clientUrl, key, body)))));
  }
  const uploadsTo = epochNow();
  const uploadCpuSeconds = cpuSeconds(control.pid) - cpuFrom;
  const results = await new Promise((resolve) => {
    prober.once('message', (message) => resolve(message.results));
    prober.send({ type: 'stop' });
  });
  prober = null;

  const quiet = latencies(results, quietFrom, uploadsFrom);
  const delays = readFileSync(loopDelayFile, 'utf8');
  const quietDelay = loopDelays(delays, quietFrom, uploadsFrom);
  const loadedDelay = loopDelays(delays, uploadsFrom, uploadsTo);
  const loaded = latencies(results, uploadsFrom, uploadsTo);
  const byAnswer = new Map();
  for (const o of outcomes)
    byAnswer.set(`${o.status} ${o.code}`.trim(), (byAnswer.get(`${o.status} ${o.code}`.trim()) ?? 0) + 1);
  const took = outcomes.map((o) => o.tookMs).sort((a, b) => a - b);
  const ms = (v) => (Number.isFinite(v) ? v.toFixed(1) : v === Infinity ? 'failed' : '-');
  const pass = loaded.p99 < TARGET_P99_MS;
  console.log(`uploads bench: control plane pid ${control.pid} (${flags.llmgw}), loopback, Node ${process.version}`);
  console.log(
    `  upload: ${numbers.fields.toLocaleString('en')} fields + ${numbers['file-mb']} MB file = ${(body.length / 2 ** 20).toFixed(1)} MiB; ${numbers.rounds} round(s) of ${numbers.uploads} at once, sent at nice ${numbers['sender-nice']}`,
  );
  console.log(
    `  answers: ${[...byAnswer].map(([a, n]) => `${n} × ${a}`).join(', ')}; each took p50 ${ms(percentile(took, 0.5))} / max ${ms(took.at(-1))} ms; all rounds ${((uploadsTo - uploadsFrom) / 1000).toFixed(1)} s`,
  );
  console.log(
    `  control plane CPU while they arrived: ${uploadCpuSeconds.toFixed(2)} s (${((uploadCpuSeconds * 1000) / outcomes.length).toFixed(0)} ms an upload)`,
  );
  console.log(
    `  heartbeats, quiet (${quiet.count}): p50 / p99 / max ${ms(quiet.p50)} / ${ms(quiet.p99)} / ${ms(quiet.max)} ms`,
  );
  console.log(
    `  heartbeats, uploads arriving (${loaded.count}${loaded.failed ? `, ${loaded.failed} failed: ${loaded.firstError}` : ''}): p50 / p99 / max ${ms(loaded.p50)} / ${ms(loaded.p99)} / ${ms(loaded.max)} ms  ${pass ? 'PASS' : 'FAIL'} (p99 target < ${TARGET_P99_MS})`,
  );
  console.log(
    `  control plane's own event-loop delay, worst 100 ms sample: quiet ${ms(quietDelay.max)} ms; uploads arriving ${ms(loadedDelay.max)} ms (p99 of samples ${ms(loadedDelay.p99)})`,
  );
  process.exitCode = pass ? 0 : 1;
} finally {
  prober?.kill('SIGKILL');
  await control.stop();
  await rm(dir, { recursive: true, force: true });
}
