// Per-key requests- and tokens-per-minute limits as token buckets: a key may
// burst up to its per-minute figure and refills continuously, which is what
// OpenAI's own limits feel like. State is per control plane process; several
// control planes on one Postgres pass a limiter shared through the store
// instead (src/control/leader/shared-rate-limit.ts).
export interface LimitDecision {
  readonly ok: boolean;
  /** Seconds until a request would be admitted (for Retry-After); 0 when ok. */
  readonly retryAfterS: number;
  /** Which limit refused: 'requests' or 'tokens'; null when ok. */
  readonly limit: 'requests' | 'tokens' | null;
  /**
   * What is left of each limit after this request (rounded down, never
   * below 0); a limit the key does not have is absent. For OpenAI's
   * x-ratelimit-* headers, which clients read to pace themselves.
   */
  readonly remaining?: { readonly requests?: number; readonly tokens?: number };
}

interface Bucket {
  level: number;
  atMs: number;
}

const OK: LimitDecision = { ok: true, retryAfterS: 0, limit: null };

/** What the router asks of a limiter; RateLimiter is this process's own, src/control/leader has one shared through the store. */
export interface RequestLimiter {
  admit(keyId: string, requestsPerMinute: number | null, tokensPerMinute: number | null): LimitDecision;
  charge(keyId: string, tokensPerMinute: number | null, tokens: number): void;
}

export class RateLimiter implements RequestLimiter {
  private readonly requests = new Map<string, Bucket>();
  private readonly tokens = new Map<string, Bucket>();

  constructor(private readonly now: () => number) {}

  /** Takes one request from the key's bucket, or says how long to wait. Null limits always pass. */
  admit(keyId: string, requestsPerMinute: number | null, tokensPerMinute: number | null): LimitDecision {
    if (requestsPerMinute === null && tokensPerMinute === null) return OK;
    const now = this.now();
    const tokens = tokensPerMinute === null ? null : refill(this.tokens, keyId, tokensPerMinute, now);
    const requests = requestsPerMinute === null ? null : refill(this.requests, keyId, requestsPerMinute, now);
    const left = (admitted: boolean) => ({
      ...(requests ? { requests: Math.max(0, Math.floor(requests.level - (admitted ? 1 : 0))) } : {}),
      ...(tokens ? { tokens: Math.max(0, Math.floor(tokens.level)) } : {}),
    });
    // Tokens are charged after the answer (only then are they known), so admission needs a positive balance.
    if (tokens && tokens.level <= 0) return { ok: false, retryAfterS: Math.max(1, Math.ceil(((1 - tokens.level) * 60) / tokensPerMinute!)), limit: 'tokens', remaining: left(false) };
    if (requests && requests.level < 1) {
      return { ok: false, retryAfterS: Math.max(1, Math.ceil(((1 - requests.level) * 60) / requestsPerMinute!)), limit: 'requests', remaining: left(false) };
    }
    const remaining = left(true);
    if (requests) requests.level -= 1;
    return { ok: true, retryAfterS: 0, limit: null, remaining };
  }

  /** Charges tokens used by an answered request. The balance may go negative: the next request waits. */
  charge(keyId: string, tokensPerMinute: number | null, tokens: number): void {
    if (tokensPerMinute === null || tokens <= 0) return;
    refill(this.tokens, keyId, tokensPerMinute, this.now()).level -= tokens;
  }
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
