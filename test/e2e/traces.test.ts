// OpenTelemetry traces as an operator receives them: a real `llmgw control`
// with otlp_endpoint pointing at a test OTLP/HTTP receiver on loopback, a
// simulated agent running real sim engines, and a streamed chat whose first
// attempt fails (its engine is stopped with SIGSTOP, so the upstream headers
// timeout fails it before any byte) and which falls back once to another
// model. The receiver decodes the protobuf ExportTraceServiceRequest with
// OpenTelemetry's own reader (test/support/otlp-receiver.ts); the span tree,
// the GenAI attributes and the client's traceparent as parent are checked
// on what arrived over the wire, and the agent's shard lifecycle spans
// (started with --otlp-endpoint) beside them.
import { mkdirSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ReplicaView } from '../../src/api/index.js';
import { killEnginesOf, startControl, startLlmgw, stopAll } from '../support/processes.js';
import {
  decodeExportTraceRequest,
  startOtlpReceiver,
  type OtlpReceiver,
  type ReceivedSpan,
} from '../support/otlp-receiver.js';
import { waitFor } from '../support/wait.js';

const JOIN = 'e2e-join-token-traces-0123456789';
const ADMIN = 'e2e-admin-token-traces-012345678';
const admin = { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json', 'x-llmgw-actor': 'e2e-traces' };
/** A client's own trace: the request span must hang under its span. */
const CLIENT_TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const CLIENT_SPAN = '00f067aa0ba902b7';

let receiver: OtlpReceiver;
let dir = '';
let adminUrl = '';
let clientUrl = '';
let key = '';
const stateDir = () => join(dir, 'node');

async function api<T>(method: string, path: string, body?: unknown): Promise<{ status: number; body: T }> {
  const res = await fetch(`${adminUrl}${path}`, {
    method,
    headers: admin,
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: res.status, body: (await res.json()) as T };
}

async function readyReplica(model: string): Promise<ReplicaView> {
  return waitFor(
    `a ready replica of ${model}`,
    async () => {
      const { body } = await api<ReplicaView[]>('GET', `/api/v1/replicas?model=${model}`);
      return body.find((r) => r.state === 'ready');
    },
    60_000,
  );
}

/** The engine process of a replica, from the record its agent's supervisor keeps. */
function enginePid(replicaId: string): number {
  const shards = join(stateDir(), 'shards');
  for (const f of readdirSync(shards).filter((n) => n.endsWith('.json'))) {
    const rec = JSON.parse(readFileSync(join(shards, f), 'utf8')) as { pid: number; launch: { replicaId: string } };
    if (rec.launch.replicaId === replicaId) return rec.pid;
  }
  throw new Error(`the agent runs no engine for replica ${replicaId}`);
}

beforeAll(async () => {
  receiver = await startOtlpReceiver();
  dir = mkdtempSync(join(tmpdir(), 'llmgw-e2e-traces-'));
  const control = await startControl(
    [
      '--store',
      `sqlite:${join(dir, 'db')}`,
      '--join-token',
      JOIN,
      '--admin-token',
      ADMIN,
      '--reconcile-interval',
      '300ms',
      '--otlp-endpoint',
      receiver.url,
      // A stopped engine fails its attempt after this, before any byte: the router moves on.
      '--upstream-headers-timeout',
      '1s',
      '--log-level',
      'warn',
    ],
    // The SDK's own variable: batches go out every 200 ms instead of every 5 s.
    { env: { OTEL_BSP_SCHEDULE_DELAY: '200' } },
  );
  adminUrl = control.urls.admin;
  clientUrl = control.urls.client;
  startLlmgw(
    [
      'agent',
      '--control',
      control.urls.agent,
      '--join-token',
      JOIN,
      '--node-id',
      'n1',
      '--state-dir',
      stateDir(),
      '--simulate',
      'gpus=0,ram=16g',
      '--heartbeat-interval',
      '300ms',
      '--port-range',
      '26300-26399',
      '--otlp-endpoint',
      receiver.url,
      '--log-level',
      'warn',
    ],
    { env: { OTEL_BSP_SCHEDULE_DELAY: '200' } },
  );
  await waitFor('the node up', async () => {
    const { body } = await api<{ liveness: string }[]>('GET', '/api/v1/nodes');
    return body.length === 1 && body[0]!.liveness === 'up' ? true : undefined;
  });
  const weights = join(dir, 'weights');
  mkdirSync(weights);
  for (const def of [
    // The fallback first: a model may name only fallbacks the catalog has.
    { name: 'backup', scaling: { min: 1 }, profiles: [{ engine: 'sim', args: ['--ttft-ms', '20'] }] },
    { name: 'primary', fallbacks: ['backup'], scaling: { min: 1 }, profiles: [{ engine: 'sim' }] },
  ]) {
    const res = await api('POST', '/api/v1/models', { source: `file://${weights}`, ...def });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
  }
  const made = await api<{ secret: string }>('POST', '/api/v1/keys', { name: 'traces' });
  expect(made.status).toBe(201);
  key = made.body.secret;
}, 120_000);

afterAll(async () => {
  await stopAll();
  killEnginesOf([stateDir()]);
  await receiver?.close();
});

describe('the test receiver', () => {
  it("decodes what OpenTelemetry's own serializer writes", () => {
    const exporter = new InMemorySpanExporter();
    const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
    const tracer = provider.getTracer('t');
    const parent = tracer.startSpan('parent');
    const child = tracer.startSpan('child', {
      attributes: { s: 'x', n: 3, d: 0.25, b: true, list: ['a', 'b'], nums: [1.5, 2] },
    });
    child.addEvent('e', { k: 'v' });
    child.setStatus({ code: 2, message: 'bad' });
    child.end();
    parent.end();
    const bytes = ProtobufTraceSerializer.serializeRequest(exporter.getFinishedSpans())!;
    const spans = decodeExportTraceRequest(bytes);
    const got = spans.find((s) => s.name === 'child')!;
    expect(got.attributes).toEqual({ s: 'x', n: 3, d: 0.25, b: true, list: ['a', 'b'], nums: [1.5, 2] });
    expect(got.events.map((e) => [e.name, e.attributes])).toEqual([['e', { k: 'v' }]]);
    expect([got.statusCode, got.statusMessage]).toEqual([2, 'bad']);
    expect(got.traceId).toBe(exporter.getFinishedSpans()[0]!.spanContext().traceId);
    expect(got.endUnixNano > got.startUnixNano).toBe(true);
  });
});

describe('traces of a request through a real control plane', () => {
  it('sends the span tree of a streamed chat that fell back once, under the client’s traceparent', async () => {
    const primary = await readyReplica('primary');
    await readyReplica('backup');
    const pid = enginePid(primary.id);
    process.kill(pid, 'SIGSTOP');
    let body = '';
    let requestId = '';
    try {
      const res = await fetch(`${clientUrl}/v1/chat/completions`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${key}`,
          'content-type': 'application/json',
          traceparent: `00-${CLIENT_TRACE}-${CLIENT_SPAN}-01`,
        },
        body: JSON.stringify({
          model: 'primary',
          messages: [{ role: 'user', content: 'a prompt that must not be exported' }],
          max_tokens: 4,
          stream: true,
        }),
      });
      expect(res.status).toBe(200);
      requestId = res.headers.get('x-request-id')!;
      body = await res.text();
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    expect(body, 'the stream ended normally').toContain('data: [DONE]');

    const root = await waitFor(
      'the request span at the receiver',
      async () => receiver.spans.find((s) => s.name === 'chat primary' && s.traceId === CLIENT_TRACE),
      30_000,
    );
    const tree = (parent: ReceivedSpan) => receiver.spans.filter((s) => s.parentSpanId === parent.spanId);
    await waitFor('every child span', async () => (tree(root).length >= 4 ? true : undefined), 10_000);
    expect(receiver.refused, 'the exporter spoke OTLP protobuf on /v1/traces').toEqual([]);
    expect(root.parentSpanId, "the client's span is the parent").toBe(CLIENT_SPAN);
    expect(root.kind, 'a server span').toBe(2);
    expect(root.resource['service.name']).toBe('llmgw');
    expect(root.attributes).toMatchObject({
      'gen_ai.operation.name': 'chat',
      'gen_ai.request.model': 'primary',
      'gen_ai.request.max_tokens': 4,
      'gen_ai.response.model': 'backup',
      'gen_ai.usage.output_tokens': 4,
      'gen_ai.response.finish_reasons': ['length'],
      'llmgw.request.id': requestId,
      'llmgw.fallback': 'backup',
      'llmgw.attempts': 2,
      'http.response.status_code': 200,
    });
    expect(Number(root.attributes['gen_ai.usage.input_tokens'])).toBeGreaterThan(0);
    expect(
      JSON.stringify(receiver.spans.map((s) => [s.attributes, s.events.map((e) => e.attributes)])),
      'no prompt is recorded without trace_content',
    ).not.toContain('must not be exported');
    const firstToken = root.events.find((e) => e.name === 'llmgw.first_token');
    expect(Number(firstToken?.attributes['gen_ai.response.time_to_first_chunk'])).toBeGreaterThan(0);

    expect(
      tree(root)
        .map((s) => s.name)
        .sort(),
    ).toEqual(['llmgw.admission', 'llmgw.attempt', 'llmgw.attempt', 'llmgw.stream']);
    const [failed, answered] = tree(root)
      .filter((s) => s.name === 'llmgw.attempt')
      .sort((a, b) => Number(a.attributes['llmgw.attempt.number']) - Number(b.attributes['llmgw.attempt.number']));
    expect(failed!.statusCode, 'the stopped engine’s attempt is an error').toBe(2);
    expect(failed!.kind, 'a client span').toBe(3);
    expect(failed!.attributes).toMatchObject({
      'gen_ai.request.model': 'primary',
      'llmgw.replica.id': primary.id,
      'llmgw.replica.nodes': ['n1'],
      'llmgw.replica.engine': 'sim',
      'server.address': '127.0.0.1',
    });
    expect(failed!.attributes['llmgw.choice.candidates'], 'the candidates the chooser weighed').toEqual([primary.id]);
    expect(answered!.statusCode).not.toBe(2);
    expect(answered!.attributes).toMatchObject({ 'gen_ai.request.model': 'backup', 'llmgw.replica.nodes': ['n1'] });
    const stream = tree(root).find((s) => s.name === 'llmgw.stream')!;
    expect(stream.startUnixNano >= answered!.startUnixNano, 'the stream began with the answering attempt').toBe(true);
  }, 60_000);

  it("draws the agent's shard lifecycles: a fetch and a start that became ready, per replica", async () => {
    const replicas = [await readyReplica('primary'), await readyReplica('backup')];
    const starts = await waitFor(
      'a start span for each replica',
      async () => {
        const found = receiver.spans.filter(
          (s) => s.name === 'llmgw.shard.start' && replicas.some((r) => r.id === s.attributes['llmgw.replica.id']),
        );
        return found.length >= 2 ? found : undefined;
      },
      30_000,
    );
    for (const s of starts) {
      expect(s.resource['service.name']).toBe('llmgw-agent');
      expect(s.resource['service.instance.id'], 'the node id').toBe('n1');
      expect(s.attributes).toMatchObject({ 'llmgw.node': 'n1', 'llmgw.replica.engine': 'sim' });
      expect(s.events.map((e) => e.name)).toEqual(['ready']);
      expect(s.statusCode).not.toBe(2);
    }
    expect(receiver.spans.some((s) => s.name === 'llmgw.shard.fetch')).toBe(true);
  });
});
