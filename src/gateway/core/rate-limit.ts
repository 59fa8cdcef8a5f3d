// Per-key requests- and tokens-per-minute limits as token buckets: a key may
// burst up to its per-minute figure and refills continuously, which is what
// OpenAI's own limits feel like. State is per control plane process; several
// control planes on one Postgres pass a limiter shared through the store
// instead (src/control/leader/shared-rate-limit.ts).
//
// Tokens are known only once an answer ends, so admission reserves what a
// request may cost (its max_tokens plus its prompt, as the router estimates
// it) and the end settles the reservation to the real usage. Without the
// reservation every request admitted while the balance is above zero would
// run, and a burst of concurrent ones would spend many minutes' worth.
import type { LimitDecision, RequestLimiter } from '../ports/index.js';

export type { LimitDecision, RequestLimiter } from '../ports/index.js';

interface Bucket {
  level: number;
  atMs: number;
}

const OK: LimitDecision = { ok: true, retryAfterS: 0, limit: null };

/** The tokens a request reserves: what it asked, but never more than a whole minute's limit (the router refuses such a request first). */
export function cappedReservation(reserveTokens: number, tokensPerMinute: number): number {
  return Math.max(0, Math.min(Math.ceil(reserveTokens), tokensPerMinute));
}

export class RateLimiter implements RequestLimiter {
  private readonly requests = new Map<string, Bucket>();
  private readonly tokens = new Map<string, Bucket>();

  constructor(private readonly now: () => number) {}

  /** Takes one request (and its token reservation) from the key's buckets, or says how long to wait. Null limits always pass. */
  admit(
    keyId: string,
    requestsPerMinute: number | null,
    tokensPerMinute: number | null,
    reserveTokens = 0,
  ): LimitDecision {
    if (requestsPerMinute === null && tokensPerMinute === null) return OK;
    const now = this.now();
    const tokens = tokensPerMinute === null ? null : refill(this.tokens, keyId, tokensPerMinute, now);
    const requests = requestsPerMinute === null ? null : refill(this.requests, keyId, requestsPerMinute, now);
    const need = tokensPerMinute === null ? 0 : cappedReservation(reserveTokens, tokensPerMinute);
    const left = (admitted: boolean) => remainingOf(requests, tokens, admitted ? 1 : 0, admitted ? need : 0);
    // A request that reserves nothing still needs a positive balance: the tokens charged after earlier answers count.
    if (tokens && (tokens.level <= 0 || tokens.level < need)) {
      const target = Math.max(need, 1);
      return {
        ok: false,
        retryAfterS: Math.max(1, Math.ceil(((target - tokens.level) * 60) / tokensPerMinute!)),
        limit: 'tokens',
        remaining: left(false),
      };
    }
    if (requests && requests.level < 1) {
      return {
        ok: false,
        retryAfterS: Math.max(1, Math.ceil(((1 - requests.level) * 60) / requestsPerMinute!)),
        limit: 'requests',
        remaining: left(false),
      };
    }
    const remaining = left(true);
    if (requests) requests.level -= 1;
    if (tokens) tokens.level -= need;
    return { ok: true, retryAfterS: 0, limit: null, remaining, reservedTokens: need };
  }

  /** The difference between use and reservation goes to the balance, which may go negative: the next request waits. */
  settle(keyId: string, tokensPerMinute: number | null, reservedTokens: number, usedTokens: number): void {
    if (tokensPerMinute === null) return;
    const delta = Math.max(0, usedTokens) - reservedTokens;
    if (delta === 0) return;
    const b = refill(this.tokens, keyId, tokensPerMinute, this.now());
    // A refund never fills the bucket past its size.
    b.level = Math.min(tokensPerMinute, b.level - delta);
  }
}

/** What is left of each limit the key has (one it has not is absent) after taking these; built without spreads, as it is on every limited request's path. */
function remainingOf(
  requests: Bucket | null,
  tokens: Bucket | null,
  takeRequests: number,
  takeTokens: number,
): { requests?: number; tokens?: number } {
  const out: { requests?: number; tokens?: number } = {};
  if (requests) out.requests = Math.max(0, Math.floor(requests.level - takeRequests));
  if (tokens) out.tokens = Math.max(0, Math.floor(tokens.level - takeTokens));
  return out;
}

function refill(map: Map<string, Bucket>, keyId: string, perMinute: number, nowMs: number): Bucket {
  let b = map.get(keyId);
  if (!b) {
    b = { level: perMinute, atMs: nowMs };
    map.set(keyId, b);
    return b;
  }
  b.level = Math.min(perMinute, b.level + ((nowMs - b.atMs) * perMinute) / 60_000);
  b.atMs = nowMs;
  return b;
}
