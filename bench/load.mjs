// Load generation and its figures, as the benches share them: an open-loop
// schedule, one streamed request timed to its first body chunk, waiting for
// a fleet to go idle between phases, and the percentile every table prints.
// Kept apart from bench/sims.mjs (which starts what is measured) so a bench
// that drives something else (builtin engines, a remote) can use these alone.
// Node's globals are imported by name: the lint config gives plain .mjs files no Node environment.
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { engineLoad } from './sims.mjs';

/** The p-quantile of `xs` (0 <= p <= 1) by rank, without interpolation; NaN for none. */
export function q(xs, p) {
  if (!xs.length) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(p * s.length))];
}

/**
 * Calls `send(i)` `rps` times a second for `ms`, on a fixed schedule,
 * whatever the answers (a closed loop slows down with the system and hides
 * queueing). Behind schedule it catches up at once; `yieldWhenLate` still
 * gives the event loop a turn between those sends. Answers the
 * milliseconds it ran.
 */
export async function openLoop(ms, rps, send, { yieldWhenLate = false } = {}) {
  const gapMs = 1000 / rps;
  const start = performance.now();
  let next = start;
  for (let i = 0; next - start < ms; i++) {
    send(i);
    next += gapMs;
    const wait = next - performance.now();
    if (wait > 0 || yieldWhenLate) await sleep(Math.max(0, wait));
  }
  return performance.now() - start;
}

/**
 * One streamed request (a chat completion unless `path` says otherwise):
 * its status, the time to the first body chunk and to the end. `key` sends
 * it as a bearer token, `headers` adds headers, `signal` lets the bench give
 * up on it (then `cut` is true). `read: 'tokens'` also counts the content
 * chunks received (`tokens`); `read: 'text'` keeps the body (`raw`) and the
 * answer's text (`text`). Absent, the body is read and dropped: the cheapest
 * for a bench sending thousands.
 */
export async function stream(pool, body, { path = '/v1/chat/completions', key, headers, signal, read } = {}) {
  const t0 = performance.now();
  try {
    const res = await pool.request({
      path,
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        ...(key === undefined ? {} : { authorization: `Bearer ${key}` }),
        ...headers,
      },
      body: JSON.stringify(body),
      signal,
    });
    let ttftMs = NaN;
    let tokens = 0;
    let raw = '';
    for await (const chunk of res.body) {
      if (Number.isNaN(ttftMs)) ttftMs = performance.now() - t0;
      if (read === 'tokens') {
        const text = chunk.toString('utf8');
        for (let i = text.indexOf('"content":"'); i >= 0; i = text.indexOf('"content":"', i + 1))
          if (text[i + 11] !== '"') tokens++;
      } else if (read === 'text') raw += chunk.toString('utf8');
    }
    let text = '';
    if (read === 'text')
      for (const line of raw.split('\n')) {
        if (!line.startsWith('data: {')) continue;
        text += JSON.parse(line.slice(6)).choices?.[0]?.delta?.content ?? '';
      }
    const status = res.statusCode;
    return { status, ok: status === 200, ttftMs, totalMs: performance.now() - t0, tokens, raw, text, cut: false };
  } catch (err) {
    return {
      status: 0,
      ok: false,
      ttftMs: NaN,
      totalMs: NaN,
      tokens: 0,
      raw: '',
      text: '',
      cut: signal?.aborted ?? false,
      error: err,
    };
  }
}

/**
 * Waits until every sim at `urls` runs and queues nothing, and `queued()`
 * (when given: what the gateway itself holds) is 0, looking every 200 ms.
 * Throws after `deadlineMs` (absent: 5 minutes) naming what is still busy,
 * so a stuck engine ends the bench with a reason instead of hanging it.
 */
export async function waitIdle(urls, { queued, deadlineMs = 300_000 } = {}) {
  const until = performance.now() + deadlineMs;
  for (;;) {
    const held = queued ? await queued() : 0;
    let busy = 0;
    for (const url of urls) {
      const l = await engineLoad(url);
      busy += l.running + l.waiting;
    }
    if (held === 0 && busy === 0) return;
    if (performance.now() > until)
      throw new Error(
        `still busy ${deadlineMs / 1000} s after the phase: ${busy} requests on the sims, ${held} queued in the gateway`,
      );
    await sleep(200);
  }
}

/** What the gateway's fair-share queues hold, from its metrics registry. */
export async function gatewayQueued(registry) {
  const metric = await registry.getSingleMetric('llmgw_router_queued_requests')?.get();
  return (metric?.values ?? []).reduce((n, v) => n + v.value, 0);
}
