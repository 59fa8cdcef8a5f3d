// Spill-over: whether a request for a model with a `spill` policy goes to its
// own (local) replicas or to the model named in `spill.to` (a remote endpoint
// or a peer fleet). Local first; remote when no local replica is ready
// (`cold`, and `saturated`), or when every local replica's predicted queue
// wait is over the policy's bound (`saturated`). The wait is predicted from
// what the chooser already reads: the engines' running and waiting counts
// (corrected by this router's sends since the sample), each replica's
// capacity as learnt from a sample that showed a queue, and how long the
// model's local attempts have lately taken. A peer fleet that reports a queue
// of its own is not spilled to for saturation (only while none is ready
// here). The decision is a pure function
// (decideSpill), table-tested; SpillStats keeps the little it learns.
import type { Interceptor } from '../core/dispatch.js';
import type { LoadView } from '../core/pick.js';
import type { SpillPolicy } from '../ports/index.js';

/** What the decision knows of one ready local replica. */
export interface LocalReplicaView {
  readonly id: string;
  readonly view: LoadView;
  /** Requests it generates at once, learnt from a sample with a queue; null = not learnt (no queue seen yet). */
  readonly capacity: number | null;
}

export interface SpillInput {
  readonly policy: SpillPolicy;
  /** Ready local replicas taking new requests. */
  readonly locals: readonly LocalReplicaView[];
  /** The model's recent local attempt duration, ms (an average); null = none finished lately. */
  readonly serviceMs: number | null;
  /** The spill target has a replica that may be chosen now (presented, circuit not open, no Retry-After running). */
  readonly remoteAvailable: boolean;
  /**
   * The shortest queue the spill target's replicas report: a peer fleet's
   * waiting requests, read from its capacity at the last probe. 0 or
   * absent = no queue, or none reported (an endpoint that is not a peer).
   */
  readonly remoteQueued?: number;
}

export interface SpillDecision {
  readonly go: 'local' | 'remote';
  /** For the request log: which rule sent it there, with the numbers it compared. */
  readonly rule: string;
  /** The best local replica's predicted wait, ms; null = no local replica was ready; Infinity = a queue of unknown speed. */
  readonly predictedWaitMs: number | null;
}

/**
 * How long a request sent to this replica now is expected to wait before
 * the engine starts on it, ms. Zero while the replica has a free sequence;
 * otherwise its place in the engine's queue over its capacity, times the
 * model's service time. A queue with no service time known yet is
 * Infinity (it cannot be said to be short).
 */
export function predictedWaitMs(r: LocalReplicaView, serviceMs: number | null): number {
  const s = r.view.sample;
  let ahead: number;
  let slots: number;
  if (s) {
    const expected = Math.max(0, s.running + s.waiting - (s.finishedSince ?? 0)) + s.sentSince;
    if (r.capacity !== null) {
      ahead = Math.max(0, expected - r.capacity + 1);
      slots = r.capacity;
    } else {
      // No capacity learnt: only a queue the engine reports is one.
      ahead = s.waiting > 0 ? s.waiting + s.sentSince + 1 : 0;
      slots = Math.max(1, s.running);
    }
  } else if (r.capacity !== null) {
    ahead = Math.max(0, r.view.inFlight - r.capacity + 1);
    slots = r.capacity;
  } else {
    return 0;
  }
  if (ahead === 0) return 0;
  if (serviceMs === null) return Infinity;
  return Math.round((ahead / Math.max(1, slots)) * serviceMs);
}

/** Where one request goes under its model's spill policy. */
export function decideSpill(input: SpillInput): SpillDecision {
  const { policy, locals } = input;
  if (policy.when === 'never') return { go: 'local', rule: 'local (spill: never)', predictedWaitMs: null };
  if (locals.length === 0) {
    if (input.remoteAvailable)
      return { go: 'remote', rule: `spill:cold (no local replica ready) -> ${policy.to}`, predictedWaitMs: null };
    return { go: 'local', rule: `local (no local replica ready; ${policy.to} unavailable)`, predictedWaitMs: null };
  }
  let best = Infinity;
  for (const r of locals) best = Math.min(best, predictedWaitMs(r, input.serviceMs));
  const words = best === Infinity ? 'a queue of unknown speed' : `${best} ms`;
  if (policy.when === 'saturated' && best > policy.maxQueueMs) {
    // A peer whose own fleet queues is no relief: the request would wait there instead, with a hop added.
    if (input.remoteAvailable && (input.remoteQueued ?? 0) > 0)
      return {
        go: 'local',
        rule: `local (predicted wait ${words} > ${policy.maxQueueMs} ms; ${policy.to} queues ${input.remoteQueued} too)`,
        predictedWaitMs: best,
      };
    if (input.remoteAvailable)
      return {
        go: 'remote',
        rule: `spill:saturated (predicted wait ${words} > ${policy.maxQueueMs} ms) -> ${policy.to}`,
        predictedWaitMs: best,
      };
    return {
      go: 'local',
      rule: `local (predicted wait ${words} > ${policy.maxQueueMs} ms; ${policy.to} unavailable)`,
      predictedWaitMs: best,
    };
  }
  return { go: 'local', rule: `local (predicted wait ${words} <= ${policy.maxQueueMs} ms)`, predictedWaitMs: best };
}

/** Weight of the newest attempt in the service-time average: a few dozen attempts make it. */
const SERVICE_EWMA_WEIGHT = 0.1;

/** What spill-over learns as requests run: each local replica's capacity, each model's service time. */
export class SpillStats {
  /** Per replica id: the most running requests a sample showed alongside a queue. */
  private readonly capacities = new Map<string, number>();
  /** Per model: the moving average of its local attempts' durations, ms. */
  private readonly service = new Map<string, number>();

  constructor(private readonly now: () => number) {}

  /** A replica's learnt capacity after reading its `view`: a sample with a queue says how many it runs at once. */
  capacityOf(id: string, view: LoadView): number | null {
    const s = view.sample;
    if (s && s.waiting > 0 && s.running > 0) this.capacities.set(id, Math.max(this.capacities.get(id) ?? 0, s.running));
    return this.capacities.get(id) ?? null;
  }

  serviceMs(model: string): number | null {
    return this.service.get(model) ?? null;
  }

  /**
   * Keeps the duration of each answered local attempt, per model; only of
   * a model with a spill policy, its one reader (a promise per attempt of
   * every other model bought nothing). A model given a policy by a catalog
   * reload learns its service time from its first answered attempt; until
   * then its wait is unknown, and `saturated` spills a replica with a queue.
   */
  interceptor(): Interceptor {
    return (next) => (a) => {
      if (a.replica.remote || !a.model.spill) return next(a);
      const started = this.now();
      return next(a).then((o) => {
        if (o.kind === 'done' && o.status > 0 && o.status < 500) {
          const ms = this.now() - started;
          const old = this.service.get(a.model.name);
          this.service.set(a.model.name, old === undefined ? ms : old + SERVICE_EWMA_WEIGHT * (ms - old));
        }
        return o;
      });
    };
  }

  /** Forgets replicas that are gone. */
  forget(liveIds: ReadonlySet<string>): void {
    for (const id of this.capacities.keys()) if (!liveIds.has(id)) this.capacities.delete(id);
  }
}
