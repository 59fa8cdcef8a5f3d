// Per-key rate limits enforced across every control plane on one Postgres.
// Admission stays in memory (no query on a request's path): each instance
// counts what it admits per key per minute, adds its counts to the shared
// rows every sync interval, and reads back everyone's totals in the same
// transaction. A key's use is estimated over a sliding minute (this minute's
// count plus the previous minute's, weighted by how much of it is still
// inside the last 60 s).
//
// Tolerance: an instance sees the others' admissions at most about two sync
// intervals late (their flush, then its own read: ~400 ms at the default
// 200 ms), so across N instances a key can exceed its per-minute limit by at
// most what the other N-1 instances admit for it in that time. While the
// store is unreachable each instance enforces the limit on the last shared
// totals it read plus its own counts since: up to N times the limit for keys
// spread evenly over N instances, until the store returns.
//
// Tokens: admission reserves what a request may cost (counted at once in this
// instance's pending counts, so concurrent requests here see each other's
// reservations). The end gives the reservation back to the window it was
// made in, and charges the real use to the window current at settling. A
// refund must never land in a later window than its reservation: there it
// would be negative tokens against that window's real use while the
// reservation still weighed in the earlier one, and a key that reserved at
// the end of a minute and used nothing would get up to twice its limit in
// the next. Across instances the same tolerance holds: each instance
// reserves, and sees the others' reservations a sync late.
import type { Logger } from 'pino';
import { cappedReservation, type LimitDecision, type RequestLimiter } from '../../gateway/index.js';
import type { RateCount, Store } from '../store/index.js';

const WINDOW_MS = 60_000;
/** Reservations never settled (a request the router lost track of) are forgotten after this long, ms. */
const RESERVATION_KEPT_MS = 60 * WINDOW_MS;
const OK: LimitDecision = { ok: true, retryAfterS: 0, limit: null };

export interface SharedRateLimiterOptions {
  store: Store;
  now: () => number;
  logger: Logger;
  /** How often counts are written and the shared totals read, ms; 0 = never on a timer (call sync()). Default 200. */
  syncIntervalMs?: number;
}

interface Counts {
  requests: number;
  tokens: number;
}

export class SharedRateLimiter implements RequestLimiter {
  /** Everyone's totals per key and window start as last read from the store (this instance's written counts included). */
  private shared = new Map<string, Map<number, Counts>>();
  /** This instance's counts per key and window start not yet written. */
  private pending = new Map<string, Map<number, Counts>>();
  /** Counts being written now: still counted until the totals that include them are read back. */
  private sending = new Map<string, Map<number, Counts>>();
  /**
   * Tokens this instance reserved and has not settled yet, per key and the
   * window they were reserved in: where a settle gives its reservation back.
   */
  private outstanding = new Map<string, Map<number, number>>();
  private timer: NodeJS.Timeout | null = null;
  private syncing: Promise<void> = Promise.resolve();
  private lastPruneMs = 0;
  private failing = false;

  constructor(private readonly options: SharedRateLimiterOptions) {
    const interval = options.syncIntervalMs ?? 200;
    if (interval > 0) {
      this.timer = setInterval(() => void this.sync(), interval);
      this.timer.unref();
    }
  }

  admit(
    keyId: string,
    requestsPerMinute: number | null,
    tokensPerMinute: number | null,
    reserveTokens = 0,
  ): LimitDecision {
    if (requestsPerMinute === null && tokensPerMinute === null) return OK;
    const now = this.options.now();
    const start = windowStart(now);
    const fraction = (now - start) / WINDOW_MS;
    const current = this.total(keyId, start);
    const previous = this.total(keyId, start - WINDOW_MS);
    const usedTokens = previous.tokens * (1 - fraction) + current.tokens;
    const usedRequests = previous.requests * (1 - fraction) + current.requests;
    const need = tokensPerMinute === null ? 0 : cappedReservation(reserveTokens, tokensPerMinute);
    const left = (admitted: boolean) => ({
      ...(requestsPerMinute !== null
        ? { requests: Math.max(0, Math.floor(requestsPerMinute - usedRequests - (admitted ? 1 : 0))) }
        : {}),
      ...(tokensPerMinute !== null
        ? { tokens: Math.max(0, Math.floor(tokensPerMinute - usedTokens - (admitted ? need : 0))) }
        : {}),
    });
    // As with the in-process buckets: the reservation must fit, and one that reserves nothing needs room left.
    if (tokensPerMinute !== null && (usedTokens >= tokensPerMinute || usedTokens + need > tokensPerMinute)) {
      return {
        ok: false,
        retryAfterS: retryAfterS(previous.tokens, current.tokens, fraction, tokensPerMinute, Math.max(need, 1)),
        limit: 'tokens',
        remaining: left(false),
      };
    }
    if (requestsPerMinute !== null && usedRequests + 1 > requestsPerMinute) {
      return {
        ok: false,
        retryAfterS: retryAfterS(previous.requests, current.requests, fraction, requestsPerMinute, 1),
        limit: 'requests',
        remaining: left(false),
      };
    }
    add(this.pending, keyId, start, { requests: 1, tokens: need });
    if (need > 0) addOutstanding(this.outstanding, keyId, start, need);
    return { ok: true, retryAfterS: 0, limit: null, remaining: left(true), reservedTokens: need };
  }

  settle(keyId: string, tokensPerMinute: number | null, reservedTokens: number, usedTokens: number): void {
    if (tokensPerMinute === null) return;
    const used = Math.max(0, usedTokens);
    const now = windowStart(this.options.now());
    // Within one window the two moves are one: add the difference.
    const refunds = this.takeReservation(keyId, reservedTokens);
    let charge = used;
    for (const [start, tokens] of refunds) {
      if (start === now) charge -= tokens;
      else add(this.pending, keyId, start, { requests: 0, tokens: -tokens });
    }
    if (charge !== 0) add(this.pending, keyId, now, { requests: 0, tokens: charge });
  }

