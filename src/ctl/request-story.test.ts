// `ctl request ID` prints the timeline the server sent, one line per step in
// its order, with the trace id (or why there is none); without a timeline (an
// older control plane) it keeps the table of attempts.
import { describe, expect, it } from 'vitest';
import { Output } from './render.js';
import { renderRequest } from './why-operations.js';

function capture(): { out: Output; text: () => string } {
  let text = '';
  return { out: new Output((s) => (text += s), { tty: false, width: 200 }), text: () => text };
}

const base = {
  id: 'req_9',
  at: '2026-12-06T07:00:00.000Z',
  model: 'big',
  endpoint: 'chat',
  stream: true,
  status: 200,
  outcome: 'ok',
  replica: 'small-r1',
  fallback: 'small',
  attempts: [
    { model: 'big', replica: 'big-r1', outcome: 'failed' as const, reason: 'refused', duration_ms: 3 },
    { model: 'small', replica: 'small-r1', outcome: 'answered' as const, duration_ms: 40 },
  ],
  duration_ms: 4100,
};

describe('ctl request', () => {
  it('prints each step on its own line, in order, after the verdict and the trace id', () => {
    const { out, text } = capture();
    renderRequest(out, {
      ...base,
      trace_id: '0af7651916cd43dd8448eb211c80319c',
      timeline: [
        { at_ms: 0, kind: 'arrived', says: 'arrived: chat for model big' },
        { at_ms: 4000, kind: 'cold_ready', says: 'replica big-r1 of big ready after 3998 ms held' },
        { at_ms: 4003, kind: 'failed', says: 'attempt 1 failed after 3 ms: refused', attempt: 1 },
        { at_ms: 4100, kind: 'done', says: 'done: 200' },
      ],
    });
    const lines = text().split('\n');
    const at = (s: string) => lines.findIndex((l) => l.includes(s));
    expect(lines[at('trace')]).toContain('0af7651916cd43dd8448eb211c80319c');
    expect(lines[at('timeline')]).toContain('4 steps');
    expect(lines[at('attempt 1 failed')]).toBe('  +4003 ms  attempt 1 failed after 3 ms: refused');
    expect(lines[at('arrived:')], 'times padded to one width').toBe('  +   0 ms  arrived: chat for model big');
    const order = ['served by', 'trace', 'arrived:', 'ready after', 'attempt 1 failed', 'done: 200'].map(at);
    expect(order.every((i) => i >= 0)).toBe(true);
    expect(order).toEqual([...order].sort((a, b) => a - b));
    expect(text(), 'the timeline replaces the attempts table').not.toContain('REPLICA');
  });

  it('says why there is no trace id', () => {
    const { out, text } = capture();
    renderRequest(out, { ...base, timeline: [{ at_ms: 0, kind: 'arrived', says: 'arrived' }] });
    expect(text()).toContain('none (tracing is off, or this request was not sampled)');
  });

  it('keeps the attempts table for a server that sends no timeline', () => {
    const { out, text } = capture();
    renderRequest(out, base);
    expect(text()).toContain('REPLICA');
    expect(text()).not.toContain('timeline');
  });
});
