// Loaded into a proxy process by bench/stages.mjs (node --import): times
// each request of a process that serves one at a time, in three stages, from
// the diagnostics channels Node's HTTP server and undici publish. Nothing is
// added to llmgw's code; the stages are those any Node proxy has:
//  - before: the request parsed (its headers) until its headers are written
//    to the engine (body read, checks, choice, undici's dispatch);
//  - engine: until the engine's response headers are in;
//  - after: until the answer to the client is finished (relay, end).
// On SIGUSR2 it writes the medians since the last report to stderr as one
// line `stages {json}`, with the process's user and system CPU, and starts
// again. Requests that overlap (a second one starting before the first
// finished) are not timed: the stages would mix.
// Node's globals are imported by name: the lint config gives plain .mjs files no Node environment.
import dc from 'node:diagnostics_channel';
import process from 'node:process';

const now = () => Number(process.hrtime.bigint()) / 1000;
const samples = { before: [], engine: [], after: [] };
let overlapped = 0;
/** The request being timed: its marks so far; null between requests. */
let current = null;

dc.subscribe('http.server.request.start', () => {
  if (current !== null) {
    overlapped++;
    current.overlapped = true;
    return;
  }
  current = { start: now(), sent: 0, headers: 0, overlapped: false };
});
dc.subscribe('undici:client:sendHeaders', () => {
  if (current !== null && current.sent === 0) current.sent = now();
});
dc.subscribe('undici:request:headers', () => {
  if (current !== null && current.headers === 0) current.headers = now();
});
dc.subscribe('http.server.response.finish', () => {
  const c = current;
  current = null;
  if (c === null || c.overlapped || c.sent === 0 || c.headers === 0) return;
  const end = now();
  samples.before.push(c.sent - c.start);
  samples.engine.push(c.headers - c.sent);
  samples.after.push(end - c.headers);
});

let cpuAt = process.cpuUsage();
process.on('SIGUSR2', () => {
  const median = (a) => (a.length ? [...a].sort((x, y) => x - y)[a.length >> 1] : null);
  const cpu = process.cpuUsage(cpuAt);
  cpuAt = process.cpuUsage();
  const report = {
    requests: samples.before.length,
    overlapped,
    before: median(samples.before),
    engine: median(samples.engine),
    after: median(samples.after),
    userUs: cpu.user,
    systemUs: cpu.system,
  };
  for (const a of Object.values(samples)) a.length = 0;
  overlapped = 0;
  process.stderr.write(`stages ${JSON.stringify(report)}\n`);
});
