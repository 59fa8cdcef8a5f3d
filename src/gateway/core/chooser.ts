// The replica chooser: which ready replica of a model an attempt goes to,
// and the bookkeeping that choice reads. It owns what this gateway knows of
// each replica's use (in flight and last used, for least-inflight and for
// the reconciler's scaling), the start times of its sends and of those that
// finished lately (least-load corrects an engine's last sample by them), and
// the prefix rings per model; the interceptors it hands the attempt chain
// keep them as attempts run. The policies themselves are pure functions in
// pick.ts, tested without sockets. Separate from
// the attempt loop, which asks only "the candidates" and "which one".
// prefix-cache routing's state (the index, its sources, the tokenizer) is
// prefix-cache/cache-routing.ts; its choice is prefix-cache/score.ts.
import type { Logger } from 'pino';
import type { ReplicaDirectory, ReplicaUse, RoutedModel, RouterReplica } from '../ports/index.js';
import { CacheRouting } from '../prefix-cache/cache-routing.js';
import { pickByCache } from '../prefix-cache/score.js';
import { replicaUse, type Interceptor } from './dispatch.js';
import type { FinishedSends } from './finished-sends.js';
import { HashRing, expectedLoad, fnv1a, loadViewOf, pickByPrefix, pickLeastLoad, pickLeastLoaded } from './pick.js';
import { promptPrefix } from './prompt-text.js';
import type { ChoiceRecord } from './request-log.js';
import type { ParsedRequest } from './validate.js';

const NO_SENDS: readonly number[] = Object.freeze([]);

/** The settings the chooser reads (RouterOptions has them). */
export interface ChooserOptions {
  readonly loadStaleMs: number;
  readonly prefixChars: number;
  readonly loadFactor: number;
  readonly cacheTokensPerRequest: number;
  readonly cacheMaxBlocks: number;
  readonly tokenCacheEntries: number;
  readonly tokenizeTimeoutMs: number;
  readonly now: () => number;
  readonly random: () => number;
}

export class ReplicaChooser {
  /** In flight and last used per replica id; no entry = never used, or forgotten by forget(). */
  readonly use = new Map<string, ReplicaUse>();
  /** Start times (epoch ms) of the attempts in flight per replica id, oldest first: the sends an engine sample has not seen yet. */
  private readonly sends = new Map<string, number[]>();
  /** Attempts per replica id that ended within the last loadStaleMs: the ones an engine sample counted that are gone since. */
  private readonly finished = new Map<string, FinishedSends>();
  /** Prefix rings by model, with the id set they were built from. */
  private readonly rings = new Map<string, HashRing>();
  /** What the engines' KV caches hold, for `routing: prefix-cache`; reads nothing until such a model's replica publishes. */
  readonly cache: CacheRouting;

  constructor(
    private readonly replicas: ReplicaDirectory,
    private readonly options: ChooserOptions,
    logger?: Logger,
  ) {
    this.cache = new CacheRouting({
      maxBlocks: options.cacheMaxBlocks,
      tokenizeTimeoutMs: options.tokenizeTimeoutMs,
      tokenCacheEntries: options.tokenCacheEntries,
      tokenizerBackoffMs: 10_000,
      maxTokenizing: 64,
      now: options.now,
      random: options.random,
      ...(logger ? { logger } : {}),
    });
  }

  /** Start times (epoch ms) of this router's attempts in flight at a replica, oldest first; empty = none. */
  sendsOf(replicaId: string): readonly number[] {
    return this.sends.get(replicaId) ?? NO_SENDS;
  }

  /** The interceptors that keep this chooser's bookkeeping as attempts run: in-flight and last use, send times. */
  interceptors(): Interceptor[] {
    const { now, loadStaleMs } = this.options;
    return [
      replicaUse({
        useOf: (id) => this.useOf(id),
        sends: this.sends,
        finished: this.finished,
        keepFinishedMs: loadStaleMs,
        now,
      }),
    ];
  }

  /** The model's ready replicas taking new requests: draining ones only when every one drains (none then). */
  candidates(model: RoutedModel): readonly RouterReplica[] {
    const all = this.replicas.ready(model.name);
    let draining = false;
    for (const r of all) if (r.draining) draining = true;
    return draining ? all.filter((r) => !r.draining) : all;
  }