  /**
   * Takes `reserved` tokens out of this key's outstanding reservations, oldest
   * window first, and says how many came from each window. The router does not
   * say which admission a settle ends, so with reservations in two windows the
   * older one is refunded first: it weighs less in the sliding minute, so a
   * wrong guess counts more, never less. What no outstanding reservation
   * covers (one forgotten after RESERVATION_KEPT_MS) is not refunded at all.
   */
  private takeReservation(keyId: string, reserved: number): [number, number][] {
    const windows = this.outstanding.get(keyId);
    const out: [number, number][] = [];
    if (!windows || reserved <= 0) return out;
    let left = reserved;
    // Oldest first without sorting: a window is added when an admission first falls in it, so in time order.
    for (const [start, held] of windows) {
      if (left <= 0) break;
      const taken = Math.min(held, left);
      left -= taken;
      out.push([start, taken]);
      if (held - taken > 0) windows.set(start, held - taken);
      else windows.delete(start);
    }
    if (windows.size === 0) this.outstanding.delete(keyId);
    return out;
  }

  /** Writes this instance's counts and reads everyone's; safe to call at any time (calls never overlap). */
  sync(): Promise<void> {
    this.syncing = this.syncing.then(() => this.syncOnce());
    return this.syncing;
  }

  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.sync();
  }

  private total(keyId: string, start: number): Counts {
    const out = { requests: 0, tokens: 0 };
    for (const map of [this.shared, this.sending, this.pending]) {
      const c = map.get(keyId)?.get(start);
      out.requests += c?.requests ?? 0;
      out.tokens += c?.tokens ?? 0;
    }
    return out;
  }

  /** Drops reservations older than RESERVATION_KEPT_MS: a request that was never settled must not hold memory for ever. */
  private forgetOldReservations(nowMs: number): void {
    const before = windowStart(nowMs) - RESERVATION_KEPT_MS;
    for (const [keyId, windows] of this.outstanding) {
      for (const start of windows.keys()) if (start < before) windows.delete(start);
      if (windows.size === 0) this.outstanding.delete(keyId);
    }
  }

  private async syncOnce(): Promise<void> {
    const now = this.options.now();
    const oldest = windowStart(now) - WINDOW_MS;
    const sent = this.pending;
    this.sending = sent;
    this.pending = new Map();
    const adds: RateCount[] = [];
    for (const [keyId, windows] of sent)
      for (const [start, c] of windows) if (start >= oldest) adds.push({ keyId, windowStartMs: start, ...c });
    try {
      // Every key's recent windows, not only keys seen here: the first request for a key on this instance must
      // already count what the others admitted. Two rows per key used in the last two minutes.
      const rows = await this.options.store.rateCounts.add(adds, null, oldest);
      const shared = new Map<string, Map<number, Counts>>();
      for (const r of rows) add(shared, r.keyId, r.windowStartMs, { requests: r.requests, tokens: r.tokens });
      this.shared = shared;
      this.sending = new Map();
      if (this.failing) this.options.logger.info('shared rate limits are in step with the store again');
      this.failing = false;
      if (now - this.lastPruneMs > WINDOW_MS) {
        this.lastPruneMs = now;
        this.forgetOldReservations(now);
        await this.options.store.rateCounts.prune(oldest - WINDOW_MS);
      }
    } catch (err) {
      // The store is away: keep the counts so the next sync carries them, and keep enforcing on what is known.
      this.sending = new Map();
      for (const [keyId, windows] of sent) for (const [start, c] of windows) add(this.pending, keyId, start, c);
      if (!this.failing)
        this.options.logger.warn(
          { err: (err as Error).message },
          'cannot sync rate limits with the store; each control plane enforces them on what it knows until it returns',
        );
      this.failing = true;
    }
  }
}

function addOutstanding(map: Map<string, Map<number, number>>, keyId: string, start: number, tokens: number): void {
  let windows = map.get(keyId);
  if (!windows) map.set(keyId, (windows = new Map()));
  windows.set(start, (windows.get(start) ?? 0) + tokens);
}

function windowStart(nowMs: number): number {
  return Math.floor(nowMs / WINDOW_MS) * WINDOW_MS;
}

function add(map: Map<string, Map<number, Counts>>, keyId: string, start: number, c: Counts): void {
  let windows = map.get(keyId);
  if (!windows) map.set(keyId, (windows = new Map()));
  const t = windows.get(start) ?? { requests: 0, tokens: 0 };
  t.requests += c.requests;
  t.tokens += c.tokens;
  windows.set(start, t);
}

/**
 * Seconds until `need` more fits under `limit`, if nothing else is admitted:
 * first while the previous minute's weight fades, else into the next minute,
 * where this minute's count becomes the fading one. At least 1, at most 60.
 */
function retryAfterS(previous: number, current: number, fraction: number, limit: number, need: number): number {
  const leftS = (1 - fraction) * 60;
  if (current + need <= limit && previous > 0) {
    // previous × (1 − f − t/60) + current + need ≤ limit
    const t = ((previous * (1 - fraction) + current + need - limit) / previous) * 60;
    return clampS(t);
  }
  if (current === 0) return clampS(leftS);
  const t = leftS + ((current + need - limit) / current) * 60;
  return clampS(t);
}

function clampS(s: number): number {
  return Math.min(60, Math.max(1, Math.ceil(s)));
}
