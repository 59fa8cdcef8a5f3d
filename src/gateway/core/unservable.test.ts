// The tally of attempts turned away because a replica's API cannot express a
// field, as a table. Guards against a request a foreign remote cannot
// express ending as the router's 502 (the client's SDK then retries in vain)
// when it is the request that must change, and against a 400 when a replica
// that could have served it failed for another reason (then it is a 502:
// trying again may work).
import { describe, expect, it } from 'vitest';
import type { Outcome } from './relay.js';
import { tallyUnservable, unservableMessage, unservableRetry, type UnservableTally } from './unservable.js';

const field = unservableRetry('not sent', { param: 'n', message: 'n: no counterpart' });
const other = unservableRetry('not sent', { param: 'stop', message: 'stop: no counterpart' });
const refused: Outcome = { kind: 'retry', reason: 'connection refused' };
const usage: Outcome = { kind: 'usageRefused' };

function tally(outcomes: Outcome[]): UnservableTally | null {
  let t: UnservableTally | null = null;
  for (const o of outcomes) t = tallyUnservable(t, o);
  return t;
}

describe('tallyUnservable', () => {
  it.each([
    ['one turned away', [field], { param: 'n', all: true, last: true }],
    ['two turned away: the first field is named', [field, other], { param: 'n', all: true, last: true }],
    ['turned away, then refused: a 502, not a 400', [field, refused], { param: 'n', all: false, last: false }],
    ['refused, then turned away: no backoff before the next', [refused, field], { param: 'n', all: false, last: true }],
    ['only network failures', [refused, refused], { param: null, all: false, last: false }],
    ['stream_options refused', [usage], { param: null, all: false, last: false }],
  ] as const)('%s', (_what, outcomes, want) => {
    const t = tally([...outcomes])!;
    expect(t.first?.param ?? null, 'the field named').toBe(want.param);
    expect(t.all, 'every failure was the request’s fault').toBe(want.all);
    expect(t.last, 'the latest failure was').toBe(want.last);
  });

  it('keeps the retry outcome a retry: the loop and the circuits read it as before', () => {
    expect(field.kind).toBe('retry');
    expect(field.reason).toBe('not sent');
    expect(field.refusal, 'no 429 or 504 is asked for').toBeUndefined();
  });
});

describe('unservableMessage', () => {
  it('names the model, the field and what to change', () => {
    const m = unservableMessage('alpha', { param: 'stop', message: 'stop: no counterpart' }, 2);
    expect(m).toContain('`alpha`');
    expect(m).toContain('stop: no counterpart');
    expect(m).toContain('each of the 2 replicas tried');
    expect(m).toContain('leave out `stop`');
  });
});
