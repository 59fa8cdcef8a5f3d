// Choosing a replica: pure functions over the candidates and their in-flight
// counts, so the policy is tested without sockets. Least-load is power of two
// choices (two random candidates, the less busy wins: near-best balance
// without a global scan or herding). Prefix routing is consistent hashing
// with bounded loads (CHWBL, as KubeAI does): a prompt prefix goes to the
// same replica while that replica is within `loadFactor` of the mean load,
// so an engine's prefix cache is reused but one hot prefix cannot swamp it.

export interface Candidate {
  readonly id: string;
}

/** Power of two choices by in-flight count; `random` in [0, 1) is injected so tests are deterministic. */
export function pickLeastLoaded<T extends Candidate>(candidates: readonly T[], inFlight: (id: string) => number, random: () => number): T | undefined {
  const n = candidates.length;
  if (n <= 1) return candidates[0];
  const i = Math.floor(random() * n) % n;
  let j = Math.floor(random() * (n - 1)) % (n - 1);
  if (j >= i) j++;
  const a = candidates[i]!;
  const b = candidates[j]!;
  return inFlight(b.id) < inFlight(a.id) ? b : a;
}

/** FNV-1a, 32 bits: fast, stable across processes, good enough to spread ring points. */
export function fnv1a(text: string, seed = 0x811c9dc5): number {
  let h = seed >>> 0;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  // A final avalanche so near-identical inputs ("r1#1", "r1#2") land far apart.
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b) >>> 0;
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35) >>> 0;
  h ^= h >>> 16;
  return h >>> 0;
}

/** Points each replica gets on the ring: enough that shares are within a few per cent. */
const VIRTUAL_NODES = 128;

/** A hash ring over a set of replica ids; rebuilt only when the set changes. */
export class HashRing {
  private readonly points: Uint32Array;
  private readonly owners: string[];

  constructor(readonly ids: readonly string[]) {
    const pairs: [number, string][] = [];
    for (const id of ids) for (let v = 0; v < VIRTUAL_NODES; v++) pairs.push([fnv1a(`${id}#${v}`), id]);
    pairs.sort((x, y) => x[0] - y[0]);
    this.points = Uint32Array.from(pairs.map((p) => p[0]));
    this.owners = pairs.map((p) => p[1]);
  }

  /** Replica ids clockwise from `hash`, each once: the order CHWBL walks. */
  *walk(hash: number): Generator<string> {
    const n = this.points.length;
    if (n === 0) return;
    let lo = 0;
    let hi = n;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.points[mid]! < hash) lo = mid + 1;
      else hi = mid;
    }
    const seen = new Set<string>();
    for (let k = 0; k < n && seen.size < this.ids.length; k++) {
      const id = this.owners[(lo + k) % n]!;
      if (seen.has(id)) continue;
      seen.add(id);
      yield id;
    }
  }
}

/**
 * CHWBL: the first replica clockwise from the prefix's hash whose load after
 * taking this request stays within ceil(loadFactor × mean load). Falls back to
 * the least loaded when every one is over (cannot happen with loadFactor > 1,
 * kept for safety).
 */
export function pickByPrefix<T extends Candidate>(
  candidates: readonly T[],
  ring: HashRing,
  prefixHash: number,
  inFlight: (id: string) => number,
  loadFactor: number,
): T | undefined {
  if (candidates.length <= 1) return candidates[0];
  const byId = new Map(candidates.map((c) => [c.id, c]));
  let total = 0;
  for (const c of candidates) total += inFlight(c.id);
  const bound = Math.ceil((loadFactor * (total + 1)) / candidates.length);
  for (const id of ring.walk(prefixHash)) {
    const c = byId.get(id);
    if (c && inFlight(id) + 1 <= bound) return c;
  }
  let best = candidates[0]!;
  for (const c of candidates) if (inFlight(c.id) < inFlight(best.id)) best = c;
  return best;
}
