// Traces from the client listener, as the control plane and `llmgw
// gateway` both build it: the SDK started from the configuration's
// otlp_endpoint (or OpenTelemetry's own environment variables),
// trace_sample_ratio and trace_content, handed to the router as the
// GatewayTracing it asks for, and flushed and shut down when the listener
// closes. Apart from client-listener.ts so the listener reads one call, and
// from src/tracing, which the agent shares and which knows no configuration.
import { hostname } from 'node:os';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { GatewayTracing } from '../../gateway/index.js';
import { startTracing } from '../../tracing/index.js';
import type { ControlConfig } from '../config/index.js';

/**
 * The router's tracing for `config`, shut down (what is batched sent) when
 * `app` closes; undefined = tracing is off, and the router makes no span.
 */
export async function clientTracing(
  config: Pick<ControlConfig, 'tracing'>,
  app: FastifyInstance,
  logger: Logger,
): Promise<GatewayTracing | undefined> {
  const { url, sampleRatio, content } = config.tracing;
  if (url === null) return undefined;
  const started = await startTracing({
    url,
    sampleRatio,
    serviceName: 'llmgw',
    // Which process of the fleet: several control planes and gateways may run on one host.
    instance: `${hostname()}:${process.pid}`,
  });
  logger.info({ url, sampleRatio, content }, 'sending traces over OTLP');
  app.addHook('onClose', async () => started.shutdown());
  return { tracer: started.tracer, propagator: started.propagator, recordContent: content };
}
