// Choosing a replica: pure functions over the candidates and their load, so
// the policy is tested without sockets.
//
// Least-load (the default) scores each replica by the wait a request sent
// there can expect, and takes the lowest, ties broken at random. A replica
// whose engine reported a fresh sample (see expectedLoad) is scored by what
// the engine said: its running and waiting requests, plus the requests this
// router sent it since the sample was taken (so a burst between samples is
// not invisible), plus a penalty when its KV cache is nearly full. One whose
// sample is stale or absent is scored by this router's own in-flight
// requests to it. Both are estimates of the requests at that engine, so
// fresh and stale replicas compare directly; what a stale score misses is
// load this router did not send (other control planes, other clients, a long
// prompt), which is what engine samples are for.
//
// Least-inflight (`routing: least-inflight`) is the choice before engine
// samples: power of two choices by this router's in-flight count (two random
// candidates, the less busy wins). Prefix routing is consistent hashing with
// bounded loads (CHWBL, as KubeAI does), over the same score as least-load:
// a prompt prefix goes to the same replica while that replica is within
// `loadFactor` of the mean load, so an engine's prefix cache is reused but
// one hot prefix cannot swamp it.
import type { ReplicaLoad } from '../ports/index.js';

export interface Candidate {
  readonly id: string;
}

/**
 * The rule that picked a replica, for the request log's "why this one":
 * only-candidate: there was one; least-load: the lowest score;
 * least-load-tie: the lowest score, shared, one of those at random;
 * two-choices: least-inflight's two random candidates, the less busy;
 * prefix-owner: the prompt prefix's owner on the ring, within the load bound;
 * prefix-next: the owner was over the bound, the next on the ring within it;
 * prefix-all-over: every one was over the bound, the least loaded;
 * prefix-cache: the lowest load plus uncached prompt (prefix-cache/score.ts);
 * prefix-cache-tie: the same, shared, one of those at random.
 */
export type PickRule =
  | 'only-candidate'
  | 'least-load'
  | 'least-load-tie'
  | 'two-choices'
  | 'prefix-owner'
  | 'prefix-next'
  | 'prefix-all-over'
  | 'prefix-cache'
  | 'prefix-cache-tie';

/** What a pick says of its choice when asked (an object the caller passes, so a pick not asked allocates nothing). */
export interface PickWhy {
  by: PickRule;
  /** Prefix routing: the ring owner of the prompt's point. */
  ringOwner?: string;
  /** Prefix routing: the load bound. */
  bound?: number;
}

/** What the choice knows of one replica's load. */
export interface LoadView {
  /** Requests this router has in flight to the replica now. */
  readonly inFlight: number;
  /** The engine's last sample, when fresh; absent = stale or never reported (in-flight counting). */
  readonly sample?: {
    readonly running: number;
    readonly waiting: number;
    /** 0..1; absent = not reported (no penalty). */
    readonly kvUsage?: number;
    /** Requests this router sent the replica after the sample was taken that are still in flight. */
    readonly sentSince: number;
    /** Requests this router had sent before the sample was taken (so the engine counted them) that have finished since. */
    readonly finishedSince?: number;
  };
}

/** KV use above which a replica is penalised: near a full cache engines preempt or stop admitting. */
export const KV_PENALTY_FROM = 0.9;
/** The penalty at a full cache, in requests; it grows linearly from 0 at KV_PENALTY_FROM. */
export const KV_PENALTY_AT_FULL = 4;

/**
 * A replica's expected load in requests, lower is better. Fresh: the
 * engine's running + 2 × waiting, less this router's requests it counted
 * that have finished since, plus this router's sends since, plus the KV
 * penalty. A waiting request is weighed double because it means the engine
 * has no free sequence, so a request sent there waits for one to finish
 * before its first token. Correcting by what finished and what was sent
 * keeps a sample a second old honest: without it a replica that just
 * drained looks full, and one that just took a burst looks empty, until
 * the next sample. Stale or absent: this router's in-flight count.
 */
export function expectedLoad(view: LoadView): number {
  const s = view.sample;
  if (!s) return view.inFlight;
  const kv = s.kvUsage ?? 0;
  const penalty =
    kv > KV_PENALTY_FROM ? ((Math.min(kv, 1) - KV_PENALTY_FROM) / (1 - KV_PENALTY_FROM)) * KV_PENALTY_AT_FULL : 0;
  return Math.max(0, s.running + 2 * s.waiting - (s.finishedSince ?? 0)) + s.sentSince + penalty;
}

