import { describe, expect, it } from 'vitest';
import { FairQueue, MAX_TENANTS, type QueuedRequest } from './queue.js';
import { requestPriority } from './priority.js';

interface R extends QueuedRequest {
  readonly id: string;
}

const r = (id: string, tenant: string, cls: R['cls'] = 'interactive', weight = 1): R => ({ id, tenant, cls, weight });

function drain(q: FairQueue<R>): string[] {
  const out: string[] = [];
  for (let x = q.next(); x; x = q.next()) out.push(x.id);
  return out;
}

describe('the fair-share queue', () => {
  it('serves one tenant in arrival order', () => {
    const q = new FairQueue<R>();
    for (const id of ['a1', 'a2', 'a3']) q.enqueue(r(id, 'A'));
    expect(drain(q)).toEqual(['a1', 'a2', 'a3']);
    expect(q.size).toBe(0);
  });

  it('alternates between two tenants however many one has waiting', () => {
    // Guards against FIFO across tenants: a team that queued 10 first would be served 10 before the other's 1.
    const q = new FairQueue<R>();
    for (let i = 1; i <= 10; i++) q.enqueue(r(`a${i}`, 'A'));
    q.enqueue(r('b1', 'B'));
    q.enqueue(r('b2', 'B'));
    expect(drain(q).slice(0, 5)).toEqual(['a1', 'b1', 'a2', 'b2', 'a3']);
  });

  it("serves a trickling tenant next, after a flooding tenant's long run", () => {
    const q = new FairQueue<R>();
    for (let i = 1; i <= 50; i++) q.enqueue(r(`a${i}`, 'A'));
    // A has been served 20 times alone: its tags are 20 ahead of the clock's start.
    for (let i = 0; i < 20; i++) q.next();
    q.enqueue(r('b1', 'B'));
    q.enqueue(r('b2', 'B'));
    expect(q.next()!.id).toBe('b1');
    expect(q.next()!.id).toBe('a21');
    expect(q.next()!.id, 'then turn about, not B making up for lost time').toBe('b2');
  });

  it('counts requests served without waiting as turns', () => {
    // Guards against a team that filled the fleet being served first again once it queues: its turns before the
    // queue formed count.
    const q = new FairQueue<R>();
    q.charge(r('a1', 'A'));
    q.charge(r('a2', 'A'));
    q.enqueue(r('a3', 'A'));
    q.enqueue(r('b1', 'B'));
    expect(drain(q)).toEqual(['b1', 'a3']);
  });

  it('gives a tenant of weight 2 twice the turns of one of weight 1', () => {
    const q = new FairQueue<R>();
    for (let i = 1; i <= 30; i++) q.enqueue(r(`a${i}`, 'A', 'interactive', 2));
    for (let i = 1; i <= 30; i++) q.enqueue(r(`b${i}`, 'B', 'interactive', 1));
    const first30 = drain(q).slice(0, 30);
    expect(first30.filter((id) => id.startsWith('a'))).toHaveLength(20);
  });

  it('serves every waiting interactive request before any batch one', () => {
    const q = new FairQueue<R>();
    q.enqueue(r('batch1', 'A', 'batch'));
    q.enqueue(r('i1', 'B'));
    q.enqueue(r('batch2', 'B', 'batch'));
    q.enqueue(r('i2', 'A'));
    expect(drain(q)).toEqual(['i1', 'i2', 'batch1', 'batch2']);
  });

  it('takes a request out before its turn and counts waiting per tenant', () => {
    const q = new FairQueue<R>();
    const a2 = r('a2', 'A');
    q.enqueue(r('a1', 'A'));
    q.enqueue(a2);
    q.enqueue(r('a3', 'A', 'batch'));
    expect(q.waitingFor('A')).toBe(3);
    expect(q.remove(a2)).toBe(true);
    expect(q.remove(a2), 'a second removal finds nothing').toBe(false);
    expect(q.waitingFor('A')).toBe(2);
    expect(drain(q)).toEqual(['a1', 'a3']);
  });

  it('forgets tenants that went quiet, so a key per request cannot grow it without bound', () => {
    const q = new FairQueue<R>();
    for (let i = 0; i < 10_000; i++) {
      q.enqueue(r(`x${i}`, `tenant-${i}`));
      q.next();
    }
    q.enqueue(r('last', 'someone'));
    expect(q.next()!.id).toBe('last');
    // Reach into the class map: the test is about memory, which no public method shows.
    const classes = (q as unknown as { classes: Map<string, { tenants: Map<string, unknown> }> }).classes;
    expect(classes.get('interactive')!.tenants.size).toBeLessThanOrEqual(MAX_TENANTS);
  });
});

describe('a request’s priority class', () => {
  it.each([
    [undefined, undefined, 'interactive'],
    [undefined, 'batch', 'batch'],
    ['batch', 'interactive', 'batch'],
    ['batch', undefined, 'batch'],
    ['interactive', ' Batch ', 'batch'],
    ['interactive', '', 'interactive'],
  ] as const)('key %s with header %s is %s', (key, header, want) => {
    expect(requestPriority(key, header)).toEqual({ ok: true, cls: want });
  });

  it('refuses a header that names no class, saying which exist', () => {
    const got = requestPriority(undefined, 'urgent');
    expect(got.ok).toBe(false);
    expect(!got.ok && got.message).toMatch(/x-llmgw-priority must be one of interactive, batch; got "urgent"/);
  });
});
