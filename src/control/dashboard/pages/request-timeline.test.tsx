// The request page's timeline shows the steps in the admin API's order and
// words, the trace id, and each attempt's candidates with the winner marked.
import { describe, expect, it } from 'vitest';
import type { RequestDetailView } from '../../../api/types.js';
import { renderFragment } from '../layout.js';
import { TimelinePanels } from './request-timeline.js';

const detail: RequestDetailView = {
  id: 'req_3',
  at: '2026-12-06T07:00:00.000Z',
  model: 'big',
  endpoint: 'chat',
  stream: false,
  status: 200,
  outcome: 'ok',
  replica: 'r2',
  attempts: [
    {
      model: 'big',
      replica: 'r2',
      outcome: 'answered',
      duration_ms: 9,
      choice: {
        by: 'prefix-next',
        ring_owner: 'r1',
        bound: 3,
        candidates: [
          { replica: 'r1', load: 5, sampled: true, expected_hit: 0.75 },
          { replica: 'r2', load: 1 },
        ],
      },
    },
  ],
  duration_ms: 20,
  trace_id: '4bf92f3577b34da6a3ce929d0e0e4736',
  timeline: [
    { at_ms: 0, kind: 'arrived', says: 'arrived: chat for model big' },
    { at_ms: 2, kind: 'chosen', says: 'attempt 1: replica r2 of big', attempt: 1 },
    { at_ms: 11, kind: 'answered', says: 'attempt 1: replica r2 answered 200', attempt: 1 },
    { at_ms: 20, kind: 'done', says: 'done: 200' },
  ],
};

const text = (html: string) => html.replace(/<[^>]+>/g, ' ').replace(/\s+/g, ' ');

describe('the request timeline panels', () => {
  it('list the steps in order with their times, and the trace id', () => {
    const html = renderFragment(<TimelinePanels r={detail} />);
    const steps = [...html.matchAll(/data-step="(\d+)" data-kind="(\w+)"/g)].map((m) => `${m[1]}:${m[2]}`);
    expect(steps).toEqual(['1:arrived', '2:chosen', '3:answered', '4:done']);
    expect(text(html)).toContain('+11 attempt 1: replica r2 answered 200');
    expect(text(html)).toContain('Trace: 4bf92f3577b34da6a3ce929d0e0e4736');
  });

  it('show every candidate with its score, where it came from, and which won by what rule', () => {
    const t = text(renderFragment(<TimelinePanels r={detail} />));
    expect(t).toContain('1 prefix-next (ring owner r1, bound 3) r1 5 engine sample 75%');
    expect(t).toContain('1 prefix-next (ring owner r1, bound 3) r2 (won) 1 in flight here -');
  });

  it('say there is no trace, and no candidates, rather than show nothing', () => {
    const t = text(
      renderFragment(<TimelinePanels r={{ ...detail, trace_id: undefined, attempts: [], timeline: [] }} />),
    );
    expect(t).toContain('none (tracing is off, or this request was not sampled)');
    expect(t).toContain('No attempt recorded its candidates.');
  });
});
