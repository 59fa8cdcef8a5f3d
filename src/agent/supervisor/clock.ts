// Time as the supervisor sees it: a reading and a wait. Injected, so tests of
// backoff, start timeouts and stop grace periods run on a clock they move by
// hand instead of waiting for real seconds.

export interface SupervisorClock {
  /** Epoch milliseconds. */
  now(): number;
  /** Resolves after `ms`, or early (resolving, never rejecting) once `signal` aborts. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

export function systemClock(): SupervisorClock {
  return {
    now: () => Date.now(),
    sleep: (ms, signal) =>
      new Promise<void>((resolve) => {
        if (signal?.aborted) return resolve();
        const onAbort = () => {
          clearTimeout(timer);
          resolve();
        };
        const timer = setTimeout(
          () => {
            signal?.removeEventListener('abort', onAbort);
            resolve();
          },
          Math.max(0, ms),
        );
        signal?.addEventListener('abort', onAbort, { once: true });
      }),
  };
}
