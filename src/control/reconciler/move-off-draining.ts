// The drain rules of one model (Nomad's computeMigrations):
// make-before-break off draining nodes. A replica there gets a replacement
// placed elsewhere first; when the replacement is ready the old one is marked
// draining (it takes nothing new); when its in-flight requests are done, or
// the drain deadline passes, it is stopped. At most maxParallel replicas of
// one model move at a time, so a drained node does not take a model's whole
// capacity down at once.
import type { PlacementRequest } from '../placement/index.js';
import type { DrainSplit, ModelGroup } from './classify.js';
import type { PendingRequest } from './place-with-cap.js';
import { type CompiledPlanOptions, formatMs, type PlanAction, type PlanModel } from './plan-types.js';

export interface MoveInput {
  readonly model: PlanModel;
  readonly group: ModelGroup;
  readonly split: DrainSplit;
  readonly drainingNodes: ReadonlySet<string>;
  /** Replicas the count rules already stop or drain as surplus: they are not moved. */
  readonly stopped: ReadonlySet<string>;
  readonly maxParallel: number;
  readonly modelKey: () => string;
  readonly request: (excludeNodes?: readonly string[]) => PlacementRequest;
}

/**
 * For each replica on a draining node: mark it draining once its
 * replacement is ready, or ask for a replacement while fewer than
 * maxParallel of the model's replicas are moving (those with a replacement
 * and those already draining count).
 */
export function moveOffDraining(input: MoveInput): { actions: PlanAction[]; requests: PendingRequest[] } {
  const { model, split } = input;
  const actions: PlanAction[] = [];
  const requests: PendingRequest[] = [];
  let moving = split.movingOut.size + input.group.draining.length;
  for (const r of split.outgoing) {
    if (input.stopped.has(r.id)) continue;
    const replacement = split.replacementOf.get(r.id);
    const drainingNodes = [
      ...new Set(r.shards.map((s) => s.nodeId).filter((id) => input.drainingNodes.has(id))),
    ].sort();
    if (replacement) {
      if (replacement.state === 'ready') {
        actions.push({
          kind: 'drain',
          replicaId: r.id,
          reason: `node ${drainingNodes.join(', ')} is draining and replacement ${replacement.id} is ready`,
        });
      }
      continue;
    }
    if (moving >= input.maxParallel) continue;
    moving++;
    requests.push({
      request: input.request(r.shards.map((s) => s.nodeId)),
      purpose: 'drain',
      model,
      modelKey: input.modelKey(),
      replaces: r,
    });
  }
  return { actions, requests };
}

/**
 * Stops the model's draining replicas that are done: the drain deadline has
 * passed, or nothing is in flight and time has passed since the mark (a
 * router that had not seen it yet could still have sent one a request).
 * `inFlight` absent or no entry = none reported.
 */
export function finishDrains(
  group: ModelGroup,
  inFlight: ReadonlyMap<string, number> | undefined,
  now: number,
  opts: Pick<CompiledPlanOptions, 'drainDeadlineMs'>,
): PlanAction[] {
  const actions: PlanAction[] = [];
  for (const r of group.draining) {
    const count = inFlight?.get(r.id);
    const drainedMs = now - r.stateSinceMs;
    if (drainedMs >= opts.drainDeadlineMs) {
      actions.push({
        kind: 'stop',
        replicaId: r.id,
        reason: `drain deadline of ${formatMs(opts.drainDeadlineMs)} passed${count ? ` with ${count} request(s) still in flight` : ''}`,
      });
    } else if ((count ?? 0) === 0 && drainedMs > 0) {
      const replaced = group.live.some((x) => x.replaces === r.id);
      actions.push({
        kind: 'stop',
        replicaId: r.id,
        reason: replaced
          ? 'drained: no requests in flight, and its replacement is serving'
          : 'drained: no requests in flight',
      });
    }
  }
  return actions;
}
