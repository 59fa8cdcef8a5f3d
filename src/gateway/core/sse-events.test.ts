// The SSE splitter every translating relay reads upstream streams with, as
// tables: framing, events cut across reads, characters cut across reads, and
// the bound on an event without a boundary. Guards against a half event or a
// half character reaching a translator, and against an upstream that never
// sends a blank line growing the gateway's memory without limit (#34).
import { describe, expect, it } from 'vitest';
import { eventData, lastEventEnd, splitEvents, SseEvents } from './sse-events.js';

/** Pushes each read in turn; the text each returned, then what rest() gives. */
function run(reads: (string | Buffer)[], limitBytes = 0): { out: (string | null)[]; rest: string } {
  const s = new SseEvents(limitBytes);
  const out = reads.map((r) => s.push(typeof r === 'string' ? Buffer.from(r) : r));
  return { out, rest: s.rest() };
}

describe('SseEvents', () => {
  it.each([
    ['LF framing, one read', ['data: a\n\ndata: b\n\n'], ['data: a\n\ndata: b\n\n'], ''],
    ['CRLF framing, one read', ['data: a\r\n\r\ndata: b\r\n\r\n'], ['data: a\r\n\r\ndata: b\r\n\r\n'], ''],
    ['an event split across reads', ['data: a\n\ndata: ', 'b\n\n'], ['data: a\n\n', 'data: b\n\n'], ''],
    ['a read with no boundary yields nothing yet', ['data: a', 'bc', '\n\n'], ['', '', 'data: abc\n\n'], ''],
    ['an LF boundary cut between reads', ['data: a\n', '\ndata: b'], ['', 'data: a\n\n'], 'data: b'],
    ['a CRLF boundary cut between reads', ['data: a\r\n\r', '\n'], ['', 'data: a\r\n\r\n'], ''],
    ['a CRLF boundary cut after one byte', ['data: a\r', '\n\r\n'], ['', 'data: a\r\n\r\n'], ''],
    ['a last event without its blank line', ['data: a\n\ndata: b'], ['data: a\n\n'], 'data: b'],
  ])('%s', (_what, reads, want, rest) => {
    const r = run(reads);
    expect(r.out).toEqual(want);
    expect(r.rest).toBe(rest);
  });

  it('never cuts a multibyte character split across reads', () => {
    const bytes = Buffer.from('data: {"t":"Hé€😀"}\n\n');
    // Every cut point, inside each multibyte character included.
    for (let cut = 1; cut < bytes.length; cut++) {
      const r = run([bytes.subarray(0, cut), bytes.subarray(cut)]);
      expect(r.out.join(''), `cut at byte ${cut}`).toBe('data: {"t":"Hé€😀"}\n\n');
      expect(r.out.join('')).not.toContain('\uFFFD');
    }
  });

  it('reassembles an event that comes a byte at a time', () => {
    const text = 'event: x\r\ndata: {"é":1}\r\n\r\n';
    const r = run([...Buffer.from(text)].map((b) => Buffer.from([b])));
    expect(r.out.join('')).toBe(text);
  });

  it('gives null once an event passes the limit without a boundary, and drops what it held', () => {
    const s = new SseEvents(10);
    expect(s.push(Buffer.from('data: 1234'))).toBe('');
    expect(s.carriedBytes).toBe(10);
    expect(s.push(Buffer.from('5')), 'one byte over').toBeNull();
    expect(s.carriedBytes, 'nothing is held after the overflow').toBe(0);
    expect(s.push(Buffer.from('data: ok\n\n')), 'reading starts afresh').toBe('data: ok\n\n');
  });

  it('bounds the carry of one read alone too', () => {
    expect(run(['data: a\n\n' + 'x'.repeat(11)], 10).out).toEqual([null]);
    expect(run(['x'.repeat(11) + '\n\n'], 10).out, 'a long event that ends in the read is fine').toEqual([
      'x'.repeat(11) + '\n\n',
    ]);
  });

  it('clear() forgets a half event', () => {
    const s = new SseEvents();
    s.push(Buffer.from('data: half'));
    s.clear();
    expect(s.rest()).toBe('');
  });
});

describe('lastEventEnd, splitEvents, eventData', () => {
  it.each([
    ['data: a\n\ndata: b', 9],
    ['data: a\r\n\r\ndata: b\r\n\r\n', 22],
    ['data: a\r\n', 0],
    ['', 0],
  ])('lastEventEnd(%j) = %i', (text, want) => {
    expect(lastEventEnd(Buffer.from(text))).toBe(want);
  });

  it('splits whole events however they are framed, with no empty last piece', () => {
    expect(splitEvents('data: a\n\ndata: b\r\n\r\n')).toEqual(['data: a', 'data: b']);
    expect(splitEvents('')).toEqual([]);
  });

  it.each([
    ['event: e\ndata: {"a":1}', '{"a":1}'],
    ['data:{"a":1}', '{"a":1}'],
    ['data: {"a":\r\ndata: 1}', '{"a":1}'],
    [': keep-alive', ''],
    ['event: ping', ''],
    ['data: [DONE]', '[DONE]'],
  ])('eventData(%j) = %j', (event, want) => {
    expect(eventData(event)).toBe(want);
  });
});
