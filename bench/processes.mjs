// What the benches that run llmgw as child processes share: waiting for a
// control plane's listening line, and reading a process's CPU time from
// /proc. Apart from measure.mjs, which times calls inside the bench's own
// process.
// Node's globals are imported by name: the lint config gives plain .mjs files no Node environment.
import { readFileSync } from 'node:fs';
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
