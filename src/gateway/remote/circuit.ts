// What this gateway has learnt of each remote replica from its own attempts:
// a circuit that opens after consecutive failures (the remote is not chosen
// for `openMs`, then one request probes it: half-open; its success closes
// the circuit, its failure opens it again), and the time a 429's Retry-After
// asked us to wait. Separate from the control plane's health probe, which
// decides whether the remote is presented at all: this is the passive half,
// fed by real requests, read on every choice, so it is memory only.

/** When a circuit opens and for how long; defaults in CIRCUIT_DEFAULTS. */
export interface CircuitOptions {
  /** Consecutive failed attempts that open the circuit; 0 = never opens. */
  readonly failuresToOpen: number;
  /** How long an open circuit keeps the remote out before a half-open probe, ms. */
  readonly openMs: number;
  /** A 429 without a usable Retry-After is waited out this long, ms. */
  readonly defaultRetryAfterMs: number;
  readonly now: () => number;
}

export const CIRCUIT_DEFAULTS = { failuresToOpen: 3, openMs: 30_000, defaultRetryAfterMs: 1_000 } as const;

/** The most a Retry-After may hold a remote out: a remote's typo of a day is not obeyed. */
const MAX_RETRY_AFTER_MS = 10 * 60_000;

interface CircuitState {
  failures: number;
  /** Epoch ms until which the circuit is open; 0 = closed. */
  openUntilMs: number;
  /** A half-open probe is in flight: no second request goes until it ends. */
  probing: boolean;
  /** Epoch ms until which a 429 asked to be left alone; 0 = none. */
  retryAfterUntilMs: number;
}

export type CircuitPhase = 'closed' | 'open' | 'half-open';

export class RemoteCircuits {
  private readonly states = new Map<string, CircuitState>();

  constructor(private readonly options: CircuitOptions) {}

  /** Whether the replica may be chosen now: not open, not probing, not inside a Retry-After. */
  available(id: string): boolean {
    const s = this.states.get(id);
    if (!s) return true;
    const now = this.options.now();
    if (s.retryAfterUntilMs > now) return false;
    if (s.openUntilMs === 0) return true;
    return s.openUntilMs <= now && !s.probing;
  }

  phase(id: string): CircuitPhase {
    const s = this.states.get(id);
    if (!s || s.openUntilMs === 0) return 'closed';
    return s.openUntilMs > this.options.now() ? 'open' : 'half-open';
  }

  /** An attempt is sent: past an open circuit's time it is the half-open probe. */
  started(id: string): void {
    const s = this.states.get(id);
    if (s && s.openUntilMs !== 0 && s.openUntilMs <= this.options.now()) s.probing = true;
  }

  /** The remote answered: the circuit closes. */
  succeeded(id: string): void {
    const s = this.states.get(id);
    if (!s) return;
    s.failures = 0;
    s.openUntilMs = 0;
    s.probing = false;
  }

  /** The attempt ended telling nothing of the remote (its client left): a half-open probe may be sent again. */
  abandoned(id: string): void {
    const s = this.states.get(id);
    if (s) s.probing = false;
  }

  /** The remote failed before its first byte (refused, reset, hung, 5xx): enough in a row open the circuit. */
  failed(id: string): void {
    const s = this.stateOf(id);
    s.failures++;
    const o = this.options;
    if (s.probing || (o.failuresToOpen > 0 && s.failures >= o.failuresToOpen)) s.openUntilMs = o.now() + o.openMs;
    s.probing = false;
  }

  /**
   * The remote answered 429: it is left alone until its Retry-After (seconds
   * or an HTTP date; absent or unreadable = the default wait). Not a failure:
   * a busy remote is healthy. Returns the wait in ms.
   */
  limited(id: string, retryAfter: string | undefined): number {
    const o = this.options;
    const now = o.now();
    const ms = Math.min(MAX_RETRY_AFTER_MS, retryAfterMs(retryAfter, now) ?? o.defaultRetryAfterMs);
    const s = this.stateOf(id);
    s.retryAfterUntilMs = Math.max(s.retryAfterUntilMs, now + ms);
    s.probing = false;
    return ms;
  }

  /** Seconds until the soonest of `ids` is out of its Retry-After, rounded up; null = none of them is waiting one out. */
  retryAfterS(ids: readonly string[]): number | null {
    const now = this.options.now();
    let soonest = Infinity;
    for (const id of ids) {
      const until = this.states.get(id)?.retryAfterUntilMs ?? 0;
      if (until > now) soonest = Math.min(soonest, until - now);
    }
    return soonest === Infinity ? null : Math.max(1, Math.ceil(soonest / 1000));
  }

  private stateOf(id: string): CircuitState {
    let s = this.states.get(id);
    if (!s) {
      s = { failures: 0, openUntilMs: 0, probing: false, retryAfterUntilMs: 0 };
      this.states.set(id, s);
    }
    return s;
  }
}

/** A Retry-After header in ms from `nowMs`: delay-seconds or an HTTP date; null = absent or unreadable. */
export function retryAfterMs(value: string | undefined, nowMs: number): number | null {
  if (value === undefined) return null;
  const text = value.trim();
  if (/^\d+(\.\d+)?$/.test(text)) return Math.round(Number(text) * 1000);
  const at = Date.parse(text);
  return Number.isNaN(at) ? null : Math.max(0, at - nowMs);
}
