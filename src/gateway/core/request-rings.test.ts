// Refusals kept apart in the request log. Guards against (#34) a key
// hammering past its rate limit pushing every answered request out of the
// one ring `ctl request ID` and the dashboard read, and against that key's
// refusals pushing out another key's: "why was this request refused" must
// still find a recent refusal by id.
import { describe, expect, it } from 'vitest';
import { RequestLog, type RequestRecord } from './request-log.js';
import { isLimitRefusal, refusalGroup } from './request-rings.js';

function answered(id: string): RequestRecord {
  return {
    id,
    atMs: 0,
    model: 'm',
    endpoint: 'chat',
    stream: false,
    status: 200,
    clientGone: false,
    timedOut: false,
    attempts: [{ model: 'm', replica: 'r1', outcome: 'answered', durationMs: 1 }],
    durationMs: 1,
  };
}

function refused(id: string, key: string, code = 'LLMGW_RATE_LIMITED', limit = 'requests per minute'): RequestRecord {
  return {
    ...answered(id),
    key,
    status: 429,
    attempts: [],
    admission: { outcome: 'limited', doneMs: 0, limit },
    failure: { code, message: `refused by ${limit}` },
  };
}

describe('isLimitRefusal', () => {
  it.each([
    ['an answered request', answered('a'), false],
    ['an admission limit', refused('r', 'k'), true],
    [
      'a full queue, no attempt',
      { ...answered('q'), attempts: [], failure: { code: 'LLMGW_QUEUE_FULL', message: '' } },
      true,
    ],
    [
      'a failure after attempts',
      { ...answered('f'), status: 502, failure: { code: 'LLMGW_UPSTREAM', message: '' } },
      false,
    ],
    [
      'no replica: not a limit',
      { ...answered('n'), attempts: [], failure: { code: 'LLMGW_NO_REPLICA', message: '' } },
      false,
    ],
  ])('%s: %s', (_what, r, want) => {
    expect(isLimitRefusal(r)).toBe(want);
  });

  it('groups by key, code and limit', () => {
    expect(refusalGroup(refused('a', 'k1'))).toBe(refusalGroup(refused('b', 'k1')));
    expect(refusalGroup(refused('a', 'k1'))).not.toBe(refusalGroup(refused('a', 'k2')));
    expect(refusalGroup(refused('a', 'k1'))).not.toBe(refusalGroup(refused('a', 'k1', 'LLMGW_RATE_LIMITED', 'tokens')));
  });
});

describe('the request log under a key hammering its limit', () => {
  it('keeps every answered request, and the newest refusals of that key by id', () => {
    const log = new RequestLog(3, { capacity: 10, perKeyAndReason: 4 });
    for (const id of ['a1', 'a2', 'a3']) log.add(answered(id));
    for (let i = 0; i < 1000; i++) log.add(refused(`r${i}`, 'hammer'));
    for (const id of ['a1', 'a2', 'a3']) expect(log.get(id)?.id, `${id} is still answered by id`).toBe(id);
    expect(log.size, 'the requests taken, refusals apart').toBe(3);
    expect(log.get('r999')?.failure?.message, 'the latest refusal says why').toBe('refused by requests per minute');
    expect(log.get('r996')?.id).toBe('r996');
    expect(log.get('r995'), 'older ones of the same key and reason are forgotten').toBeUndefined();
    expect(log.list({ limit: 50 }).map((r) => r.id)).toEqual(['r999', 'r998', 'r997', 'r996', 'a3', 'a2', 'a1']);
  });

  it("does not let one key's refusals push out another key's", () => {
    const log = new RequestLog(3, { capacity: 10, perKeyAndReason: 4 });
    log.add(refused('quiet', 'calm'));
    for (let i = 0; i < 100; i++) log.add(refused(`r${i}`, 'hammer'));
    expect(log.get('quiet')?.key).toBe('calm');
  });

  it('evicts the oldest refusal of all once many keys fill the refusals ring', () => {
    const log = new RequestLog(3, { capacity: 3, perKeyAndReason: 4 });
    for (const k of ['k1', 'k2', 'k3', 'k4']) log.add(refused(`r-${k}`, k));
    expect(log.get('r-k1'), 'the oldest refusal went').toBeUndefined();
    expect(log.list().map((r) => r.id)).toEqual(['r-k4', 'r-k3', 'r-k2']);
  });

  it('merges both rings newest first, and counts an id across them', () => {
    const log = new RequestLog(5);
    log.add(answered('x'));
    log.add(refused('y', 'k'));
    log.add(answered('z'));
    log.add(refused('x', 'k'));
    expect(log.list().map((r) => `${r.id}:${r.status}`)).toEqual(['x:429', 'z:200', 'y:429', 'x:200']);
    expect(log.countWithId('x')).toBe(2);
    expect(log.get('x')?.status, 'the newer of the two, from the refusals').toBe(429);
    log.add(answered('x'));
    expect(log.get('x')?.status, 'and then the newer answered one').toBe(200);
    expect(log.list({ failed: true }).map((r) => r.id)).toEqual(['x', 'y']);
  });
});
