// A model's traffic rules as the gateway reads them: a split of its
// requests between models by weight (a canary), and a shadow that mirrors a
// sampled share of them to a candidate whose answers are discarded. The
// catalog writes them (src/control/catalog/traffic.ts checks them against
// every model); the gateway only reads them, on the request path
// (src/gateway/traffic/). Apart from the other ports because both sides
// name these types and neither owns the other's file.

/** One way a split sends requests. */
export interface SplitTarget {
  /** A model's name or alias; the model that carries the split may name itself (served by its own replicas). */
  readonly model: string;
  /** Relative weight, above 0: 90 and 10 send 90% and 10%. */
  readonly weight: number;
}

/**
 * What keeps one caller on one side of a split. `request`: each request is
 * drawn on its own; `key`: every request of an API key goes the same way
 * (while the weights stay); `user`: by the body's `user` field (OpenAI's
 * end-user id), by the key when a request names none.
 */
export type SplitBy = 'request' | 'key' | 'user';
export const SPLIT_BY: readonly SplitBy[] = ['request', 'key', 'user'];

/** A shadow: a copy of a sampled share of a model's requests sent to a candidate, its answer compared and discarded. */
export interface ShadowRule {
  /** The candidate's name or alias; it is served by its own replicas (its own split is not applied). */
  readonly model: string;
  /** The share of requests copied, above 0 up to 1. */
  readonly share: number;
  /** Copies in flight at once for this model; a copy that would go past it is dropped, never queued. */
  readonly maxConcurrent: number;
  /** A copy still running after this long is cut (counted as an error of the candidate). */
  readonly timeoutMs: number;
}

/** What a model adds to the gateway's view of it; both absent (or null) = no rule: served by its own replicas, nothing copied. */
export interface TrafficRules {
  readonly split?: readonly SplitTarget[] | null;
  /** Absent = 'request'. */
  readonly splitBy?: SplitBy;
  readonly shadow?: ShadowRule | null;
}
