// Which model serves a request for a model with a split: pure functions of
// the model, the catalog and a point in [0, 1) (a random draw, or a hash of
// the caller's key or user for a sticky split), table-tested without I/O.
// Taken once per request at intake, so everything after (limits, the cold
// hold, fallbacks, usage, the answer's `model`) is about the model that
// serves it, as for a request that named that model itself.
import { hash } from 'node:crypto';
import type { RoutedModel, SplitBy, SplitTarget } from '../ports/index.js';

/** The most splits followed from one name (a split's target may split again); the catalog refuses cycles, this bounds the walk anyway. */
const MAX_SPLIT_DEPTH = 8;

/** Where a point in [0, 1) falls with the weights laid end to end, and where inside that target's span (0..1) it fell. */
export function pickByWeight(weights: readonly number[], point: number): { index: number; within: number } {
  const total = weights.reduce((sum, w) => sum + w, 0);
  const x = Math.min(Math.max(point, 0), 1) * total;
  let start = 0;
  for (let i = 0; i < weights.length; i++) {
    const w = weights[i]!;
    if (x < start + w) return { index: i, within: (x - start) / w };
    start += w;
  }
  // A point of exactly 1 (or rounding at the end): the last target.
  return { index: weights.length - 1, within: 1 - Number.EPSILON };
}

/**
 * A point in [0, 1) fixed by a caller's id and the model: the same key (or
 * user) lands on the same target while the weights stay; changing a weight
 * moves only the callers whose point crosses a boundary.
 */
export function stickyPoint(model: string, id: string): number {
  const hex = hash('sha256', `${model}\u0000${id}`, 'hex');
  // 48 bits: exact in a double, and more than enough to spread callers.
  return parseInt(hex.slice(0, 12), 16) / 2 ** 48;
}

/** Who the request is from, for a sticky split; absent fields = not known (a random draw then). */
export interface SplitCaller {
  /** The API key's id; absent without keys. */
  readonly keyId?: string;
  /** The body's `user` field (OpenAI's end-user id); absent when the request names none. */
  readonly user?: string;
}

/** The point a request is placed at, by the model's split_by. */
export function splitPoint(model: string, by: SplitBy | undefined, caller: SplitCaller, random: () => number): number {
  if (by === 'user' && caller.user) return stickyPoint(model, `user:${caller.user}`);
  if ((by === 'user' || by === 'key') && caller.keyId) return stickyPoint(model, `key:${caller.keyId}`);
  return random();
}

export interface SplitChoice {
  /** The model that serves the request: a target, or the named model itself. */
  readonly model: RoutedModel;
  /** What the request log says of it, like "split 90/10 → chat-v2"; null = no split applied. */
  readonly rule: string | null;
}

/**
 * The model a request for `named` goes to. Targets that do not exist (removed
 * since) or that `usable` refuses (they do not serve the request's endpoint)
 * are left out and the weights of the rest decide; with none left, the
 * named model serves it. A target that splits again is split with the part
 * of the point inside its span, so a sticky caller stays put at every level.
 */
export function chooseSplit(
  named: RoutedModel,
  resolve: (nameOrAlias: string) => RoutedModel | undefined,
  point: number,
  usable: (model: RoutedModel) => boolean = () => true,
): SplitChoice {
  let current = named;
  let at = point;
  const rules: string[] = [];
  for (let depth = 0; depth < MAX_SPLIT_DEPTH && current.split; depth++) {
    const targets: { target: SplitTarget; model: RoutedModel }[] = [];
    for (const t of current.split) {
      const m = t.model === current.name ? current : resolve(t.model);
      if (m && usable(m)) targets.push({ target: t, model: m });
    }
    if (targets.length === 0) break;
    const { index, within } = pickByWeight(
      targets.map((t) => t.target.weight),
      at,
    );
    const next = targets[index]!.model;
    rules.push(`split ${targets.map((t) => formatWeight(t.target.weight)).join('/')} → ${next.name}`);
    if (next === current) break;
    current = next;
    at = within;
  }
  return { model: current, rule: rules.length ? rules.join(', ') : null };
}

function formatWeight(w: number): string {
  return Number.isInteger(w) ? String(w) : String(Math.round(w * 1000) / 1000);
}

/** Whether this request is copied to the model's shadow: one draw against its share; false with no shadow. */
export function sampledForShadow(model: RoutedModel, random: () => number): boolean {
  return !!model.shadow && random() < model.shadow.share;
}
