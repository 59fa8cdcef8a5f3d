import { describe, expect, it } from 'vitest';
import { bytesOrUnknown, fit, formatSeconds, Output, visibleWidth } from './render.js';

function capture(tty: boolean, width?: number): { out: Output; text: () => string } {
  let text = '';
  return { out: new Output((s) => (text += s), { tty, ...(width ? { width } : {}) }), text: () => text };
}

describe('render', () => {
  it('never colours output that is not a terminal', () => {
    const { out } = capture(false);
    expect(out.state('failed')).toBe('failed');
    expect(out.table(['A'], [[out.state('ready')]])).not.toMatch(/\x1b\[/); // eslint-disable-line no-control-regex
    expect(capture(true).out.state('failed')).toMatch(/\x1b\[31m/); // eslint-disable-line no-control-regex
  });

  it('fits a table into the width by shrinking the widest column', () => {
    const { out } = capture(false, 40);
    const t = out.table(['NAME', 'SOURCE'], [['m', 'hf://organisation/a-long-repository-name-that-cannot-fit']]);
    for (const line of t.split('\n')) expect(visibleWidth(line)).toBeLessThanOrEqual(40);
    expect(fit([10, 50], 40)).toEqual([10, 30]);
    expect(fit([5, 5], 4), 'columns never shrink below their minimum').toEqual([5, 5]);
  });

  it('prints unknown as "-", never as zero', () => {
    expect(bytesOrUnknown(undefined)).toBe('-');
    expect(bytesOrUnknown(0)).toBe('0 B');
    expect(bytesOrUnknown(141 * 2 ** 30)).toBe('141 GiB');
    expect(bytesOrUnknown(1.5 * 2 ** 20)).toBe('1.5 MiB');
    expect(formatSeconds(-1)).toBe('-');
    expect(formatSeconds(192)).toBe('3m12s');
  });
});
