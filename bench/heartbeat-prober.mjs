// The heartbeats bench's latency probes, in a process of their own. In
// --long-poll mode the bench process holds 10,000 connections and its event
// loop stalls for hundreds of milliseconds at a time; probes timed there
// measured the client as much as the control plane. Forked by
// bench/heartbeats.mjs: told the nodes and the rate, it sends keep-alive
// heartbeats of nodes picked at random (answered at once, no long-poll)
// and hands back each one's start (epoch ms), latency and outcome.
// Node's globals are imported by name: the lint config gives plain .mjs files no Node environment.
import { performance } from 'node:perf_hooks';
import process from 'node:process';
import { clearInterval, setInterval } from 'node:timers';
import { Pool } from 'undici';

/** @type {{ url: string; id: string; credential: string; body: string }[]} */
let targets = [];
const pools = new Map();
const results = [];
const inFlight = new Set();
let timer = null;

async function probe(target) {
  const startedAt = performance.timeOrigin + performance.now();
  const t0 = performance.now();
  try {
    let pool = pools.get(target.url);
    if (!pool)
      pools.set(target.url, (pool = new Pool(target.url, { connections: 8, pipelining: 1, keepAliveTimeout: 60_000 })));
    const res = await pool.request({
      path: '/agent/v1/heartbeat',
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${target.credential}` },
      body: target.body,
      headersTimeout: 10_000,
      bodyTimeout: 10_000,
    });
    const text = await res.body.text();
    const ok = res.statusCode === 200 && typeof JSON.parse(text)?.generation === 'number';
    results.push({
      atMs: startedAt,
      tookMs: performance.now() - t0,
      error: ok ? null : `${res.statusCode} ${text.slice(0, 160)}`,
    });
  } catch (err) {
    results.push({ atMs: startedAt, tookMs: performance.now() - t0, error: err.message });
  }
}

process.on('message', async (message) => {
  if (message.type === 'start') {
    targets = message.targets;
    timer = setInterval(() => {
      const p = probe(targets[Math.floor(Math.random() * targets.length)]);
      inFlight.add(p);
      void p.finally(() => inFlight.delete(p));
    }, 1000 / message.perSecond);
  } else if (message.type === 'stop') {
    clearInterval(timer);
    await Promise.allSettled([...inFlight]);
    await Promise.allSettled([...pools.values()].map((p) => p.close()));
    process.send({ type: 'results', results }, () => process.exit(0));
  }
});
