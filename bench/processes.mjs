// What the benches that run llmgw as child processes share: starting one
// and waiting for its listening line (a control plane's, or any Node child's),
// the command line of a sim engine, and reading a process's CPU time from
// /proc. Apart from measure.mjs, which times calls inside the bench's own
// process.
// Node's globals are imported by name: the lint config gives plain .mjs files no Node environment.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import process from 'node:process';
import { clearTimeout, setTimeout } from 'node:timers';

/**
 * The URLs a `llmgw control` child prints on its listening line, once it
 * does; rejects if it exits first or says nothing within 30 s. The rest of
 * its stdout is still read, so the pipe never fills.
 */
export function controlListening(child, exited) {
  return new Promise((resolve, reject) => {
    let buffered = '';
    const timer = setTimeout(
      () => reject(new Error('the control plane did not print its listening line within 30 s')),
      30_000,
    );
    child.stdout.on('data', (chunk) => {
      if (buffered === null) return;
      buffered += chunk;
      for (let nl = buffered.indexOf('\n'); nl >= 0; nl = buffered.indexOf('\n')) {
        const line = buffered.slice(0, nl);
        buffered = buffered.slice(nl + 1);
        if (!line.includes('llmgw control listening')) continue;
        clearTimeout(timer);
        buffered = null;
        resolve(JSON.parse(line));
        return;
      }
    });
    void exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`the control plane exited (${signal ?? code}) before listening`));
    });
  });
}

/**
 * Node run with `args`, once its stdout matches `re` (its listening line):
 * the child and the match. Rejects if it exits first. Its stderr is the
 * bench's, or with `stderr: 'pipe'` the caller's to read (child.stderr); the
 * rest of its stdout is read and dropped, so the pipe never fills.
 */
export function spawnUntil(args, re, { stderr = 'inherit' } = {}) {
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', stderr] });
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (d) => {
      if (out === null) return;
      out += d;
      const match = re.exec(out);
      if (!match) return;
      out = null;
      resolve({ child, match });
    });
    child.once('exit', (code) => reject(new Error(`${args.join(' ')} exited (${code}) before it listened`)));
  });
}

/** Node's arguments for the sim engine of the build whose `engine/sim/index.js` is at `moduleUrl`, given the sim's `args`. */
export function simProcessArgs(moduleUrl, args) {
  const code = `import { runSimEngineCli } from ${JSON.stringify(moduleUrl)}; await runSimEngineCli(process.argv.slice(1));`;
  return ['--input-type=module', '-e', code, '--', ...args];
}

/** CPU seconds (user + system) a process has used, from /proc; null where there is no /proc (or no pid). */
export function cpuSeconds(pid) {
  if (pid === null || pid === undefined) return null;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // utime and stime are fields 14 and 15 of stat, in clock ticks (100 per second on Linux).
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return null;
  }
}
