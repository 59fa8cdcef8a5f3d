// The points unkeyed requests are split at: per model, a low-discrepancy
// sequence (the golden-ratio Kronecker sequence, frac(start + n * 0.618…))
// instead of an independent random draw per request. Independent draws make
// a 90/10 split's count over 2,000 requests binomial (σ ≈ 13 requests, and a
// run 3 σ out now and then); consecutive points of this sequence fill [0, 1)
// so evenly that over any run of n requests each target's count is within a
// few requests of its weight's share (3 at most for a 10% target up to
// n = 2,000, table-tested), while the order still looks shuffled (no burst
// of canary requests in a row). Apart from split.ts, which stays pure: this
// is the one piece of state a split keeps, one number per model.

/** 1/φ: the step whose multiples spread most evenly over [0, 1). */
const GOLDEN_STEP = (Math.sqrt(5) - 1) / 2;

/** Past this many models remembered the map is started afresh (a catalog has far fewer; this bounds a churning one). */
const MAX_SEQUENCES = 10_000;

/** The next point of each model's sequence. */
export class SplitDraws {
  /** Per model: the last point handed out. */
  private readonly last = new Map<string, number>();

  /** `random` places each model's first point (so gateways do not all start in step); uniform in [0, 1). */
  constructor(private readonly random: () => number) {}

  /** The next point in [0, 1) for a request split by `model`. */
  next(model: string): number {
    let at = this.last.get(model);
    if (at === undefined) {
      if (this.last.size >= MAX_SEQUENCES) this.last.clear();
      at = this.random();
    }
    at += GOLDEN_STEP;
    if (at >= 1) at -= 1;
    this.last.set(model, at);
    return at;
  }
}
