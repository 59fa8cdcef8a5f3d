// A request's timeline told from its record: the steps in the order they
// happened, each saying why (which rule picked the replica, over which
// candidates), so `ctl request ID` and the dashboard tell one story.
import { describe, expect, it } from 'vitest';
import type { RequestRecord } from './request-log.js';
import { requestRecordView } from './request-log.js';
import { requestDetailView, timelineOf } from './request-timeline.js';

function record(over: Partial<RequestRecord> = {}): RequestRecord {
  return {
    id: 'req-1',
    atMs: Date.parse('2026-12-06T07:00:00Z'),
    model: 'big',
    endpoint: 'chat',
    stream: true,
    key: 'sk-abc',
    status: 200,
    clientGone: false,
    timedOut: false,
    attempts: [],
    durationMs: 5200,
    ...over,
  };
}

/** Held cold for `big`, its replica failed, `small` answered: the story the e2e test tells end to end. */
const heldRetriedFellBack = record({
  admission: { outcome: 'admitted', doneMs: 2 },
  cold: { model: 'big', startMs: 3, heldMs: 4000, end: 'ready', replica: 'big-r1' },
  heldMs: 4000,
  attempts: [
    {
      model: 'big',
      replica: 'big-r1',
      nodes: ['n1'],
      outcome: 'failed',
      reason: 'the engine answered 503 Service Unavailable',
      startMs: 4004,
      durationMs: 10,
      choice: { by: 'only-candidate', candidates: [{ replica: 'big-r1', load: 0 }] },
    },
    {
      model: 'small',
      replica: 'small-r2',
      outcome: 'answered',
      startMs: 4064,
      backoffMs: 50,
      durationMs: 1100,
      choice: {
        by: 'least-load',
        candidates: [
          { replica: 'small-r1', load: 2.5, sampled: true },
          { replica: 'small-r2', load: 0 },
        ],
      },
    },
  ],
  ttftMs: 4100,
  promptTokens: 12,
  completionTokens: 30,
  cost: 0.00042,
  traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
  durationMs: 5170,
});

