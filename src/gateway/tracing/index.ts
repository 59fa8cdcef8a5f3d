// The gateway's OpenTelemetry traces: a span tree per client request
// (request-span.ts), the GenAI attribute names and the pure readings that
// fill them (attributes.ts), and the interceptor that hands each attempt's
// traceparent to the engine. The gateway sees only @opentelemetry/api: the
// SDK, the exporter and the sampler are started at the edge (src/tracing)
// and given to the router as a GatewayTracing. Its own folder so that the
// request path (core/) carries one nullable field and a few `?.` calls, and
// nothing at all runs with tracing off.
import type { Interceptor } from '../core/dispatch.js';
import type { RequestTracing } from '../core/exchange.js';

export { RequestSpan, type GatewayTracing, type RequestStart } from './request-span.js';
export { ATTR, OPERATION, answerFacts, inputMessages, outputMessages, requestedMaxTokens } from './attributes.js';

/**
 * Writes the attempt span's traceparent into the upstream request's headers
 * (vLLM started with --otlp-traces-endpoint parents its own spans on it). In
 * the chain only when tracing is on.
 */
export function traceContext(): Interceptor {
  return (next) => (a) => {
    (a.ex as { readonly tracing?: RequestTracing | null }).tracing?.inject(a.headers);
    return next(a);
  };
}
