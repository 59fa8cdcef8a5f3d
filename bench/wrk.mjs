// wrk, the C load generator, where it is installed (Debian: apt-get install
// wrk): for the one question the bench's own load generator cannot answer
// on a small machine. That generator (undici, in the bench's process)
// spends about as much CPU per request as the sim and a gateway together,
// so on 2 cores it fills the core a second gateway process would use, and
// "do two gateway processes serve more than one" measures the generator.
// wrk, one thread, spends a fraction of that. Apart from router.mjs because
// it is the one place that knows wrk's script and its output.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Whether wrk is on PATH. */
export function hasWrk() {
  return !spawnSync('wrk', ['--version'], { stdio: 'ignore' }).error;
}

/**
 * wrk POSTing `body` (a JSON string) to `url` with `headers`, from
 * `connections` keep-alive connections on one thread, for `seconds`: the
 * requests it made and their rate, the answers that were not 2xx or 3xx
 * and the socket errors (both 0 when all went well), p50 and p99 in ms.
 */
export async function runWrk({ url, headers, body, connections, seconds }) {
  const dir = mkdtempSync(join(tmpdir(), 'llmgw-bench-wrk-'));
  const script = join(dir, 'post.lua');
  // Lua's long brackets take the body and the headers as they are, with nothing to escape.
  const long = (s) => `[==[${s}]==]`;
  writeFileSync(
    script,
    [
      'wrk.method = "POST"',
      `wrk.body = ${long(body)}`,
      'wrk.headers["content-type"] = "application/json"',
      // The spaces matter: `t[[` would open a long string, not index t.
      ...Object.entries(headers).map(([k, v]) => `wrk.headers[ ${long(k)} ] = ${long(v)}`),
      '',
    ].join('\n'),
  );
  try {
    const out = await new Promise((resolve, reject) => {
      const args = ['-t', '1', '-c', String(connections), '-d', `${seconds}s`, '--latency', '-s', script, url];
      const child = spawn('wrk', args, { stdio: ['ignore', 'pipe', 'pipe'] });
      let text = '';
      child.stdout.on('data', (d) => (text += d));
      child.stderr.on('data', (d) => (text += d));
      child.on('error', reject);
      child.on('exit', (code) => (code === 0 ? resolve(text) : reject(new Error(`wrk exited ${code}:\n${text}`))));
    });
    return parseWrk(out);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** wrk's report, read: see runWrk. Throws on a report without the lines every run prints. */
export function parseWrk(text) {
  const made = text.match(/(\d+) requests in ([\d.]+)(us|ms|s|m)\b/);
  const rate = text.match(/Requests\/sec:\s+([\d.]+)/);
  if (!made || !rate) throw new Error(`wrk printed no request count:\n${text}`);
  const non2xx = Number(text.match(/Non-2xx or 3xx responses: (\d+)/)?.[1] ?? 0);
  const socket = text.match(/Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/);
  const socketErrors = socket ? socket.slice(1).reduce((n, x) => n + Number(x), 0) : 0;
  const pct = (p) => {
    const m = text.match(new RegExp(`^\\s+${p}%\\s+([\\d.]+)(us|ms|s)\\s*$`, 'm'));
    return m ? Number(m[1]) * { us: 0.001, ms: 1, s: 1000 }[m[2]] : NaN;
  };
  return {
    requests: Number(made[1]),
    seconds: Number(made[2]) * { us: 1e-6, ms: 0.001, s: 1, m: 60 }[made[3]],
    rate: Number(rate[1]),
    non2xx,
    socketErrors,
    p50: pct(50),
    p99: pct(99),
  };
}
