// A replica's attempts that ended lately, kept for least-load: an engine's
// load sample counts the requests running when it was read, and the ones of
// this gateway's that have finished since are taken off it (pick.ts,
// loadViewOf). Apart from the chooser because how they are kept is the
// cost. Least-load asks once per candidate per request, and the window
// holds every attempt of the last load_stale_ms (thousands at a few hundred
// requests a second): walked on every ask, the count cost O(rate × window)
// per request, and at 1,500 requests a second on two replicas with fresh
// samples it took half the gateway's CPU. So the count for the sample's
// moment is kept and moved as attempts end and as old ones are dropped;
// the window is walked only when a new sample arrives, about once a poll.

/** Ended attempts dropped from the front at a time, at the least (see trim). */
export const FINISHED_TRIM_BATCH = 256;

export class FinishedSends {
  /** Send and end times (epoch ms) of the attempts kept, in the order they ended: numbers, so an ended attempt is no object to collect. */
  private starts: number[] = [];
  private ends: number[] = [];
  /** The moment `counted` is for; NaN = no count asked yet. */
  private countedAt = Number.NaN;
  /** Attempts kept that were sent at or before countedAt and ended after it. */
  private counted = 0;

  /** `keepMs`: how long an ended attempt is kept at the least (load_stale_ms: a sample older than that is not read). */
  constructor(private readonly keepMs: number) {}

  /** Attempts kept, a batch of them past their time at most. */
  get size(): number {
    return this.ends.length;
  }

  /** An attempt sent at `startMs` ended at `endMs`; ends come in order. */
  add(startMs: number, endMs: number): void {
    this.trim(endMs - this.keepMs);
    this.starts.push(startMs);
    this.ends.push(endMs);
    if (this.spans(startMs, endMs)) this.counted++;
  }

  /** How many of the attempts kept were running at `at`: sent at or before it, ended after it. */
  finishedSince(at: number): number {
    if (at !== this.countedAt) {
      this.countedAt = at;
      this.counted = 0;
      for (let i = 0; i < this.ends.length; i++) if (this.spans(this.starts[i]!, this.ends[i]!)) this.counted++;
    }
    return this.counted;
  }

  private spans(startMs: number, endMs: number): boolean {
    return startMs <= this.countedAt && endMs > this.countedAt;
  }

  /**
   * Drops the attempts that ended before `before` from the front, but only
   * once FINISHED_TRIM_BATCH of them can go at once: dropped one per
   * attempt, every end moved the whole list. The few hundred kept past
   * their time change no count that is read: loadViewOf reads only a
   * sample no older than keepMs, and every attempt dropped or kept past
   * its time ended before such a sample.
   */
  private trim(before: number): void {
    const ends = this.ends;
    if (ends.length < FINISHED_TRIM_BATCH || ends[FINISHED_TRIM_BATCH - 1]! >= before) return;
    let drop = FINISHED_TRIM_BATCH;
    while (drop < ends.length && ends[drop]! < before) drop++;
    for (let i = 0; i < drop; i++) if (this.spans(this.starts[i]!, ends[i]!)) this.counted--;
    this.starts.splice(0, drop);
    ends.splice(0, drop);
  }
}
