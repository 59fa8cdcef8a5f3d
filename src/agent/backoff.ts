// When an agent tries again, and where it starts. A fleet restarted at once
// (a power cut, a control-plane upgrade) must not stampede: each agent waits
// a random part of an interval before its first join, backs off
// exponentially with full jitter after a failure, and starts at an agent URL
// picked by its node id, so that many nodes spread over the control planes
// they are given. Pure functions over a random number passed in, so tests
// pin them without timers.
import { createHash } from 'node:crypto';

export interface BackoffOptions {
  /** The first retry's ceiling, ms. */
  baseMs: number;
  /** The most any retry waits, ms. */
  capMs: number;
}

/**
 * How long to wait before retry number `attempt` (1 = the first retry):
 * "full jitter", a uniform draw from 0 up to min(cap, base * 2^(attempt-1)),
 * so that agents that failed together do not retry together. `random` is in
 * [0, 1). Never below a tenth of the base, so a failing agent never spins.
 */
export function backoffDelayMs(attempt: number, options: BackoffOptions, random: number): number {
  const ceiling = Math.min(options.capMs, options.baseMs * 2 ** Math.max(0, Math.min(attempt - 1, 30)));
  return Math.max(options.baseMs / 10, Math.floor(random * ceiling));
}

/**
 * How long a starting agent waits before its first join, ms: a random part
 * of `spreadMs`, so that a fleet started together reaches the control plane
 * spread over it. 0 or less = at once.
 */
export function firstJoinDelayMs(spreadMs: number, random: number): number {
  return spreadMs > 0 ? Math.floor(random * spreadMs) : 0;
}

/** The agent URL a node starts at: a stable pick by its id, so that a fleet spreads evenly over several control planes. */
export function startIndex(nodeId: string, urlCount: number): number {
  if (urlCount <= 1) return 0;
  return createHash('sha256').update(nodeId).digest().readUInt32BE(0) % urlCount;
}
