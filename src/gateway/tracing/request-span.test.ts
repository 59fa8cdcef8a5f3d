// The router's spans, in process: an in-memory exporter in place of OTLP,
// real sim engines and a stand-in that answers 503 and keeps the headers it
// was sent. The wire (OTLP over HTTP, the control plane's settings) is
// test/e2e/traces.test.ts's; here each rule of the span tree is checked
// against the request log's record of the same request.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
  type ReadableSpan,
} from '@opentelemetry/sdk-trace-base';
import { afterEach, describe, expect, it } from 'vitest';
import { RequestLog } from '../core/request-log.js';
import { cleanups, closeAll, eventually, harness, model, replica, sim } from '../../../test/support/gateway-router.js';
import type { GatewayTracing } from './index.js';

afterEach(closeAll);

function tracing(recordContent = false, ratio?: number): { tracing: GatewayTracing; spans: () => ReadableSpan[] } {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({
    spanProcessors: [new SimpleSpanProcessor(exporter)],
    ...(ratio === undefined
      ? {}
      : {
          sampler: { shouldSample: () => ({ decision: ratio > 0 ? 2 : 0 }), toString: () => 'fixed' },
        }),
  });
  cleanups.push(() => provider.shutdown());
  return {
    tracing: { tracer: provider.getTracer('test'), propagator: new W3CTraceContextPropagator(), recordContent },
    spans: () => exporter.getFinishedSpans(),
  };
}

/** An engine that answers 503 to everything and keeps each request's headers. */
async function refusing(): Promise<{ url: string; headers: Record<string, string | string[] | undefined>[] }> {
  const headers: Record<string, string | string[] | undefined>[] = [];
  const server = createServer((req, res) => {
    headers.push(req.headers);
    req.resume();
    req.on('end', () => res.writeHead(503, { 'content-type': 'application/json' }).end('{"error":"busy"}'));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, headers };
}

const byName = (spans: ReadableSpan[], name: string) => spans.filter((s) => s.name === name);

describe('request spans', () => {
  it('draws a streamed chat that fell back once as a tree: admission, two attempts (the first failed), first token, stream', async () => {
    const a = model({ name: 'alpha', fallbacks: ['beta'] });
    const b = model({ name: 'beta' });
    const t = tracing();
    const log = new RequestLog(10);
    const h = await harness([a, b], { tracing: t.tracing, requestLog: log });
    const busy = await refusing();
    const betaSim = await sim(b);
    h.directory.set('alpha', [{ ...replica('a1', busy.url), nodes: ['n1'], engine: 'vllm' }]);
    h.directory.set('beta', [{ ...replica('b1', betaSim.url), nodes: ['n2'], engine: 'sim' }]);
    const parent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    const { data: stream, response } = await h.client.chat.completions
      .create(
        {
          model: 'alpha',
          messages: [{ role: 'user', content: 'a secret prompt' }],
          max_tokens: 5,
          stream: true,
          stream_options: { include_usage: true },
        },
        { headers: { traceparent: parent } },
      )
      .withResponse();
    for await (const chunk of stream) void chunk;
    const id = response.headers.get('x-request-id')!;
    await eventually(() => byName(t.spans(), 'chat alpha').length === 1, 'the request span ends');

    const spans = t.spans();
    const root = byName(spans, 'chat alpha')[0]!;
    expect(root.spanContext().traceId, "the client's traceparent is the parent").toBe(
      '0af7651916cd43dd8448eb211c80319c',
    );
    expect(root.parentSpanContext?.spanId).toBe('b7ad6b7169203331');
    expect(root.attributes).toMatchObject({
      'gen_ai.operation.name': 'chat',
      'gen_ai.request.model': 'alpha',
      'gen_ai.request.max_tokens': 5,
      'gen_ai.response.model': 'beta',
      'gen_ai.usage.output_tokens': 5,
      'gen_ai.response.finish_reasons': ['length'],
      'llmgw.fallback': 'beta',
      'llmgw.attempts': 2,
      'http.response.status_code': 200,
    });
    expect(root.attributes['gen_ai.usage.input_tokens']).toBeGreaterThan(0);
    expect(Object.keys(root.attributes), 'no prompt without trace_content').not.toContain('gen_ai.input.messages');
    expect(root.events.map((e) => e.name)).toEqual(['llmgw.first_token']);
    expect(log.get(id)?.traceId, 'the request log names the trace').toBe('0af7651916cd43dd8448eb211c80319c');

    const children = spans.filter((s) => s.parentSpanContext?.spanId === root.spanContext().spanId);
    expect(children.map((s) => s.name).sort()).toEqual([
      'llmgw.admission',
      'llmgw.attempt',
      'llmgw.attempt',
      'llmgw.stream',
    ]);
    const [failed, answered] = byName(spans, 'llmgw.attempt').sort(
      (x, y) => Number(x.attributes['llmgw.attempt.number']) - Number(y.attributes['llmgw.attempt.number']),
    );
    expect(failed!.status.code, 'the failed attempt is an error').toBe(2);
    expect(failed!.attributes).toMatchObject({
      'llmgw.replica.id': 'a1',
      'llmgw.replica.nodes': ['n1'],
      'llmgw.replica.engine': 'vllm',
      'gen_ai.request.model': 'alpha',
      'server.address': '127.0.0.1',
    });
    expect(String(failed!.attributes['llmgw.attempt.reason'])).toMatch(/503/);
    expect(answered!.status.code).not.toBe(2);
    expect(answered!.attributes).toMatchObject({ 'llmgw.replica.id': 'b1', 'gen_ai.request.model': 'beta' });

    const sent = String(busy.headers[0]?.traceparent);
    expect(sent, 'the engine is sent the attempt span as its parent').toBe(
      `00-0af7651916cd43dd8448eb211c80319c-${failed!.spanContext().spanId}-01`,
    );
  });

  it('records the prompt only with trace_content, and makes no attributes for a trace the sampler dropped', async () => {
    const a = model({ name: 'alpha' });
    const on = tracing(true);
    const h = await harness([a], { tracing: on.tracing });
    h.directory.set('alpha', [replica('a1', (await sim(a)).url)]);
    await h.client.chat.completions.create({ model: 'alpha', messages: [{ role: 'user', content: 'say hi' }] });
    await eventually(() => byName(on.spans(), 'chat alpha').length === 1, 'the request span ends');
    const root = byName(on.spans(), 'chat alpha')[0]!;
    expect(JSON.parse(String(root.attributes['gen_ai.input.messages']))).toEqual([{ role: 'user', content: 'say hi' }]);
    expect(String(root.attributes['gen_ai.output.messages'])).toContain('assistant');

    const dropped = tracing(false, 0);
    const h2 = await harness([a], { tracing: dropped.tracing });
    const busy = await refusing();
    h2.directory.set('alpha', [replica('a1', busy.url)]);
    await h2.client.chat.completions
      .create({ model: 'alpha', messages: [{ role: 'user', content: 'x' }] })
      .catch(() => undefined);
    expect(dropped.spans(), 'nothing exported').toEqual([]);
    expect(String(busy.headers[0]?.traceparent), 'the engine still hears the unsampled context').toMatch(/-00$/);
  });
});
