// The fair-share queue: in what order a saturated model's waiting requests
// get the next free place. Classes strictly (every interactive request
// before any batch one); within a class, start-time fair queueing across
// tenants (teams): each tenant's next request is tagged with the virtual time
// it may start at, max(the class's clock, the tenant's last finish), and the
// smallest tag goes first. A tenant that sends ten times its share only
// moves its own tags ahead; one that sends a trickle finds its tag at the
// clock and is served next. Weights scale how fast a tenant's tags advance.
// Pure: no timers, no sockets; the gate (gate.ts) decides when a place is
// free and wakes who this says.
import { PRIORITY_CLASSES, type PriorityClass } from '../ports/index.js';

export interface QueuedRequest {
  /** Who shares are kept for: the key's team (its id when keys have no team). */
  readonly tenant: string;
  readonly cls: PriorityClass;
  /** The tenant's weight: 2 = twice the share of a tenant of weight 1. Must be > 0. */
  readonly weight: number;
}

interface Tenant<R> {
  /** Waiting requests, oldest first, from `head` on (shifted lazily). */
  items: (R | undefined)[];
  head: number;
  /** Virtual time this tenant's last served request finished at. */
  finish: number;
  /** Arrival number of its head, for ties between equal tags: oldest first. */
  seqs: number[];
}

interface ClassQueue<R> {
  clock: number;
  /** Every tenant still remembered: those waiting, and idle ones served ahead of the clock. */
  tenants: Map<string, Tenant<R>>;
  /** The ones with requests waiting: all next() looks at. */
  backlogged: Map<string, Tenant<R>>;
}

export class FairQueue<R extends QueuedRequest> {
  private readonly classes = new Map<PriorityClass, ClassQueue<R>>(
    PRIORITY_CLASSES.map((c) => [c, { clock: 0, tenants: new Map(), backlogged: new Map() }]),
  );
  private count = 0;
  private arrivals = 0;

  /** Requests waiting, every class and tenant. */
  get size(): number {
    return this.count;
  }

  /** Requests `tenant` has waiting in every class. */
  waitingFor(tenant: string): number {
    let n = 0;
    for (const q of this.classes.values()) {
      const t = q.tenants.get(tenant);
      if (t) n += t.items.length - t.head;
    }
    return n;
  }

  /** Requests waiting in one class, every tenant. */
  waitingIn(cls: PriorityClass): number {
    let n = 0;
    for (const t of this.classes.get(cls)!.backlogged.values()) n += t.items.length - t.head;
    return n;
  }

  enqueue(request: R): void {
    const t = this.tenantOf(request);
    this.classes.get(request.cls)!.backlogged.set(request.tenant, t);
    t.items.push(request);
    t.seqs.push(this.arrivals++);
    this.count++;
  }

  /**
   * Counts a request served without waiting (the model had room and nobody
   * queued) as the tenant's turn: a team that kept the fleet busy until it
   * filled up has used its share by then, and one arriving after it must
   * not be queued behind it as if both started even.
   */
  charge(request: QueuedRequest): void {
    const q = this.classes.get(request.cls)!;
    const t = this.tenantOf(request);
    const start = Math.max(q.clock, t.finish);
    t.finish = start + 1 / request.weight;
    q.clock = start;
    this.tidy(q, request.tenant, t);
  }

  /** Takes a request out before its turn (its client went away, it waited too long); false when it was not waiting. */
  remove(request: R): boolean {
    const q = this.classes.get(request.cls)!;
    const t = q.tenants.get(request.tenant);
    if (!t) return false;
    const at = t.items.indexOf(request, t.head);
    if (at < 0) return false;
    t.items.splice(at, 1);
    t.seqs.splice(at, 1);
    this.count--;
    this.tidy(q, request.tenant, t);
    return true;
  }

  /** The request whose turn it is, taken out of the queue; undefined when none waits. */
  next(): R | undefined {
    for (const cls of PRIORITY_CLASSES) {
      const q = this.classes.get(cls)!;
      let best: Tenant<R> | undefined;
      let bestName = '';
      let bestTag = Infinity;
      let bestSeq = Infinity;
      for (const [name, t] of q.backlogged) {
        const tag = Math.max(q.clock, t.finish);
        const seq = t.seqs[t.head]!;
        if (tag < bestTag || (tag === bestTag && seq < bestSeq)) {
          best = t;
          bestName = name;
          bestTag = tag;
          bestSeq = seq;
        }
      }
      if (!best) continue;
      const request = best.items[best.head]!;
      best.items[best.head] = undefined;
      best.head++;
      best.finish = bestTag + 1 / request.weight;
      q.clock = bestTag;
      this.count--;
      this.tidy(q, bestName, best);
      return request;
    }
    return undefined;
  }

  private tenantOf(request: QueuedRequest): Tenant<R> {
    const q = this.classes.get(request.cls)!;
    let t = q.tenants.get(request.tenant);
    if (!t) {
      if (q.tenants.size >= MAX_TENANTS) this.forgetIdle(q);
      t = { items: [], head: 0, finish: 0, seqs: [] };
      q.tenants.set(request.tenant, t);
    }
    return t;
  }

  /**
   * Compacts a tenant's list once its head has moved far, and forgets an
   * empty tenant whose finish the clock has reached: back after a quiet
   * spell it would start at the clock anyway, so nothing is lost.
   */
  private tidy(q: ClassQueue<R>, name: string, t: Tenant<R>): void {
    if (t.head >= t.items.length) {
      q.backlogged.delete(name);
      t.items.length = 0;
      t.seqs.length = 0;
      t.head = 0;
      if (t.finish <= q.clock) q.tenants.delete(name);
    } else if (t.head > 64 && t.head * 2 > t.items.length) {
      t.items.splice(0, t.head);
      t.seqs.splice(0, t.head);
      t.head = 0;
    }
  }

  /**
   * Past MAX_TENANTS (a key per request, or many teams each served once at
   * the same virtual time), forgets every tenant with nothing waiting. Each
   * loses at most the turns it was ahead of the clock: a small unfairness
   * once in a while instead of a map that grows without bound.
   */
  private forgetIdle(q: ClassQueue<R>): void {
    for (const [name, t] of q.tenants) if (t.head >= t.items.length) q.tenants.delete(name);
  }
}

/** Tenants kept per class before idle ones are forgotten (see forgetIdle). */
export const MAX_TENANTS = 4096;