/** The attempts that ended lately at one replica (finished-sends.ts's FinishedSends). */
export interface FinishedAt {
  /** How many of them were running at `at` (epoch ms): sent at or before it, ended after it. */
  finishedSince(at: number): number;
}

/**
 * What the choice knows of a replica at `nowMs`: `sendStartsMs` are the
 * start times of this router's attempts to it still in flight, `finished`
 * its recent attempts that ended (at least the last `staleAfterMs`; absent =
 * none). The sample is used while at most `staleAfterMs` old (a sample dated
 * in the future, from clocks a little apart, counts as just taken); past
 * that, or absent, only the in-flight count is.
 */
export function loadViewOf(
  sample: ReplicaLoad | undefined,
  sendStartsMs: readonly number[],
  nowMs: number,
  staleAfterMs: number,
  finished?: FinishedAt,
): LoadView {
  const inFlight = sendStartsMs.length;
  if (!sample || staleAfterMs <= 0 || nowMs - sample.sampledAtMs > staleAfterMs) return { inFlight };
  const at = sample.sampledAtMs;
  let sentSince = 0;
  for (const t of sendStartsMs) if (t > at) sentSince++;
  const finishedSince = finished?.finishedSince(at) ?? 0;
  return {
    inFlight,
    sample: {
      running: sample.running,
      waiting: sample.waiting,
      ...(sample.kvUsage === undefined ? {} : { kvUsage: sample.kvUsage }),
      sentSince,
      ...(finishedSince > 0 ? { finishedSince } : {}),
    },
  };
}

/**
 * The candidate with the lowest load; among equals one at random (`random`
 * in [0, 1), injected so tests are deterministic). `why`, when given, is
 * told the rule.
 */
export function pickLeastLoad<T extends Candidate>(
  candidates: readonly T[],
  load: (id: string) => number,
  random: () => number,
  why?: PickWhy,
): T | undefined {
  if (candidates.length <= 1) {
    if (why) why.by = 'only-candidate';
    return candidates[0];
  }
  let bestLoad = Infinity;
  for (const c of candidates) bestLoad = Math.min(bestLoad, load(c.id));
  const best = candidates.filter((c) => load(c.id) === bestLoad);
  if (why) why.by = best.length > 1 ? 'least-load-tie' : 'least-load';
  return best[Math.floor(random() * best.length) % best.length];
}

/** Power of two choices by in-flight count; `random` in [0, 1) is injected so tests are deterministic. `why`: as pickLeastLoad. */
export function pickLeastLoaded<T extends Candidate>(
  candidates: readonly T[],
  inFlight: (id: string) => number,
  random: () => number,
  why?: PickWhy,
): T | undefined {
  const n = candidates.length;
  if (why) why.by = n <= 1 ? 'only-candidate' : 'two-choices';
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
 * taking this request stays within ceil(loadFactor × mean load). Load is
 * whatever `load` says: expectedLoad's score, so the bound sees the engines'
 * queues too. Falls back to
 * the least loaded when every one is over (cannot happen with loadFactor > 1,
 * kept for safety).
 */
export function pickByPrefix<T extends Candidate>(
  candidates: readonly T[],
  ring: HashRing,
  prefixHash: number,
  load: (id: string) => number,
  loadFactor: number,
  why?: PickWhy,
): T | undefined {
  if (candidates.length <= 1) {
    if (why) why.by = 'only-candidate';
    return candidates[0];
  }
  const byId = new Map(candidates.map((c) => [c.id, c]));
  let total = 0;
  for (const c of candidates) total += load(c.id);
  const bound = Math.ceil((loadFactor * (total + 1)) / candidates.length);
  if (why) why.bound = bound;
  // The owner is the first candidate on the walk: a replica already tried is on the ring but not a candidate.
  let owner: string | undefined;
  for (const id of ring.walk(prefixHash)) {
    const c = byId.get(id);
    if (!c) continue;
    owner ??= id;
    if (load(id) + 1 <= bound) {
      if (why) {
        why.by = id === owner ? 'prefix-owner' : 'prefix-next';
        why.ringOwner = owner;
      }
      return c;
    }
  }
  let best = candidates[0]!;
  for (const c of candidates) if (load(c.id) < load(best.id)) best = c;
  if (why) {
    why.by = 'prefix-all-over';
    if (owner !== undefined) why.ringOwner = owner;
  }
  return best;
}
