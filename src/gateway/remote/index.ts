// Remote replicas and spill-over in the gateway: the circuits and Retry-After
// waits of remote endpoints and peer fleets (circuit.ts), the guard around
// their attempts (guard.ts), the translation for remotes that speak another
// API than chat (foreign.ts), and the spill-over decision for models that
// name a remote to overflow to (spill.ts). One object, RemoteRouting, is what the
// router and the attempt loop hold of it. Apart from core/ because local
// engines need none of it: a fleet with no remote pays one property read per
// replica choice.
import type { Dispatcher } from 'undici';
import type { Interceptor } from '../core/dispatch.js';
import type { Outcome, RelayTarget } from '../core/relay.js';
import type { RemotePolicy } from '../core/remote-policy.js';
import { loadViewOf } from '../core/pick.js';
import type { ReplicaDirectory, RoutedModel, RoutedModels, RouterReplica } from '../ports/index.js';
import { CIRCUIT_DEFAULTS, RemoteCircuits, type CircuitOptions } from './circuit.js';
import { circuitOutcomes, guardRemote } from './guard.js';
import { decideSpill, SpillStats, type SpillDecision } from './spill.js';
import { foreignApis } from './foreign.js';

export { guardRemote } from './guard.js';
export { RemoteCircuits, retryAfterMs, CIRCUIT_DEFAULTS } from './circuit.js';
export { decideSpill, predictedWaitMs, SpillStats, type SpillDecision, type SpillInput } from './spill.js';

export interface RemoteRoutingOptions extends Partial<Omit<CircuitOptions, 'now'>> {
  readonly now: () => number;
  /** How old an engine's load sample may be and still be read, ms (the router's loadStaleMs). */
  readonly loadStaleMs: number;
  /** Start times of the router's attempts in flight at a replica (the chooser keeps them): the sends a load sample has not seen. */
  readonly sendsOf: (replicaId: string) => readonly number[];
}

/** Where a request goes under its model's spill-over policy; null = the model has none (or it is inert). */
export interface SpillRoute {
  /** The spill target, when the decision is to go there first. */
  readonly to: RoutedModel | null;
  readonly decision: SpillDecision;
}

export class RemoteRouting implements RemotePolicy {
  readonly circuits: RemoteCircuits;
  readonly stats: SpillStats;
  /** The directory directory() wraps: its ready() still lists the remotes waiting out a Retry-After. */
  private inner: ReplicaDirectory | null = null;

  constructor(private readonly options: RemoteRoutingOptions) {
    this.circuits = new RemoteCircuits({ ...CIRCUIT_DEFAULTS, ...options });
    this.stats = new SpillStats(options.now);
  }

  /**
   * `inner` with the remote replicas that may not be chosen now (circuit
   * open, a Retry-After running) left out of ready(): every part of the
   * router that asks for candidates then skips them, the cold hold included.
   */
  directory(inner: ReplicaDirectory): ReplicaDirectory {
    const circuits = this.circuits;
    this.inner = inner;
    const out: ReplicaDirectory = {
      ready(model) {
        const all = inner.ready(model);
        let skip = false;
        for (const r of all) if (r.remote && !circuits.available(r.id)) skip = true;
        return skip ? all.filter((r) => !r.remote || circuits.available(r.id)) : all;
      },
      describe: (model) => inner.describe(model),
      demand: (model) => inner.demand(model),
    };
    if (inner.subscribe) out.subscribe = (listener) => inner.subscribe!(listener);
    return out;
  }

  /** Around every attempt: a foreign API's translation, the circuits' outcomes, and the service time spill-over reads. */
  interceptors(): Interceptor[] {
    // A request a foreign API cannot express is turned away before the circuit sees an attempt: it says nothing of the remote's health.
    return [foreignApis(this.options.now), circuitOutcomes(this.circuits), this.stats.interceptor()];
  }

  /**
   * Where a request for `model` goes under its spill policy: its spill
   * target first (to), or its own replicas (to null). `candidates` reads a
   * model's replicas that may be chosen now. Null when the model has no
   * policy, or its target is not in the catalog.
   */
  spill(
    model: RoutedModel,
    catalog: Pick<RoutedModels, 'resolve'>,
    candidates: (m: RoutedModel) => readonly RouterReplica[],
  ): SpillRoute | null {
    const policy = model.spill;
    if (!policy) return null;
    const target = catalog.resolve(policy.to);
    if (!target || target === model) return null;
    const now = this.options.now();
    const locals = candidates(model)
      .filter((r) => !r.remote)
      .map((r) => {
        const view = loadViewOf(r.load, this.options.sendsOf(r.id), now, this.options.loadStaleMs);
        return { id: r.id, view, capacity: this.stats.capacityOf(r.id, view) };
      });
    const remotes = candidates(target);
    const decision = decideSpill({
      policy,
      locals,
      serviceMs: this.stats.serviceMs(model.name),
      remoteAvailable: remotes.length > 0,
      remoteQueued: shortestQueue(remotes),
    });
    return { to: decision.go === 'remote' ? target : null, decision };
  }

  guard(
    inner: Dispatcher.DispatchHandler,
    replica: RouterReplica,
    target: RelayTarget,
    resolve: (o: Outcome) => void,
  ): Dispatcher.DispatchHandler {
    return guardRemote(inner, replica, this.circuits, target, resolve);
  }

  /** Seconds until one of `models`' remote replicas is out of its Retry-After; null = none is waiting one out. */
  retryAfterS(models: readonly RoutedModel[]): number | null {
    if (!this.inner) return null;
    const ids: string[] = [];
    for (const m of models) for (const r of this.inner.ready(m.name)) if (r.remote) ids.push(r.id);
    return ids.length ? this.circuits.retryAfterS(ids) : null;
  }
}

/**
 * The fewest requests any of `replicas` reports waiting: a peer's queue as of
 * its last probe, read however old (it is refreshed by the probe, and a peer
 * that stopped answering is out of routing). 0 when one reports none.
 */
function shortestQueue(replicas: readonly RouterReplica[]): number {
  let least = Infinity;
  for (const r of replicas) least = Math.min(least, r.load?.waiting ?? 0);
  return least === Infinity ? 0 : least;
}
