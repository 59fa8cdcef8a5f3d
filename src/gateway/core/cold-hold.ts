// The cold hold: a request for a model with no ready replica waits here
// while one starts, up to coldStartTimeoutMs, re-checking every coldPollMs
// and woken at once when the replica directory says something changed
// (its `subscribe`, where it has one). It counts what it holds per model
// (the scaler reads queued(), the metrics the held gauge) and per key,
// refusing a key that already holds maxHeldPerKey (each held request keeps
// a socket and a timer for minutes). Separate from the attempt loop, which
// only asks it to hold, and from the chooser, whose candidates it re-checks.
import type { ApiKeyRecord, ReplicaDirectory, RoutedModel } from '../ports/index.js';

/** What a wait reads and sets of the request it serves. */
export interface Waiter {
  readonly clientGone: boolean;
  readonly timedOut: boolean;
  readonly revoked: boolean;
  /** Wakes the wait in progress early (the client left, a timeout, a revocation); null when none is. */
  wake: (() => void) | null;
}

/** Waits `ms`, or less if `waiter.wake` is called; a hold's wait (`holds` given) is woken by wakeAll() too. */
export function waitFor(waiter: Waiter, ms: number, holds: Set<() => void> | null = null): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      holds?.delete(done);
      waiter.wake = null;
      resolve();
    };
    const timer = setTimeout(done, ms);
    waiter.wake = done;
    holds?.add(done);
  });
}

/** The settings the hold reads (RouterOptions has them). */
export interface ColdHoldOptions {
  readonly timeouts: { readonly coldStartTimeoutMs: number };
  readonly coldPollMs: number;
  readonly maxHeldPerKey: number;
  readonly now: () => number;
}

export class ColdHold {
  /** Requests held per model name while none of its replicas is ready; no entry = none. */
  readonly held = new Map<string, number>();
  /** The same requests counted per key id, for maxHeldPerKey; no entry = none. */
  private readonly heldByKey = new Map<string, number>();
  /** The wake of every wait in progress here. */
  private readonly holds = new Set<() => void>();
  private readonly unsubscribe: (() => void) | null;

  constructor(
    replicas: ReplicaDirectory,
    private readonly options: ColdHoldOptions,
  ) {
    this.unsubscribe = replicas.subscribe ? replicas.subscribe(() => this.wakeAll()) : null;
  }

  /** Requests held per model (canonical name), for the scaler; no entry = none. */
  queued(): Map<string, number> {
    return new Map(this.held);
  }

  /**
   * Why `key` may not hold one more request for `model`: it holds
   * maxHeldPerKey already. Null = it may (or there is no key).
   */
  refusal(key: ApiKeyRecord | null, model: RoutedModel): string | null {
    const max = this.options.maxHeldPerKey;
    if (key === null || (this.heldByKey.get(key.id) ?? 0) < max) return null;
    return (
      `this API key (${key.prefix}…) already has ${max} requests waiting for models with no ready replica, ` +
      `the most one key may hold (max_held_per_key); retry once model \`${model.name}\` is up, or ask the operator to raise max_held_per_key`
    );
  }

  /**
   * Holds the request until `ready()` says a replica is, the client leaves,
   * it times out or is revoked, or coldStartTimeoutMs passes; returns the
   * milliseconds it was held.
   */
  async hold(waiter: Waiter, key: ApiKeyRecord | null, model: RoutedModel, ready: () => boolean): Promise<number> {
    const { timeouts, coldPollMs, now } = this.options;
    const deadline = now() + timeouts.coldStartTimeoutMs;
    const heldFrom = performance.now();
    const keyId = key?.id ?? null;
    countUp(this.held, model.name);
    if (keyId !== null) countUp(this.heldByKey, keyId);
    try {
      while (!waiter.clientGone && !waiter.timedOut && !waiter.revoked && !ready()) {
        const leftMs = deadline - now();
        if (leftMs <= 0) break;
        await waitFor(waiter, Math.min(coldPollMs, leftMs), this.holds);
      }
    } finally {
      countDown(this.held, model.name);
      if (keyId !== null) countDown(this.heldByKey, keyId);
    }
    return performance.now() - heldFrom;
  }

  /** Wakes every hold to look again: a replica may have become ready (or the gateway is closing). */
  wakeAll(): void {
    for (const wake of [...this.holds]) wake();
  }

  close(): void {
    this.unsubscribe?.();
    this.wakeAll();
  }
}

function countUp(counts: Map<string, number>, name: string): void {
  counts.set(name, (counts.get(name) ?? 0) + 1);
}

/** Takes one off; the entry goes at zero, so an absent entry means none. */
function countDown(counts: Map<string, number>, name: string): void {
  const left = (counts.get(name) ?? 1) - 1;
  if (left > 0) counts.set(name, left);
  else counts.delete(name);
}
