import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { CapacityGate, gateRequest, type GateOutcome, type Waiter } from './gate.js';
import type { ModelCapacity } from '../ports/index.js';

const CAP: ModelCapacity = { perReplica: 2, queueTimeoutMs: 10_000, queuePerTenant: 3 };

function waiter(): Waiter & { clientGone: boolean } {
  return { clientGone: false, timedOut: false, revoked: false, wake: null };
}

describe('the capacity gate', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  let replicas = 1;
  const gate = () =>
    new CapacityGate(
      () => replicas,
      () => Date.now(),
    );

  it('never gates a model without a declared capacity', async () => {
    replicas = 1;
    const g = gate();
    const none: ModelCapacity = { perReplica: 0, queueTimeoutMs: 0, queuePerTenant: 0 };
    for (let i = 0; i < 100; i++) {
      expect((await g.enter('m', none, gateRequest('A', 'interactive', 1, waiter()))).kind).toBe('admitted');
    }
    expect(g.active('m')).toBe(0);
  });

  it('counts the waiting by class, which is what pauses batches (src/control/batches/pace.ts)', async () => {
    // A batch line waiting must not read as an interactive request waiting, or batches would pause themselves.
    replicas = 1;
    const g = gate();
    await g.enter('m', CAP, gateRequest('A', 'interactive', 1, waiter()));
    await g.enter('m', CAP, gateRequest('A', 'batch', 1, waiter()));
    const queued = [
      g.enter('m', CAP, gateRequest('A', 'batch', 1, waiter())),
      g.enter('m', CAP, gateRequest('B', 'batch', 1, waiter())),
      g.enter('m', CAP, gateRequest('B', 'interactive', 1, waiter())),
    ];
    await Promise.resolve();
    expect(g.waiting('m')).toBe(3);
    expect(g.waiting('m', 'interactive')).toBe(1);
    expect(g.waiting('m', 'batch')).toBe(2);
    expect(g.waiting('other', 'interactive')).toBe(0);
    g.release('m', CAP);
    await vi.advanceTimersByTimeAsync(0);
    expect(g.waiting('m', 'interactive'), 'the interactive request went first').toBe(0);
    for (let i = 0; i < 4; i++) g.release('m', CAP);
    await Promise.all(queued);
  });

  it('admits up to replicas × per_replica, queues the rest and hands a freed place to the next in fair order', async () => {
    replicas = 1;
    const g = gate();
    const order: string[] = [];
    const go = (tenant: string, id: string) =>
      g.enter('m', CAP, gateRequest(tenant, 'interactive', 1, waiter())).then((o) => {
        order.push(`${id}:${o.kind}`);
        return o;
      });
    await go('A', 'a1');
    await go('A', 'a2');
    const waiting = [go('A', 'a3'), go('A', 'a4'), go('B', 'b1')];
    await Promise.resolve();
    expect(g.active('m')).toBe(2);
    expect(g.waiting('m')).toBe(3);
    g.release('m', CAP);
    g.release('m', CAP);
    await vi.advanceTimersByTimeAsync(0);
    // A was served twice before B asked: B's first request goes before A's third.
    expect(order).toEqual(['a1:admitted', 'a2:admitted', 'b1:admitted', 'a3:admitted']);
    g.release('m', CAP);
    await Promise.all(waiting);
    expect(order.at(-1)).toBe('a4:admitted');
  });

  it('opens places when a replica comes up', async () => {
    replicas = 1;
    const g = gate();
    await g.enter('m', CAP, gateRequest('A', 'interactive', 1, waiter()));
    await g.enter('m', CAP, gateRequest('A', 'interactive', 1, waiter()));
    const third = g.enter('m', CAP, gateRequest('A', 'interactive', 1, waiter()));
    replicas = 2;
    g.pump('m', CAP);
    expect((await third).kind).toBe('admitted');
    expect(g.active('m')).toBe(3);
  });

  it("refuses at once past a tenant's share of the queue, leaving other tenants their place", async () => {
    replicas = 1;
    const g = gate();
    for (let i = 0; i < 2; i++) await g.enter('m', CAP, gateRequest('A', 'interactive', 1, waiter()));
    const queued: Promise<GateOutcome>[] = [];
    for (let i = 0; i < 3; i++) queued.push(g.enter('m', CAP, gateRequest('A', 'interactive', 1, waiter())));
    expect((await g.enter('m', CAP, gateRequest('A', 'interactive', 1, waiter()))).kind).toBe('full');
    const b = g.enter('m', CAP, gateRequest('B', 'interactive', 1, waiter()));
    expect(g.waiting('m')).toBe(4);
    g.release('m', CAP);
    expect((await b).kind).toBe('admitted');
    void queued;
  });

  it('gives up after queue_timeout and takes the request out of the queue', async () => {
    replicas = 1;
    const g = gate();
    for (let i = 0; i < 2; i++) await g.enter('m', CAP, gateRequest('A', 'interactive', 1, waiter()));
    const late = g.enter('m', CAP, gateRequest('A', 'interactive', 1, waiter()));
    await vi.advanceTimersByTimeAsync(CAP.queueTimeoutMs);
    expect(await late).toEqual({ kind: 'timeout', queuedMs: CAP.queueTimeoutMs });
    expect(g.waiting('m')).toBe(0);
    g.release('m', CAP);
    expect(g.active('m'), 'the timed-out request was never admitted, so it holds no place').toBe(1);
  });

  it('lets a client that left go at once, holding no place', async () => {
    replicas = 1;
    const g = gate();
    for (let i = 0; i < 2; i++) await g.enter('m', CAP, gateRequest('A', 'interactive', 1, waiter()));
    const w = waiter();
    const leaving = g.enter('m', CAP, gateRequest('A', 'interactive', 1, w));
    w.clientGone = true;
    w.wake!();
    expect((await leaving).kind).toBe('gone');
    expect(g.waiting('m')).toBe(0);
    g.release('m', CAP);
    g.release('m', CAP);
    expect(g.active('m')).toBe(0);
  });
});
