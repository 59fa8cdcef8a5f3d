// n > 1 for the builtin engine: n answers to one prompt. Each choice is an
// ordinary generation that asks the runtime for a sequence of its own, so
// with free sequences they decode side by side and with one they run one
// after another in the pool's queue; nothing here knows how many there are.
// A choice that fails stops the others, since the request fails whole.

/**
 * Runs `runOne` once per choice, each under a signal that aborts when the
 * request's does or when another choice fails. Resolves with the results in
 * choice order.
 */
export async function runChoices<T>(
  n: number,
  signal: AbortSignal,
  runOne: (index: number, signal: AbortSignal) => Promise<T>,
): Promise<T[]> {
  if (n === 1) return [await runOne(0, signal)];
  const siblings = new AbortController();
  const stop = () => siblings.abort(signal.reason);
  signal.addEventListener('abort', stop, { once: true });
  try {
    return await Promise.all(
      Array.from({ length: n }, (_, index) =>
        runOne(index, siblings.signal).catch((err: unknown) => {
          siblings.abort(err);
          throw err;
        }),
      ),
    );
  } finally {
    signal.removeEventListener('abort', stop);
  }
}

/**
 * The seed of one choice: a client's seed makes the whole answer repeatable,
 * but n copies of one reply would be useless, so choice i samples with seed
 * + i. Absent stays absent (a fresh random seed per choice).
 */
export function choiceSeed(seed: number | undefined, index: number): number | undefined {
  return seed === undefined ? undefined : (seed + index) % 2 ** 32;
}
