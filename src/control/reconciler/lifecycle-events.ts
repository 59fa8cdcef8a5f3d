// The events that tell how a replica's story goes on: placed on a node, and
// ready (or ready again after failing). Without them the events log showed
// a placement failure at startup and then nothing, as if the model never
// came up, while the summary said all was well. Pure functions over records
// before and after a pass or a report, so the reconciler only records what
// they return.
import type { NewEvent } from '../events/index.js';
import type { ModelRejections } from './plan-types.js';
import type { ReplicaRecord } from './types.js';

/**
 * `replica_placed` for each replica a pass created or placed again.
 * `rejectedBefore` is the previous pass's rejections: a model placed after a
 * placement failure says so, which closes that failure in the log.
 */
export function placedEvents(
  placed: readonly ReplicaRecord[],
  retried: ReadonlySet<string>,
  rejectedBefore: ReadonlyMap<string, { readonly rejections: readonly { readonly reason: string }[] }> | undefined,
): NewEvent[] {
  return placed.map((r) => {
    const nodes = [...new Set(r.shards.map((s) => s.nodeId))];
    const where = nodes.length === 0 ? 'no node' : `node${nodes.length === 1 ? '' : 's'} ${nodes.join(', ')}`;
    const before = rejectedBefore?.get(r.model)?.rejections[0]?.reason;
    const after = before === undefined ? '' : `; the model could not be placed before (${before})`;
    const again = retried.has(r.id) ? ' again, after failing,' : '';
    return {
      kind: 'replica_placed',
      model: r.model,
      replica: r.id,
      ...(nodes[0] === undefined ? {} : { node: nodes[0] }),
      message: `replica ${r.id} of ${r.model} placed${again} on ${where} (profile ${r.profile})${after}`,
    };
  });
}

/**
 * `replica_ready` for each replica that became ready: how long it took
 * since it was placed (since its last state change, for one that failed
 * before: that is when it was placed again), and, when it had failed, that
 * it recovered and from what. `before` holds the records as they were.
 * `startedAtMs` is when this control plane started (absent = never mind): a
 * replica placed by an earlier run counts from then, since its engine
 * started again with it; counted from the placement, a restart told
 * "ready, 1208s after it was placed".
 */
export function readyEvents(
  before: ReadonlyMap<string, ReplicaRecord>,
  changed: readonly ReplicaRecord[],
  nowMs: number,
  startedAtMs?: number,
): NewEvent[] {
  const out: NewEvent[] = [];
  for (const r of changed) {
    const was = before.get(r.id);
    if (r.state !== 'ready' || was === undefined || was.state === 'ready' || was.state === 'draining') continue;
    const node = r.shards[0]?.nodeId;
    const since = was.failures > 0 ? was.stateSinceMs : was.createdAtMs;
    const earlierRun = startedAtMs !== undefined && since < startedAtMs;
    const tookS = Math.max(0, Math.round((nowMs - (earlierRun ? startedAtMs : since)) / 1000));
    const after = earlierRun
      ? 'the control plane started (it was placed in an earlier run)'
      : `it was ${was.failures > 0 ? 'placed again' : 'placed'}`;
    const recovered =
      was.failures > 0
        ? `; recovered after ${was.failures} failure${was.failures === 1 ? '' : 's'}${was.error ? ` (last: ${was.error})` : ''}`
        : '';
    out.push({
      kind: 'replica_ready',
      model: r.model,
      replica: r.id,
      ...(node === undefined ? {} : { node }),
      message: `replica ${r.id} of ${r.model} is ready${node === undefined ? '' : ` on ${node}`}, ${tookS}s after ${after}${recovered}`,
    });
  }
  return out;
}

/**
 * The `placement_failed` message. No rejection at all means no node was
 * there to reject it (none has joined, or none is reporting): said so,
 * rather than "0 rejection(s)", which on every first start read as an error.
 */
export function placementFailedMessage(rej: ModelRejections): string {
  const what = rej.purpose === 'drain' ? 'a replacement for a draining node' : 'a replica';
  const first = rej.rejections[0]?.reason;
  if (first === undefined) {
    const why = rej.nodeCount === 0 ? 'no node has joined yet' : `none of the ${rej.nodeCount} node(s) can take it yet`;
    return `${rej.model}: ${what} cannot be placed yet: ${why}`;
  }
  return `${rej.model}: ${what} cannot be placed: ${rej.rejections.length} rejection(s); first: ${first} (see explain-placement)`;
}