  /**
   * The replica for an attempt at `model`, among non-empty `candidates` (the
   * ones not tried yet). `why`, when given, is filled with each candidate's
   * score and the rule that picked the winner: numbers only, words come
   * when someone reads the request log.
   */
  choose(
    model: RoutedModel,
    candidates: readonly RouterReplica[],
    parsed: ParsedRequest,
    why?: ChoiceRecord,
  ): RouterReplica {
    const o = this.options;
    if (model.routing === 'least-inflight') {
      const inFlight = (id: string) => this.use.get(id)?.inFlight ?? 0;
      if (why) for (const c of candidates) why.candidates.push({ replica: c.id, load: inFlight(c.id) });
      return pickLeastLoaded(candidates, inFlight, o.random, why)!;
    }
    // Scored once per choice: the prefix walk asks a replica's load more than once.
    const now = o.now();
    const scores = new Map<string, number>();
    for (const c of candidates) {
      const view = loadViewOf(c.load, this.sends.get(c.id) ?? NO_SENDS, now, o.loadStaleMs, this.finished.get(c.id));
      const score = expectedLoad(view);
      scores.set(c.id, score);
      if (why)
        why.candidates.push(
          view.sample ? { replica: c.id, load: score, sampled: true } : { replica: c.id, load: score },
        );
    }
    const load = (id: string) => scores.get(id) ?? 0;
    if (model.routing === 'prefix-cache' && candidates.length > 1) {
      const view = this.cache.view(model.name, candidates, parsed.body);
      if (view) {
        const scored = candidates.map((c) => ({
          id: c.id,
          replica: c,
          load: load(c.id),
          cachedTokens: view.cached.get(c.id) ?? 0,
        }));
        const picked = pickByCache(scored, view.promptTokens, o.cacheTokensPerRequest, o.random)!;
        if (why) {
          why.by = picked.tie ? 'prefix-cache-tie' : 'prefix-cache';
          why.candidates.forEach((k, i) => {
            k.load = picked.scores[i]!;
            k.expectedHit = view.promptTokens > 0 ? Math.min(1, scored[i]!.cachedTokens / view.promptTokens) : 0;
          });
        }
        return picked.chosen.replica;
      }
    }
    // prefix-cache with nothing of the prompt tokenised yet routes as `prefix` does; with no engine publishing, as least-load.
    const byText =
      model.routing === 'prefix' || (model.routing === 'prefix-cache' && this.cache.publishing(candidates).length > 0);
    if (byText && candidates.length > 1) {
      const hash = fnv1a(promptPrefix(parsed.body, o.prefixChars));
      return pickByPrefix(candidates, this.ringOf(model), hash, load, o.loadFactor, why)!;
    }
    return pickLeastLoad(candidates, load, o.random, why)!;
  }

  /** A copy of the use per replica id, for the reconciler (scaling, ReplicaView's idle_seconds). */
  replicaUse(): Map<string, ReplicaUse> {
    const out = new Map<string, ReplicaUse>();
    for (const [id, u] of this.use) out.set(id, { ...u });
    return out;
  }

  /** Forgets the use and finished sends of replicas not in `liveIds` that carry nothing. */
  forget(liveIds: ReadonlySet<string>): void {
    for (const [id, u] of this.use) {
      if (liveIds.has(id) || u.inFlight > 0) continue;
      this.use.delete(id);
    }
    for (const id of this.finished.keys()) if (!liveIds.has(id)) this.finished.delete(id);
    this.cache.forget(liveIds);
  }

  /** Stops reading the engines' KV events. */
  close(): Promise<void> {
    return this.cache.close();
  }

  private useOf(id: string): ReplicaUse {
    let u = this.use.get(id);
    if (!u) {
      u = { inFlight: 0, lastUsedAtMs: null };
      this.use.set(id, u);
    }
    return u;
  }

  /** The ring covers every replica taking requests, not just this attempt's candidates, so a retry does not rebuild it. */
  private ringOf(model: RoutedModel): HashRing {
    const ids = this.candidates(model)
      .map((c) => c.id)
      .sort();
    let ring = this.rings.get(model.name);
    if (!ring || ring.ids.length !== ids.length || ring.ids.some((id, i) => id !== ids[i])) {
      ring = new HashRing(ids);
      this.rings.set(model.name, ring);
    }
    return ring;
  }
}
