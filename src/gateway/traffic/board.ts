// The shadow comparison: per model and candidate, how the requests the
// client was answered by (primary) and their copies (shadow) did: counts,
// errors, tokens, and time to first byte and total time over the newest
// samples. Kept in memory per control plane and bounded (a ring of samples
// per side; one entry per model and candidate ever shadowed), with the same
// figures as Prometheus metrics. Separate from the runner that sends the
// copies, so what is kept and how it reads can be tested on its own.
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { LatencyView, ShadowSideView, ShadowView } from '../../api/traffic-types.js';

/** Latency samples kept per side of each comparison. */
export const SHADOW_SAMPLES_KEPT = 512;

const LATENCY_BUCKETS_S = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];

export type ShadowSide = 'primary' | 'shadow';
export type DropReason = 'busy' | 'no_replica' | 'not_served';

/** How one request (or its copy) went. */
export interface SideSample {
  readonly ok: boolean;
  /** Null = no byte of an answer came. */
  readonly ttftMs: number | null;
  readonly totalMs: number;
  readonly promptTokens: number;
  readonly completionTokens: number;
}

/** The newest `capacity` numbers, oldest overwritten first. */
class Ring {
  private readonly values: number[] = [];
  private next = 0;
  constructor(private readonly capacity: number) {}
  push(v: number): void {
    if (this.values.length < this.capacity) this.values.push(v);
    else this.values[this.next] = v;
    this.next = (this.next + 1) % this.capacity;
  }
  view(): LatencyView | undefined {
    if (this.values.length === 0) return undefined;
    const sorted = [...this.values].sort((a, b) => a - b);
    const at = (q: number) => Math.round(sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!);
    return { p50_ms: at(0.5), p95_ms: at(0.95), samples: sorted.length };
  }
}

class Side {
  requests = 0;
  errors = 0;
  promptTokens = 0;
  completionTokens = 0;
  readonly ttft: Ring;
  readonly total: Ring;
  constructor(capacity: number) {
    this.ttft = new Ring(capacity);
    this.total = new Ring(capacity);
  }
  add(s: SideSample): void {
    this.requests++;
    if (!s.ok) this.errors++;
    if (s.ttftMs !== null) this.ttft.push(s.ttftMs);
    this.total.push(s.totalMs);
    this.promptTokens += s.promptTokens;
    this.completionTokens += s.completionTokens;
  }
  view(): ShadowSideView {
    const ttft = this.ttft.view();
    const total = this.total.view();
    return {
      requests: this.requests,
      errors: this.errors,
      ...(ttft ? { ttft } : {}),
      ...(total ? { total } : {}),
      prompt_tokens: this.promptTokens,
      completion_tokens: this.completionTokens,
    };
  }
}

interface Pair {
  readonly model: string;
  readonly candidate: string;
  copied: number;
  inFlight: number;
  readonly dropped: Record<DropReason, number>;
  readonly primary: Side;
  readonly shadow: Side;
}

interface BoardMetrics {
  copies: Counter<'model' | 'candidate'>;
  dropped: Counter<'model' | 'candidate' | 'reason'>;
  requests: Counter<'model' | 'candidate' | 'side' | 'outcome'>;
  ttft: Histogram<'model' | 'candidate' | 'side'>;
  duration: Histogram<'model' | 'candidate' | 'side'>;
  tokens: Counter<'model' | 'candidate' | 'side' | 'kind'>;
}

export class ShadowBoard {
  private readonly pairs = new Map<string, Pair>();
  private readonly metrics: BoardMetrics | null;

  /** `registry` absent = no metrics (tests of the board alone); `samplesKept` 0 or absent = SHADOW_SAMPLES_KEPT. */
  constructor(
    registry?: Registry,
    readonly samplesKept = SHADOW_SAMPLES_KEPT,
  ) {
    this.samplesKept = samplesKept || SHADOW_SAMPLES_KEPT;
    this.metrics = registry ? boardMetrics(registry, () => this.pairs.values()) : null;
  }

  private pair(model: string, candidate: string): Pair {
    const key = `${model}\u0000${candidate}`;
    let p = this.pairs.get(key);
    if (!p) {
      p = {
        model,
        candidate,
        copied: 0,
        inFlight: 0,
        dropped: { busy: 0, no_replica: 0, not_served: 0 },
        primary: new Side(this.samplesKept),
        shadow: new Side(this.samplesKept),
      };
      this.pairs.set(key, p);
    }
    return p;
  }

