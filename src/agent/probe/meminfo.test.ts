import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parseMeminfo } from './meminfo.js';

function fixture(path: string): string {
  return readFileSync(new URL(`./fixtures/${path}`, import.meta.url), 'utf8');
}

describe('parseMeminfo', () => {
  it('reads total and available memory in bytes (the kernel writes KiB)', () => {
    const info = parseMeminfo(
      'MemTotal:       24683548 kB\nMemFree:        23798860 kB\nMemAvailable:   23863344 kB\n',
    );
    expect(info).toEqual({ totalBytes: 24683548 * 1024, availableBytes: 23863344 * 1024 });
  });

  it('reads a captured /proc/meminfo', () => {
    const info = parseMeminfo(fixture('meminfo/own-this-machine.txt'));
    expect(info.totalBytes).toBeGreaterThan(0);
    expect(info.availableBytes).toBeLessThanOrEqual(info.totalBytes!);
  });

  it('leaves available memory unknown on a kernel without MemAvailable', () => {
    expect(parseMeminfo(fixture('meminfo/own-kernel-3.10-no-memavailable.txt'))).toEqual({
      totalBytes: 528280184 * 1024,
    });
  });
});
