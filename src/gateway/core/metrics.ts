// The router's Prometheus metrics, registered on a Registry the caller owns
// (the admin listener serves it at /metrics), never on prom-client's global
// default, so two control planes in one test process do not collide. The
// ones every request updates are hot-metrics.ts's, the rest prom-client's.
import { Counter, Gauge, type Registry } from 'prom-client';
import { HotCounter, HotHistogram, type CounterSeries, type HistogramSeries } from './hot-metrics.js';

/** Buckets for latency from ~1 ms to ~2 min. */
const LATENCY_BUCKETS_S = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];
/** The router's own time is sub-millisecond when healthy. */
const OVERHEAD_BUCKETS_S = [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1];

export class RouterMetrics {
  readonly requests: HotCounter<'model' | 'status' | 'key_prefix'>;
  readonly ttft: HotHistogram<'model'>;
  readonly duration: HotHistogram<'model'>;
  /** The router's own time before a request's first attempt: its one series. */
  readonly overhead: HistogramSeries;
  readonly inFlight: Gauge<'replica'>;
  readonly retries: Counter<'model'>;
  readonly fallbacks: Counter<'model' | 'fallback'>;
  readonly held: Gauge<'model'>;

  /** Series by model, then status and key prefix: lookups by strings the router already holds, none built per request. */
  private readonly requestSeries = new Map<string, Map<number, Map<string, CounterSeries>>>();
  private readonly modelSeries = new Map<string, { ttft: HistogramSeries; duration: HistogramSeries }>();

  /** One more request answered with `status`. */
  countRequest(model: string, status: number, keyPrefix: string): void {
    let byStatus = this.requestSeries.get(model);
    if (!byStatus) this.requestSeries.set(model, (byStatus = new Map()));
    let byKey = byStatus.get(status);
    if (!byKey) byStatus.set(status, (byKey = new Map()));
    let c = byKey.get(keyPrefix);
    if (!c) {
      c = this.requests.series({ model, status: String(status), key_prefix: keyPrefix });
      byKey.set(keyPrefix, c);
    }
    c.inc();
  }

  forModel(model: string): { ttft: HistogramSeries; duration: HistogramSeries } {
    let c = this.modelSeries.get(model);
    if (!c) {
      c = { ttft: this.ttft.series({ model }), duration: this.duration.series({ model }) };
      this.modelSeries.set(model, c);
    }
    return c;
  }

  /**
   * `heldNow`: the router's own count of held requests per model, read at
   * each scrape (absent = none). `inFlightNow`: its in-flight count per
   * replica id, likewise (absent = none); a replica it has forgotten is
   * gone from the gauge.
   */
  constructor(
    registry: Registry,
    heldNow: () => ReadonlyMap<string, number> = () => new Map(),
    inFlightNow: () => ReadonlyMap<string, { readonly inFlight: number }> = () => new Map(),
  ) {
    const registers = [registry];
    this.requests = new HotCounter({
      name: 'llmgw_router_requests_total',
      help: 'Inference requests answered by the router, by requested model (canonical), HTTP status and API key prefix.',
      labelNames: ['model', 'status', 'key_prefix'],
      registers,
    });
    this.ttft = new HotHistogram({
      name: 'llmgw_router_time_to_first_byte_seconds',
      help: 'From the request arriving to the first byte of the answer reaching the client (time to first token when streaming).',
      labelNames: ['model'],
      buckets: LATENCY_BUCKETS_S,
      registers,
    });
    this.duration = new HotHistogram({
      name: 'llmgw_router_request_duration_seconds',
      help: 'From the request arriving to the last byte of the answer.',
      labelNames: ['model'],
      buckets: LATENCY_BUCKETS_S,
      registers,
    });
    this.overhead = new HotHistogram({
      name: 'llmgw_router_overhead_seconds',
      help: "Time spent in llmgw before the request was sent upstream (auth, validation, choice), excluding cold-start holds and retries' backoff.",
      buckets: OVERHEAD_BUCKETS_S,
      registers,
    }).series({});
    // Read from the router's own counts at each scrape, as the held gauge is: an attempt then costs no label hashing.
    this.inFlight = new Gauge({
      name: 'llmgw_router_replica_in_flight',
      help: 'Requests the router has in flight to each replica.',
      labelNames: ['replica'],
      registers,
      collect() {
        this.reset();
        for (const [replica, use] of inFlightNow()) this.set({ replica }, use.inFlight);
      },
    });
    this.retries = new Counter({
      name: 'llmgw_router_retries_total',
      help: 'Attempts repeated on another replica or model after a failure before the first byte.',
      labelNames: ['model'],
      registers,
    });
    this.fallbacks = new Counter({
      name: 'llmgw_router_fallbacks_total',
      help: 'Requests served by a fallback model instead of the one asked for.',
      labelNames: ['model', 'fallback'],
      registers,
    });
    // Read from the router's own map at each scrape rather than kept twice: a hold then costs no label hashing.
    this.held = new Gauge({
      name: 'llmgw_router_held_requests',
      help: 'Requests waiting for a model with no ready replica while one starts, by model (canonical).',
      labelNames: ['model'],
      registers,
      collect() {
        this.reset();
        for (const [model, n] of heldNow()) this.set({ model }, n);
      },
    });
  }
}