  /** A copy is on its way. */
  copied(model: string, candidate: string): void {
    const p = this.pair(model, candidate);
    p.copied++;
    p.inFlight++;
    this.metrics?.copies.inc({ model, candidate });
  }

  dropped(model: string, candidate: string, reason: DropReason): void {
    this.pair(model, candidate).dropped[reason]++;
    this.metrics?.dropped.inc({ model, candidate, reason });
  }

  /** One side of a copied request ended; the shadow side's end also ends its copy's flight. */
  record(model: string, candidate: string, side: ShadowSide, sample: SideSample): void {
    const p = this.pair(model, candidate);
    p[side].add(sample);
    if (side === 'shadow') p.inFlight = Math.max(0, p.inFlight - 1);
    const m = this.metrics;
    if (!m) return;
    const labels = { model, candidate, side };
    m.requests.inc({ ...labels, outcome: sample.ok ? 'ok' : 'error' });
    if (sample.ttftMs !== null) m.ttft.observe(labels, sample.ttftMs / 1000);
    m.duration.observe(labels, sample.totalMs / 1000);
    if (sample.promptTokens) m.tokens.inc({ ...labels, kind: 'prompt' }, sample.promptTokens);
    if (sample.completionTokens) m.tokens.inc({ ...labels, kind: 'completion' }, sample.completionTokens);
  }

  /** Copies of `model`'s requests running now (to any candidate). */
  inFlight(model: string): number {
    let n = 0;
    for (const p of this.pairs.values()) if (p.model === model) n += p.inFlight;
    return n;
  }

  /** Every comparison, by model then candidate; `shareOf` says the share configured now (undefined = no longer this shadow). */
  views(shareOf: (model: string, candidate: string) => number | undefined): ShadowView[] {
    return [...this.pairs.values()]
      .sort((a, b) => a.model.localeCompare(b.model) || a.candidate.localeCompare(b.candidate))
      .map((p) => {
        const share = shareOf(p.model, p.candidate);
        return {
          model: p.model,
          candidate: p.candidate,
          ...(share === undefined ? {} : { share }),
          copied: p.copied,
          in_flight: p.inFlight,
          dropped: { ...p.dropped },
          primary: p.primary.view(),
          shadow: p.shadow.view(),
        };
      });
  }
}

function boardMetrics(registry: Registry, pairs: () => Iterable<Pair>): BoardMetrics {
  const registers = [registry];
  const pairLabels = ['model', 'candidate'] as const;
  const sideLabels = ['model', 'candidate', 'side'] as const;
  // Read from the board at each scrape, as the router's held gauge is.
  new Gauge({
    name: 'llmgw_shadow_in_flight',
    help: "Copies of a model's requests running now on its shadow candidate.",
    labelNames: pairLabels,
    registers,
    collect() {
      this.reset();
      for (const p of pairs()) this.set({ model: p.model, candidate: p.candidate }, p.inFlight);
    },
  });
  return {
    copies: new Counter({
      name: 'llmgw_shadow_copies_total',
      help: "Copies of a model's requests sent to its shadow candidate.",
      labelNames: pairLabels,
      registers,
    }),
    dropped: new Counter({
      name: 'llmgw_shadow_dropped_total',
      help: 'Copies sampled but not sent: busy (max_concurrent reached), no_replica, not_served.',
      labelNames: [...pairLabels, 'reason'],
      registers,
    }),
    requests: new Counter({
      name: 'llmgw_shadow_requests_total',
      help: 'Copied requests ended, by side (primary: what the client got; shadow: the copy) and outcome (ok or error).',
      labelNames: [...sideLabels, 'outcome'],
      registers,
    }),
    ttft: new Histogram({
      name: 'llmgw_shadow_time_to_first_byte_seconds',
      help: 'From the request (or its copy) sent upstream to the first byte of its answer, by side.',
      labelNames: sideLabels,
      buckets: LATENCY_BUCKETS_S,
      registers,
    }),
    duration: new Histogram({
      name: 'llmgw_shadow_duration_seconds',
      help: 'From the request (or its copy) sent upstream to the last byte of its answer, by side.',
      labelNames: sideLabels,
      buckets: LATENCY_BUCKETS_S,
      registers,
    }),
    tokens: new Counter({
      name: 'llmgw_shadow_tokens_total',
      help: 'Tokens of copied requests and their copies, by side and kind (prompt, completion).',
      labelNames: [...sideLabels, 'kind'],
      registers,
    }),
  };
}
