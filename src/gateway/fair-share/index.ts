// Fair share, as the attempt loop meets it: before each attempt at a model
// with a declared capacity, a place among its replicas' in-flight requests,
// waited for in the fair-share queue; after the attempt, the place back. A
// retry queues again like any request, so a failing replica cannot let one
// team's retries jump the others. What the loop gets back is null (go on)
// or the refusal to write, in words that say which limit and what to do.
// A model without `capacity` costs one property read.
import { CapacityGate, gateRequest, type GateOutcome, type Waiter } from './gate.js';
import { requestPriority } from './priority.js';
import type { ApiKeyRecord, ModelCapacity, PriorityClass, ReplicaDirectory, RoutedModel } from '../ports/index.js';
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

/** What the queue needs of a request: its wait (woken when the client leaves) and who sent it. */
export interface FairShareRequest extends Waiter {
  readonly key: ApiKeyRecord | null;
  /** The priority header as the client sent it; absent = none. */
  readonly priorityHeader?: string | string[];
  /** Set once the gate has seen the request: how long it waited in all, for the request log (ms). */
  queuedMs?: number;
}

export interface FairShareOptions {
  readonly now: () => number;
  /** Weight per team (absent = 1): a team of weight 2 gets twice the turns of a team of weight 1 when both wait. */
  readonly teamWeights?: Readonly<Record<string, number>>;
}

/** Whose share a request counts against: its key's team, else the key itself, else everyone without a key. */
export function tenantOf(key: ApiKeyRecord | null): string {
  if (!key) return 'anonymous';
  return key.team !== undefined ? `team:${key.team}` : `key:${key.id}`;
}

export class FairShare {
  /** Models gated at least once, by name: their replicas are counted, and a change in the directory re-pumps them. */
  private readonly models = new Map<string, RoutedModel>();
  readonly gate: CapacityGate;
  private readonly unsubscribe: (() => void) | null;

  /** @param candidates how many replicas of a model take requests now (the chooser's candidates) */
  constructor(
    replicas: ReplicaDirectory,
    private readonly candidates: (model: RoutedModel) => number,
    private readonly options: FairShareOptions,
  ) {
    this.gate = new CapacityGate((name) => {
      const m = this.models.get(name);
      return m ? this.candidates(m) : 0;
    }, options.now);
    // A replica came up (or went): as many waiting requests as now fit go on.
    this.unsubscribe = replicas.subscribe ? replicas.subscribe(() => this.pumpAll()) : null;
  }

  /**
   * Waits for a place at `model` for one attempt. Null: go on (and call
   * leave() after the attempt). A refusal: write it, unless the client is
   * gone or the request timed out or its key was revoked while it waited
   * (the loop checks those first). A priority header that names no class is
   * refused here for every model, gated or not, so a typo shows at once.
   */
  async enter(request: FairShareRequest, model: RoutedModel): Promise<QueueRefusal | null> {
    const priority = requestPriority(request.key?.priority, request.priorityHeader);
    if (!priority.ok) {
      return { status: 400, code: 'LLMGW_BAD_REQUEST', message: priority.message, headers: {} };
    }
    const capacity = model.capacity;
    if (capacity === undefined || capacity.perReplica <= 0) return null;
    this.models.set(model.name, model);
    const tenant = tenantOf(request.key);
    const outcome = await this.gate.enter(
      model.name,
      capacity,
      gateRequest(tenant, priority.cls, this.weightOf(request.key), request),
    );
    request.queuedMs = (request.queuedMs ?? 0) + outcome.queuedMs;
    return outcome.kind === 'admitted' ? null : this.refusal(outcome, model, capacity, tenant, priority.cls);
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

  private weightOf(key: ApiKeyRecord | null): number {
    const team = key?.team;
    return (team !== undefined && this.options.teamWeights?.[team]) || 1;
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
      message: `${full}: this ${cls} request waited ${Math.round(outcome.queuedMs / 1000)} s (capacity.queue_timeout) without a place; the fleet is saturated, retry later or ask for more replicas`,
      headers: { 'retry-after': '5' },
    };
  }
}
