// Which nodes could take a shard of a model, per profile, and why each other
// node could not: the table behind "will this new model fit, and where".
// place() answers with one placement or, when nothing fits, every rejection;
// an operator weighing a new model wants both halves at once, for every
// profile, so this runs the thorough checks (checks.ts) on every node of
// every profile. Pure, like the rest of placement; it ignores spreading and
// scoring (place decides among the fitting nodes) and fabrics (a node alone
// cannot fail one; place's answer and explain say when no fabric has enough).
import { nodeRejections, poolInvalidRejection } from './checks.js';
import { PlacementState } from './state.js';
import type { PlacementRequest, PlacementSnapshot, Rejection } from './types.js';

export interface ProfileFit {
  profile: string;
  engine: string;
  /** Nodes per replica. */
  shards: number;
  /** Node ids, id order. */
  fits: string[];
  /** Every other node, id order, with each failed check's sentence. */
  rejected: { node: string; reasons: string[] }[];
}

export function fitTable(snapshot: PlacementSnapshot, request: PlacementRequest): ProfileFit[] {
  const state = new PlacementState(snapshot);
  const keys = typeof request.weightsKey === 'string' ? [request.weightsKey] : request.weightsKey;
  const excluded = new Set<number>();
  for (const id of request.excludeNodes ?? []) {
    const i = state.positionById.get(id);
    if (i !== undefined) excluded.add(i);
  }
  return request.profiles.map((profile) => {
    const shape = state.shape(profile);
    const fit: ProfileFit = {
      profile: profile.name,
      engine: profile.engine,
      shards: shape.shards,
      fits: [],
      rejected: [],
    };
    if (shape.selectorProblem !== null) {
      const why = poolInvalidRejection(shape).reason;
      fit.rejected = state.entries.map((e) => ({ node: e.id, reasons: [why] }));
      return fit;
    }
    state.entries.forEach((entry, i) => {
      const out: Rejection[] = [];
      if (nodeRejections(state, shape, { keys, excluded }, i, out) === 0) fit.fits.push(entry.id);
      else fit.rejected.push({ node: entry.id, reasons: out.map((r) => r.reason) });
    });
    return fit;
  });
}
