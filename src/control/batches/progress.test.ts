import { describe, expect, it } from 'vitest';
import { progressOf, type ProgressInput } from './progress.js';

const at = (over: Partial<ProgressInput>): ProgressInput => ({
  status: 'in_progress',
  total: 1000,
  completed: 0,
  failed: 0,
  startedAtMs: 0,
  nowMs: 100_000,
  ...over,
});

describe('progressOf', () => {
  it('estimates the finish from the rate since the batch started: 250 lines in 100 s, 750 left, 300 s more', () => {
    const p = progressOf(at({ completed: 240, failed: 10 }));
    expect(p).toEqual({ done: 250, linesPerSecond: 2.5, estimatedFinishAtMs: 400_000 });
  });

  it('knows no rate before a line is done, and none before it started', () => {
    expect(progressOf(at({})).estimatedFinishAtMs).toBeNull();
    expect(progressOf(at({ status: 'validating', startedAtMs: null, completed: 0 })).linesPerSecond).toBeNull();
  });

  it('gives no estimate for a batch that has ended, whatever its counts', () => {
    for (const status of ['completed', 'failed', 'expired', 'cancelled'])
      expect(progressOf(at({ status, completed: 500 })).estimatedFinishAtMs, status).toBeNull();
  });

  it('estimates now for a batch whose lines are all done but which is still finalizing', () => {
    expect(progressOf(at({ status: 'finalizing', completed: 1000 })).estimatedFinishAtMs).toBe(100_000);
  });
});
