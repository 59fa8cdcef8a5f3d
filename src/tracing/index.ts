// OpenTelemetry's Node SDK at the edge of each llmgw process: a tracer
// provider that batches spans and sends them over OTLP/HTTP (protobuf) to a
// collector, or nothing at all. The control plane, a gateway process and the
// agent each start one here from their own settings; every part that makes
// spans (the gateway, the agent's shard lifecycles) sees only
// @opentelemetry/api's Tracer, handed to it, so with tracing off no SDK
// object exists and no span is made. A top-level folder, like log/ and tls/,
// because the agent may not import the control plane's code and both start
// the same provider.
import type { TextMapPropagator, Tracer } from '@opentelemetry/api';
import { LLMGW_VERSION } from '../version.js';

/** The path OTLP/HTTP collectors take traces on, appended to a base endpoint as OTEL_EXPORTER_OTLP_ENDPOINT's rule says. */
const TRACES_PATH = '/v1/traces';

/**
 * Where spans go: `configured` (a base endpoint such as
 * http://collector:4318, or a URL already ending in /v1/traces), else
 * OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as it is, else
 * OTEL_EXPORTER_OTLP_ENDPOINT with /v1/traces appended (OpenTelemetry's own
 * rules for those variables). Null = tracing is off.
 */
export function tracesUrl(configured: string | null | undefined, env: NodeJS.ProcessEnv): string | null {
  if (configured) return withTracesPath(configured);
  const traces = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim();
  if (traces) return traces;
  const base = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  return base ? withTracesPath(base) : null;
}

function withTracesPath(base: string): string {
  const trimmed = base.replace(/\/+$/, '');
  return trimmed.endsWith(TRACES_PATH) ? trimmed : `${trimmed}${TRACES_PATH}`;
}

export interface TracingStart {
  /** The collector's traces URL (tracesUrl()). */
  readonly url: string;
  /** Share of new traces kept, 0..1; a request that arrives with a traceparent follows its caller's decision. */
  readonly sampleRatio: number;
  /** service.name: `llmgw` for the control plane and gateways, `llmgw-agent` for agents. */
  readonly serviceName: string;
  /** service.instance.id: which process of the fleet made the span (a control plane's instance id, a node id). */
  readonly instance: string;
}

/** A started provider: the tracer the parts are given, the W3C propagator for traceparent, and its end. */
export interface Tracing {
  readonly tracer: Tracer;
  readonly propagator: TextMapPropagator;
  readonly url: string;
  /** Sends what is batched and stops; spans ended after it are dropped. Never rejects. */
  shutdown(): Promise<void>;
}

/**
 * Starts a provider that samples ParentBased(TraceIdRatio(sampleRatio)) and
 * exports in batches. Nothing global is registered: the tracer is passed to
 * whoever makes spans, so two processes' worth of providers in one test
 * never meet. The SDK is imported here, not at the top: with tracing off
 * (most processes) it is never loaded, which saves each control plane,
 * gateway and agent about a tenth of a second of CPU as it starts.
 */
export async function startTracing(start: TracingStart): Promise<Tracing> {
  const [{ W3CTraceContextPropagator }, { OTLPTraceExporter }, { resourceFromAttributes }, sdk] = await Promise.all([
    import('@opentelemetry/core'),
    import('@opentelemetry/exporter-trace-otlp-proto'),
    import('@opentelemetry/resources'),
    import('@opentelemetry/sdk-trace-node'),
  ]);
  const { BatchSpanProcessor, NodeTracerProvider, ParentBasedSampler, TraceIdRatioBasedSampler } = sdk;
  const provider = new NodeTracerProvider({
    resource: resourceFromAttributes({
      'service.name': start.serviceName,
      'service.version': LLMGW_VERSION,
      'service.instance.id': start.instance,
    }),
    sampler: new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(start.sampleRatio) }),
    spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter({ url: start.url }))],
  });
  let closing: Promise<void> | null = null;
  return {
    tracer: provider.getTracer('llmgw', LLMGW_VERSION),
    propagator: new W3CTraceContextPropagator(),
    url: start.url,
    // A collector that is down must not hold up a stop: what cannot be sent is dropped.
    shutdown: () => (closing ??= provider.shutdown().catch(() => undefined)),
  };
}
