import { describe, expect, it } from 'vitest';
import { ProgressMeter, type FetchProgress } from './progress.js';

describe('ProgressMeter', () => {
  it('reports at most once per interval, with the rate over that interval', () => {
    let nowMs = 10_000;
    const reports: FetchProgress[] = [];
    const meter = new ProgressMeter({ intervalMs: 250, now: () => nowMs, emit: (p) => reports.push(p) });
    meter.setTotal(10_000);
    meter.add(1_000);
    for (let i = 0; i < 10; i++) {
      nowMs += 50;
      meter.add(100);
    }
    expect(reports, 'the first add reports, then one report per 250 ms of clock').toEqual([
      { bytesDone: 1_000, totalBytes: 10_000 },
      { bytesDone: 1_500, totalBytes: 10_000, bytesPerSecond: 2_000 },
      { bytesDone: 2_000, totalBytes: 10_000, bytesPerSecond: 2_000 },
    ]);
    meter.flush();
    expect(reports.at(-1), 'a flush reports whatever the clock says').toEqual({ bytesDone: 2_000, totalBytes: 10_000 });
    expect(meter.last).toBe(reports.at(-1));
  });

  it('leaves the total out until it is known, and counts a restart as bytes taken back', () => {
    const reports: FetchProgress[] = [];
    const meter = new ProgressMeter({ intervalMs: 0, now: () => 0, emit: (p) => reports.push(p) });
    meter.add(500);
    meter.add(-500);
    expect(reports).toEqual([{ bytesDone: 500 }, { bytesDone: 0 }]);
  });
});
