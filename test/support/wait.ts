// The one way a test waits: re-check a condition against a deadline, never
// a fixed sleep (STYLE.md, "Tests"); and, for a state that must hold through
// a window, keep looking at it all through the window. Unit tests beside the code and the
// end-to-end tests under test/ both import it from here; it is kept apart
// from processes.ts so a unit test that waits does not pull in the process
// launcher.

export interface WaitOptions {
  /** How long to keep re-checking before failing; absent means 30 s, far beyond any healthy run. */
  timeoutMs?: number;
  /** Pause between checks; absent means 100 ms, gentle on the processes an end-to-end probe asks. */
  intervalMs?: number;
}

/**
 * Thrown by a probe to fail the wait at once (the process it watches has
 * exited, say) instead of re-checking until the deadline.
 */
export class StopWaiting extends Error {
  override name = 'StopWaiting';
}

/**
 * Re-checks `probe` until it returns something other than `undefined` or
 * `false`, and resolves with that value. A probe that throws is checked
 * again (a server still starting refuses connections); the last error is
 * named if the deadline passes. A `StopWaiting` error ends the wait at once.
 * `what` names what was awaited in the timeout message; pass a function when
 * the message should describe the state at the deadline rather than at the
 * start.
 */
export async function waitFor<T>(
  what: string | (() => string),
  probe: () => T | undefined | false | Promise<T | undefined | false>,
  options: WaitOptions | number = {},
): Promise<T> {
  const { timeoutMs = 30_000, intervalMs = 100 } = typeof options === 'number' ? { timeoutMs: options } : options;
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined && value !== false) return value;
    } catch (err) {
      if (err instanceof StopWaiting) throw err;
      last = err;
    }
    if (Date.now() >= deadline) {
      const name = typeof what === 'function' ? what() : what;
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${name}${last ? ` (last error: ${String(last)})` : ''}`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

/**
 * Looks with `look` every `intervalMs` (absent: 100 ms) until `forMs` have
 * passed: for a test that a state holds all through a window (a node stays
 * up through a lossy link), where waitFor waits for one to begin. What the
 * looks saw is the caller's to assert.
 */
export async function lookThroughout(forMs: number, look: () => unknown, intervalMs = 100): Promise<void> {
  const until = Date.now() + forMs;
  while (Date.now() < until) {
    await look();
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}
