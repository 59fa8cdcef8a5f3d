// A request's traffic rules at intake, in one call for the admission hook:
// the model its split draws (split.ts) and whether it is copied to the
// named model's shadow (shadow.ts). Apart so the hook stays about checks.
import type { RoutedModel } from '../ports/index.js';
import { modelServes, type Endpoint } from '../ports/endpoints.js';
import type { SplitDraws } from './draws.js';
import { chooseSplit, sampledForShadow, splitPoint } from './split.js';
import { shadowPlan, type ShadowPlan } from './shadow.js';

export interface RoutedRequest {
  /** The model that serves it: a split's target, or the named model. */
  readonly model: RoutedModel;
  /** The split's rule for the request log; null = none applied. */
  readonly rule: string | null;
  /** Its copy for the named model's shadow; null = not drawn (or no shadow). */
  readonly shadow: ShadowPlan | null;
}

/**
 * `keyId` absent = no key; `user` = the body's user field, anything not a
 * non-empty string = none. `draws` places unkeyed requests on the split
 * evenly (draws.ts); `random` decides the shadow's sample.
 */
export function routeRequest(
  named: RoutedModel,
  endpoint: Endpoint,
  keyId: string | undefined,
  user: unknown,
  catalog: { resolve(nameOrAlias: string): RoutedModel | undefined },
  random: () => number,
  draws: SplitDraws,
): RoutedRequest {
  // Most models have no split: their requests build nothing for it.
  const { model, rule } = named.split
    ? chooseSplit(
        named,
        (n) => catalog.resolve(n),
        splitPoint(named.name, named.splitBy, callerOf(keyId, user), () => draws.next(named.name)),
        (m) => modelServes(m, endpoint),
      )
    : { model: named, rule: null };
  return { model, rule, shadow: sampledForShadow(named, random) ? shadowPlan(named, endpoint) : null };
}

function callerOf(keyId: string | undefined, user: unknown): { keyId?: string; user?: string } {
  return { ...(keyId ? { keyId } : {}), ...(typeof user === 'string' && user ? { user } : {}) };
}