describe('timeline', () => {
  it('tells a held, retried, fallen-back request in order, each step with its numbers', () => {
    const t = timelineOf(heldRetriedFellBack);
    expect(t.map((e) => e.kind)).toEqual([
      'arrived',
      'admitted',
      'cold_hold',
      'cold_ready',
      'chosen',
      'failed',
      'backoff',
      'fallback',
      'chosen',
      'first_token',
      'answered',
      'tokens',
      'cost',
      'done',
    ]);
    const says = (kind: string, n = 0) => t.filter((e) => e.kind === kind)[n]!.says;
    expect(says('cold_ready')).toBe('replica big-r1 of big ready after 4000 ms held');
    expect(says('chosen', 0)).toContain('replica big-r1 of big on n1; won as the only candidate');
    expect(says('failed')).toBe('attempt 1 failed after 10 ms: the engine answered 503 Service Unavailable');
    expect(says('backoff')).toBe('waited 50 ms before retrying');
    expect(says('fallback')).toBe('falls back to model small: no replica of big was left to try');
    expect(says('chosen', 1)).toBe(
      'attempt 2: replica small-r2 of small; won as the least expected load; candidates: small-r1 load 2.5 (engine sample), small-r2* load 0 (in flight here)',
    );
    expect(says('cost')).toBe("cost 0.00042 (in the price table's currency)");
    expect(says('done')).toBe(
      'done: 200 from replica small-r2 (fallback small) after 5170 ms; trace 4bf92f3577b34da6a3ce929d0e0e4736',
    );
    const times = t.map((e) => e.at_ms);
    expect(times, 'never goes back in time').toEqual([...times].sort((a, b) => a - b));
    expect(t.find((e) => e.kind === 'backoff')?.at_ms, 'the wait sits before the attempt it delayed').toBe(4014);
  });

  it('tells the wait in a fair-share queue before the attempt it held back', () => {
    const t = timelineOf({
      ...heldRetriedFellBack,
      cold: undefined,
      attempts: [{ ...heldRetriedFellBack.attempts[1]!, startMs: 400, queuedMs: 350, backoffMs: undefined }],
    });
    const queued = t.find((e) => e.kind === 'queued')!;
    expect(queued.says).toBe("waited 350 ms in small's fair-share queue: its replicas were at capacity");
    expect(queued.at_ms, 'the wait began before the attempt by as long as it lasted').toBe(50);
    expect(t.map((e) => e.kind).indexOf('queued')).toBeLessThan(t.map((e) => e.kind).indexOf('chosen'));
  });

  it('names the ring owner and the bound for prefix routing, and a candidate passed over', () => {
    const t = timelineOf(
      record({
        attempts: [
          {
            model: 'big',
            replica: 'r2',
            outcome: 'answered',
            startMs: 1,
            durationMs: 5,
            choice: {
              by: 'prefix-next',
              ringOwner: 'r1',
              bound: 3,
              candidates: [
                { replica: 'r1', load: 5, sampled: true, expectedHit: 0.8 },
                { replica: 'r2', load: 1 },
              ],
            },
          },
        ],
      }),
    );
    expect(t.find((e) => e.kind === 'chosen')?.says).toBe(
      "attempt 1: replica r2 of big; won as the next on the ring within the load bound: the prefix's owner was over it (bound 3, ring owner r1); candidates: r1 load 5 (engine sample, expected prefix hit 80%), r2* load 1 (in flight here)",
    );
  });

  it('says a fallback served while cold, without a hold', () => {
    const t = timelineOf(
      record({
        cold: { model: 'big', startMs: 1, heldMs: 0, end: 'served_by_fallback' },
        attempts: [{ model: 'small', replica: 's1', outcome: 'answered', startMs: 1, durationMs: 3 }],
      }),
    );
    expect(t.map((e) => e.kind)).toEqual(['arrived', 'cold_skipped', 'fallback', 'chosen', 'answered', 'done']);
    expect(t[2]!.says).toBe('falls back to model small: model big had no ready replica');
  });

  it('tells a hold that gave up and the refusal that followed', () => {
    const t = timelineOf(
      record({
        status: 503,
        cold: { model: 'big', startMs: 1, heldMs: 300000, end: 'gave_up' },
        failure: { code: 'LLMGW_NO_REPLICA', message: 'model `big` has 0 ready replicas' },
        durationMs: 300002,
      }),
    );
    expect(t.map((e) => e.kind)).toEqual(['arrived', 'cold_hold', 'cold_gave_up', 'refused', 'done']);
    expect(t.at(-1)!.says).toBe('done: 503 after 300002 ms');
  });

  it('keeps the recorded order for an older record without times', () => {
    // Regression guard: attempts without startMs must not all sort to 0, before the admission.
    const t = timelineOf(
      record({
        admission: { outcome: 'queued', doneMs: 40, queuedMs: 35, limit: 'fair share' },
        attempts: [
          { model: 'big', replica: 'a', outcome: 'failed', reason: 'connection refused', durationMs: 2 },
          { model: 'big', replica: 'b', outcome: 'answered', durationMs: 7 },
        ],
        durationMs: 60,
      }),
    );
    expect(t.map((e) => `${e.kind}${e.attempt ?? ''}`)).toEqual([
      'arrived',
      'queued',
      'chosen1',
      'failed1',
      'chosen2',
      'answered2',
      'done',
    ]);
    expect(t[1]!.says).toBe('admitted after waiting 35 ms in a queue (fair share)');
  });

  it('says the client left, and no refusal it never saw', () => {
    const t = timelineOf(record({ clientGone: true, status: 0, durationMs: 80 }));
    expect(t.at(-1)!.says).toBe('the client went away after 80 ms');
  });
});

describe('views', () => {
  it('adds the choice, times, cold hold, cost and trace id to the record, and the timeline to the detail', () => {
    const v = requestRecordView(heldRetriedFellBack);
    expect(v.attempts[1]).toMatchObject({
      start_ms: 4064,
      backoff_ms: 50,
      choice: {
        by: 'least-load',
        candidates: [
          { replica: 'small-r1', load: 2.5, sampled: true },
          { replica: 'small-r2', load: 0 },
        ],
      },
    });
    expect(v).toMatchObject({
      admission: { outcome: 'admitted', done_ms: 2 },
      cold: { model: 'big', start_ms: 3, held_ms: 4000, end: 'ready', replica: 'big-r1' },
      cost: 0.00042,
      trace_id: '4bf92f3577b34da6a3ce929d0e0e4736',
      fallback: 'small',
    });
    expect(v, 'the list stays without the timeline').not.toHaveProperty('timeline');
    expect(requestDetailView(heldRetriedFellBack).timeline).toHaveLength(14);
  });

  it('leaves the new fields out of a record that has none (the view of before)', () => {
    const v = requestRecordView(
      record({ attempts: [{ model: 'big', replica: 'r', outcome: 'answered', durationMs: 1 }] }),
    );
    for (const k of ['admission', 'cold', 'cost', 'rule', 'trace_id']) expect(v).not.toHaveProperty(k);
    expect(Object.keys(v.attempts[0]!)).toEqual(['model', 'replica', 'outcome', 'duration_ms']);
  });
});
