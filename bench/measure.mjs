// What the in-process benches (placement.mjs, fleet.mjs) share: their flags,
// read as numbers, and one timed call in CPU and wall time. CPU time (user +
// system) because on a shared machine the wall clock mostly measures the
// neighbours; wall time is returned beside it.
// Node's globals are imported by name: the lint config gives plain .mjs files no Node environment.
import { performance } from 'node:perf_hooks';
import process from 'node:process';

/** The number after --name on the command line; `fallback` when the flag is absent. */
export function arg(name, fallback) {
  const i = process.argv.indexOf(`--${name}`);
  return i === -1 ? fallback : Number(process.argv[i + 1]);
}

/** Runs fn once; CPU ms (user + system) and wall ms it took, and what it returned. */
export function measure(fn) {
  const cpu = process.cpuUsage();
  const wall = performance.now();
  const value = fn();
  const used = process.cpuUsage(cpu);
  return { value, cpuMs: (used.user + used.system) / 1000, wallMs: performance.now() - wall };
}
