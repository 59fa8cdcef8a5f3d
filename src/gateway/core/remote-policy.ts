// What the attempt loop asks of remote routing: where a model's spill-over
// policy sends a request, how long the remotes that refused ask to be left
// alone, and the guard around an attempt at a remote replica. An interface
// here, implemented by src/gateway/remote (RemoteRouting), so that the core
// does not import the part that builds on it.
import type { Dispatcher } from 'undici';
import type { RoutedModel, RoutedModels, RouterReplica } from '../ports/index.js';
import type { Outcome, RelayTarget } from './relay.js';

/** Where a request goes under its model's spill policy. */
export interface SpillChoice {
  /** The spill target to try first; null = the model's own replicas. */
  readonly to: RoutedModel | null;
  /** For the request log: the rule that decided, with the numbers it compared. */
  readonly decision: { readonly rule: string };
}

export interface RemotePolicy {
  /** Null when the model has no spill policy (or its target is not routed). */
  spill(
    model: RoutedModel,
    catalog: Pick<RoutedModels, 'resolve'>,
    candidates: (m: RoutedModel) => readonly RouterReplica[],
  ): SpillChoice | null;
  /** Seconds until one of `models`' remote replicas is out of its Retry-After; null = none is waiting one out. */
  retryAfterS(models: readonly RoutedModel[]): number | null;
  /** The dialect's relay for an attempt, behind the remote guard when `replica` is remote. */
  guard(
    inner: Dispatcher.DispatchHandler,
    replica: RouterReplica,
    target: RelayTarget,
    resolve: (o: Outcome) => void,
  ): Dispatcher.DispatchHandler;
}
