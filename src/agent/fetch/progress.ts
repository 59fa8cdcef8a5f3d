// Fetch progress, throttled. A 100 GiB download arrives in millions of
// chunks; the callers (heartbeats, ctl, the dashboard) want a number a few
// times a second. Separate so the throttle can be tested with a fake clock
// instead of a fast or slow disk.

export interface FetchProgress {
  /** Bytes on disk for this fetch, including any resumed from an earlier run. */
  bytesDone: number;
  /** Absent until known (a URL whose server has not answered yet). */
  totalBytes?: number;
  /** Over the interval since the previous report; absent on the first report. */
  bytesPerSecond?: number;
}

export interface ProgressMeterOptions {
  /** At most one report per this many ms, plus a first and a last one. 0: report every change. */
  intervalMs: number;
  /** Epoch ms. */
  now: () => number;
  emit: (progress: FetchProgress) => void;
}

export class ProgressMeter {
  readonly #options: ProgressMeterOptions;
  #bytesDone = 0;
  #totalBytes: number | undefined;
  #lastEmitMs: number | null = null;
  #lastEmitBytes = 0;
  #last: FetchProgress | null = null;

  constructor(options: ProgressMeterOptions) {
    this.#options = options;
  }

  get bytesDone(): number {
    return this.#bytesDone;
  }

  get totalBytes(): number | undefined {
    return this.#totalBytes;
  }

  /** The last report made, for a caller that joins a fetch already under way; null before the first. */
  get last(): FetchProgress | null {
    return this.#last;
  }

  /** Sets or grows the total (a URL's size is learned from its response). */
  setTotal(totalBytes: number | undefined): void {
    this.#totalBytes = totalBytes;
  }

  /** Adds bytes; negative when a partial is thrown away and restarted from zero. */
  add(bytes: number): void {
    this.#bytesDone += bytes;
    const nowMs = this.#options.now();
    if (this.#lastEmitMs === null || nowMs - this.#lastEmitMs >= this.#options.intervalMs) this.#emit(nowMs);
  }

  /** Reports now, throttle or not: at the start and at the end. */
  flush(): void {
    this.#emit(this.#options.now());
  }

  #emit(nowMs: number): void {
    const progress: FetchProgress = { bytesDone: this.#bytesDone };
    if (this.#totalBytes !== undefined) progress.totalBytes = this.#totalBytes;
    if (this.#lastEmitMs !== null && nowMs > this.#lastEmitMs) {
      progress.bytesPerSecond = Math.max(
        0,
        Math.round(((this.#bytesDone - this.#lastEmitBytes) * 1000) / (nowMs - this.#lastEmitMs)),
      );
    }
    this.#lastEmitMs = nowMs;
    this.#lastEmitBytes = this.#bytesDone;
    this.#last = progress;
    this.#options.emit(progress);
  }
}
