// The capacity gate: a model whose every ready replica already serves as many
// requests as it declares it can (`capacity.per_replica`) makes the next
// request wait here, in the fair-share queue, instead of piling onto engines
// whose own queues know nothing of teams or priorities. A place freed by a
// finished request goes to whoever the queue says is next; a replica coming
// up opens places for several. Waiting is bounded twice: per tenant (a flood
// from one team fills its own share and is refused, not everyone's) and in
// time (queue_timeout), each refused with a status and a Retry-After.
// A model without a declared capacity is never gated: requests go straight
// on, as before this existed. Separate from the attempt loop, which asks it
// once per request, and from the queue, which only orders.
import { FairQueue, type QueuedRequest } from './queue.js';
import type { ModelCapacity, PriorityClass } from '../ports/index.js';

/** What a wait reads and sets of the request it serves (the exchange has these; the cold hold's waits use them too). */
export interface Waiter {
  readonly clientGone: boolean;
  readonly timedOut: boolean;
  readonly revoked: boolean;
  /** Wakes the wait in progress early; null when none is. */
  wake: (() => void) | null;
}

/** What the gate learns of one request. */
export interface GateRequest extends QueuedRequest {
  readonly waiter: Waiter;
}

/** How a request left the gate. */
export type GateOutcome =
  | { readonly kind: 'admitted'; readonly queuedMs: number }
  /** Refused: the tenant's share of the queue is full, or it waited past the timeout. */
  | { readonly kind: 'full' | 'timeout'; readonly queuedMs: number }
  /** The client left, the total timeout fired or the key was revoked while it waited. */
  | { readonly kind: 'gone'; readonly queuedMs: number };

interface Entry extends GateRequest {
  grant: (() => void) | null;
}

interface ModelGate {
  /** Requests admitted and not yet released. */
  active: number;
  readonly queue: FairQueue<Entry>;
}

export class CapacityGate {
  private readonly models = new Map<string, ModelGate>();

  /**
   * @param replicasOf how many replicas of the model take requests now (the chooser's candidates)
   * @param now the clock queue times are read from (ms)
   */
  constructor(
    private readonly replicasOf: (model: string) => number,
    private readonly now: () => number,
  ) {}

  /** Requests waiting for `model`, of one class or (absent) every class; 0 for a model never gated. */
  waiting(model: string, cls?: PriorityClass): number {
    const queue = this.models.get(model)?.queue;
    if (!queue) return 0;
    return cls === undefined ? queue.size : queue.waitingIn(cls);
  }

  /** Requests admitted through the gate and not released, for `model`. */
  active(model: string): number {
    return this.models.get(model)?.active ?? 0;
  }

  /**
   * Waits for a place for the request. Admitted at once while the model has
   * room and nobody waits (nobody jumps the queue); an `admitted` outcome
   * must be paired with exactly one release(). A model with perReplica 0 is
   * admitted at once and not counted.
   */
  async enter(model: string, capacity: ModelCapacity, request: GateRequest): Promise<GateOutcome> {
    if (capacity.perReplica <= 0) return { kind: 'admitted', queuedMs: 0 };
    const gate = this.gateOf(model);
    if (gate.queue.size === 0 && gate.active < this.limit(model, capacity)) {
      gate.active++;
      gate.queue.charge(request);
      return { kind: 'admitted', queuedMs: 0 };
    }
    if (gate.queue.waitingFor(request.tenant) >= capacity.queuePerTenant) return { kind: 'full', queuedMs: 0 };
    const from = this.now();
    const entry: Entry = { ...request, grant: null };
    const granted = await new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => finish(false), capacity.queueTimeoutMs);
      const finish = (ok: boolean) => {
        clearTimeout(timer);
        entry.grant = null;
        request.waiter.wake = null;
        resolve(ok);
      };
      entry.grant = () => finish(true);
      // The exchange wakes its wait when the client leaves, the total timeout fires or the key is revoked.
      request.waiter.wake = () => {
        gate.queue.remove(entry);
        finish(false);
      };
      gate.queue.enqueue(entry);
    });
    const queuedMs = this.now() - from;
    if (granted) return { kind: 'admitted', queuedMs };
    // A timeout leaves the entry queued (a wake has removed it already).
    gate.queue.remove(entry);
    const w = request.waiter;
    return { kind: w.clientGone || w.timedOut || w.revoked ? 'gone' : 'timeout', queuedMs };
  }

  /** A request admitted by enter() is done: its place goes to whoever waits next. */
  release(model: string, capacity: ModelCapacity): void {
    if (capacity.perReplica <= 0) return;
    const gate = this.models.get(model);
    if (!gate) return;
    gate.active--;
    this.pump(model, capacity);
  }

  /** The model's replicas changed (one came up): as many waiting requests go on as there is room for. */
  pump(model: string, capacity: ModelCapacity): void {
    const gate = this.models.get(model);
    if (!gate) return;
    const limit = this.limit(model, capacity);
    while (gate.active < limit) {
      const next = gate.queue.next();
      if (!next) break;
      gate.active++;
      next.grant?.();
    }
    if (gate.active === 0 && gate.queue.size === 0) this.models.delete(model);
  }

  private limit(model: string, capacity: ModelCapacity): number {
    return this.replicasOf(model) * capacity.perReplica;
  }

  private gateOf(model: string): ModelGate {
    let gate = this.models.get(model);
    if (!gate) {
      gate = { active: 0, queue: new FairQueue<Entry>() };
      this.models.set(model, gate);
    }
    return gate;
  }
}

/** A request's place in the queue: its tenant, class and weight. */
export function gateRequest(tenant: string, cls: PriorityClass, weight: number, waiter: Waiter): GateRequest {
  return { tenant, cls, weight: weight > 0 ? weight : 1, waiter };
}
