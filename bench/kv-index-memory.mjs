// The prefix-cache index's heap bytes per (replica, block) entry, for
// bench/cache-routing.mjs: a fresh index filled as a fleet of `replicas`
// publishing vLLM's events would fill it (64-bit block ids as decimal
// strings, prompts of 32 blocks of 16 tokens), measured with --expose-gc.
// Apart so the bench's own file stays about the workload.
import process from 'node:process';

/** Heap bytes per entry, or NaN without --expose-gc; `dist(path)` names a module of the build. */
export async function bytesPerEntry(dist, replicas, entries) {
  if (typeof globalThis.gc !== 'function') return NaN;
  const { KvIndex } = await import(dist('gateway/prefix-cache/index-store.js'));
  const n = Math.max(entries, 200_000);
  globalThis.gc();
  const base = process.memoryUsage().heapUsed;
  const index = new KvIndex(n + 1);
  const perReplica = Math.ceil(n / replicas);
  for (let r = 0; r < replicas; r++) {
    let parent;
    for (let b = 0; b < perReplica; b++) {
      // vLLM's ids are 64-bit integers as decimal strings; a chain of 32 blocks per prompt.
      const hash = String(1_000_000_000_000_000_000n + BigInt(r * perReplica + b) * 7919n);
      const tokens = Array.from({ length: 16 }, (_, i) => (r * 31 + b * 16 + i) % 32000);
      const event =
        b % 32 === 0
          ? { kind: 'stored', blocks: [{ hash, tokens }] }
          : { kind: 'stored', parent, blocks: [{ hash, tokens }] };
      index.apply(`replica-${r}`, { seq: b, blockSize: 16, events: [event] });
      parent = hash;
    }
  }
  globalThis.gc();
  const bytes = process.memoryUsage().heapUsed - base;
  return { perEntry: bytes / index.size, size: index.size, keep: index };
}
