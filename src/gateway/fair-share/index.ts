// Fair share, as the attempt loop meets it: before each attempt at a model
// with a declared capacity, a place among its replicas' in-flight requests,
// waited for in the fair-share queue; after the attempt, the place back. A
// retry queues again like any request, so a failing replica cannot let one
// team's retries jump the others. What the loop gets back is null (go on)
// or the refusal to write, in words that say which limit and what to do.
// A model without `capacity` costs one property read.
import { CapacityGate, gateRequest, type GateOutcome, type Waiter } from './gate.js';
import { PRIORITY_HEADER, requestPriority } from './priority.js';
import type { ApiKeyRecord, ModelCapacity, PriorityClass, ReplicaDirectory, RoutedModel } from '../ports/index.js';
import { Gauge, type Registry } from 'prom-client';
import type { ErrorCode } from '../../errors/index.js';

export { CapacityGate, type GateOutcome } from './gate.js';
export { FairQueue, MAX_TENANTS } from './queue.js';
export { PRIORITY_HEADER, requestPriority } from './priority.js';

/** A refusal for the loop to write in the client's dialect. */
export interface QueueRefusal {
  readonly status: number;
  readonly code: ErrorCode;
  readonly message: string;
  readonly headers: Record<string, string>;
}

/** What the queue needs of a request: its wait (woken when the client leaves, it times out or its key is revoked) and its key. */
export interface FairShareRequest extends Waiter {
  readonly key: ApiKeyRecord | null;
}

/** Go on (after waiting `queuedMs` for a place; call leave() after the attempt), or stop: write the refusal, or nothing when null (the request ended while it waited). */
export type Placed =
  { readonly ok: true; readonly queuedMs: number } | { readonly ok: false; readonly refusal: QueueRefusal | null };

/** Whose share a request counts against: its key's team, else the key itself, else everyone without a key. */
export function tenantOf(key: ApiKeyRecord | null): string {
  if (!key) return 'anonymous';
  return key.team !== undefined ? `team:${key.team}` : `key:${key.id}`;
}

const NOT_GATED: Placed = Object.freeze({ ok: true, queuedMs: 0 });

export class FairShare {
  /** Models gated at least once, by name: their replicas are counted, and a change in the directory re-pumps them. */
  private readonly models = new Map<string, RoutedModel>();
  readonly gate: CapacityGate;
  private readonly unsubscribe: (() => void) | null;

  /**
   * @param candidates how many replicas of a model take requests now (the chooser's candidates)
   * @param registry where the queue's gauge is registered; absent = none (tests of the queue alone)
   */
  constructor(
    replicas: ReplicaDirectory,
    private readonly candidates: (model: RoutedModel) => number,
    now: () => number,
    registry?: Registry,
  ) {
    this.gate = new CapacityGate((name) => {
      const m = this.models.get(name);
      return m ? this.candidates(m) : 0;
    }, now);
    const models = this.models;
    const gate = this.gate;
    if (registry) {
      new Gauge({
        name: 'llmgw_router_queued_requests',
        help: 'Requests waiting in a fair-share queue for a place at a model whose replicas are all at capacity, by model.',
        labelNames: ['model'],
        registers: [registry],
        collect() {
          this.reset();
          for (const name of models.keys()) this.set({ model: name }, gate.waiting(name));
        },
      });
    }
    // A replica came up (or went): as many waiting requests as now fit go on.
    this.unsubscribe = replicas.subscribe ? replicas.subscribe(() => this.pumpAll()) : null;
  }

  /**
   * Waits for a place at `model` for one attempt. A priority header that
   * names no class is refused here for every model, gated or not, so a typo
   * shows at once rather than the day the fleet fills up. Answered at
   * once (no promise) where there is nothing to wait for: a model with no
   * declared capacity, which is every attempt of most fleets, then costs the
   * attempt loop no turn of the microtask queue.
   */
  enter(
    request: FairShareRequest,
    model: RoutedModel,
    headers: Readonly<Record<string, string | string[] | undefined>> | undefined,
  ): Placed | Promise<Placed> {
    const priority = requestPriority(request.key?.priority, headers?.[PRIORITY_HEADER]);
    if (!priority.ok) {
      return { ok: false, refusal: { status: 400, code: 'LLMGW_BAD_REQUEST', message: priority.message, headers: {} } };
    }
    const capacity = model.capacity;
    if (capacity === undefined || capacity.perReplica <= 0) return NOT_GATED;
    return this.queue(request, model, capacity, priority.cls);
  }

  private async queue(
    request: FairShareRequest,
    model: RoutedModel,
    capacity: ModelCapacity,
    cls: PriorityClass,
  ): Promise<Placed> {
    this.models.set(model.name, model);
    const tenant = tenantOf(request.key);
    const outcome = await this.gate.enter(
      model.name,
      capacity,
      // The team's weight (`ctl teams set --weight`); a key without one, or outside any team, weighs 1.
      gateRequest(tenant, cls, request.key?.teamWeight ?? 1, request),
    );
    if (outcome.kind === 'admitted') return { ok: true, queuedMs: outcome.queuedMs };
    if (outcome.kind === 'gone') return { ok: false, refusal: null };
    return { ok: false, refusal: this.refusal(outcome, model, capacity, tenant, cls) };
  }

  /** The attempt that entered `model` is over. */
  leave(model: RoutedModel): void {
    if (model.capacity !== undefined && model.capacity.perReplica > 0) this.gate.release(model.name, model.capacity);
  }

  close(): void {
    this.unsubscribe?.();
  }

  private pumpAll(): void {
    for (const m of this.models.values()) if (m.capacity) this.gate.pump(m.name, m.capacity);
  }

  private refusal(
    outcome: GateOutcome,
    model: RoutedModel,
    capacity: ModelCapacity,
    tenant: string,
    cls: PriorityClass,
  ): QueueRefusal {
    const replicas = this.candidates(model);
    const full = `model \`${model.name}\` is at capacity (${replicas} replica${replicas === 1 ? '' : 's'} × capacity.per_replica ${capacity.perReplica})`;
    if (outcome.kind === 'full') {
      return {
        status: 429,
        code: 'LLMGW_QUEUE_FULL',
        message: `${full} and ${tenant.replace(':', ' ')} already has ${capacity.queuePerTenant} requests waiting for it (capacity.queue_per_team); retry when some have been answered`,
        headers: { 'retry-after': '1' },
      };
    }
    return {
      status: 503,
      code: 'LLMGW_QUEUE_TIMEOUT',
      message: `${full}: this ${cls} request waited ${waited(outcome.queuedMs)} (capacity.queue_timeout) without a place; the fleet is saturated, retry later or ask for more replicas`,
      headers: { 'retry-after': '5' },
    };
  }
}

function waited(ms: number): string {
  return ms < 10_000 ? `${Math.round(ms)} ms` : `${Math.round(ms / 1000)} s`;
}
