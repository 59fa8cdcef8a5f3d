// The wire shapes of splits and shadows (docs/splits-and-shadows.md): how a
// model's rules read in the catalog views, and the comparison of a shadow's
// candidate against the model it copies (GET /api/v1/shadows). Apart from
// types.ts so one feature's shapes read together.

/** One target of a model's split, as written in the catalog. */
export interface SplitTargetView {
  model: string;
  weight: number;
}

/** A model's shadow, as compiled (defaults filled). */
export interface ShadowRuleView {
  model: string;
  /** The share of requests copied, 0..1. */
  share: number;
  max_concurrent: number;
  timeout_ms: number;
}

/** Latency quantiles over the samples kept; absent = no sample yet. */
export interface LatencyView {
  p50_ms: number;
  p95_ms: number;
  /** How many samples the quantiles are over (the newest, at most samples_kept). */
  samples: number;
}

/** One side of a comparison: the requests the client was answered by (primary) or their copies (shadow). */
export interface ShadowSideView {
  /** Ended since this control plane started. */
  requests: number;
  /** Of those, how many failed: a status of 400 or more, a broken or cut answer, no answer in time. */
  errors: number;
  /** From the request sent upstream to the first byte of the answer; absent = none yet. */
  ttft?: LatencyView;
  /** From the request sent upstream to the last byte. */
  total?: LatencyView;
  prompt_tokens: number;
  completion_tokens: number;
}

/** GET /api/v1/shadows: one model and its candidate. */
export interface ShadowView {
  /** The model the client named, which carries the shadow. */
  model: string;
  candidate: string;
  /** The share now configured; absent = the model no longer has this shadow (the numbers are from before). */
  share?: number;
  /** Copies sent to the candidate. */
  copied: number;
  /** Copies running now. */
  in_flight: number;
  /** Copies not sent, by why: busy (max_concurrent reached), no_replica (none ready), not_served (the candidate does not serve the endpoint, or is gone). */
  dropped: { busy: number; no_replica: number; not_served: number };
  /** Only the requests that were copied, so both sides are over the same requests. */
  primary: ShadowSideView;
  shadow: ShadowSideView;
}

export interface ShadowsView {
  shadows: ShadowView[];
  /** This control plane's instance id: each keeps its own comparison, of the requests its client listener took. */
  instance: string;
  /** The most latency samples kept per side, newest first; counts and tokens are totals since start. */
  samples_kept: number;
}
