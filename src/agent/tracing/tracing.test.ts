// The agent's shard traces, and vLLM told to trace when the agent does. A
// start drawn twice would show a shard starting twice; one never drawn, a
// node that never started it; a vLLM not told, an attempt with no engine
// spans under it.
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { describe, expect, it } from 'vitest';
import { adapterFor, type ShardLaunch } from '../engines/index.js';
import { completedStarts, ShardTracing, type StartSnapshot } from './index.js';

const shard = (over: Partial<StartSnapshot>): StartSnapshot => ({
  shardId: 's1',
  replicaId: 'r1',
  engine: 'vllm',
  state: 'starting',
  ...over,
});

describe('shard traces', () => {
  it.each([
    ['no process yet', shard({}), []],
    ['starting, not ready', shard({ startedAt: '2026-12-06T07:00:00.000Z' }), []],
    [
      'ready',
      shard({ state: 'ready', startedAt: '2026-12-06T07:00:00.000Z', readyAt: '2026-12-06T07:00:05.000Z' }),
      ['ready'],
    ],
    [
      'failed before ready',
      shard({ state: 'failed', startedAt: '2026-12-06T07:00:00.000Z', error: { message: 'oom' } }),
      ['failed'],
    ],
  ])('draws a start when it is complete: %s', (_what, s, kinds) => {
    expect(completedStarts([s], new Set(), 0).map((c) => c.kind)).toEqual(kinds);
  });

  it('draws each start once, with its times, node and shard, however often the status is read', () => {
    const exporter = new InMemorySpanExporter();
    const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
    const t = new ShardTracing(provider.getTracer('t'), 'n1', () => Date.parse('2026-12-06T07:01:00.000Z'));
    const ready = shard({ state: 'ready', startedAt: '2026-12-06T07:00:00.000Z', readyAt: '2026-12-06T07:00:05.000Z' });
    t.observe([ready]);
    t.observe([ready]);
    const end = t.fetchStarted('hf://org/model');
    end('disk full');
    const spans = exporter.getFinishedSpans();
    expect(spans.map((s) => s.name)).toEqual(['llmgw.shard.start', 'llmgw.shard.fetch']);
    const [start, fetch] = spans;
    expect(start!.attributes).toMatchObject({
      'llmgw.node': 'n1',
      'llmgw.shard.id': 's1',
      'llmgw.replica.engine': 'vllm',
    });
    expect(start!.events.map((e) => e.name)).toEqual(['ready']);
    expect(start!.duration, 'five seconds from start to ready').toEqual([5, 0]);
    expect(fetch!.status).toMatchObject({ code: 2, message: 'disk full' });
  });

  it('starts vLLM with --otlp-traces-endpoint over http/protobuf only when the agent traces', () => {
    const launch: ShardLaunch = {
      replicaId: 'rep-1',
      shardId: 'rep-1-s0',
      model: { name: 'm', aliases: [] },
      profile: { name: 'main', engine: 'vllm', gpus: 0, shards: 1, args: [], env: {} },
      weightsPath: '/w/m',
      gpuIndices: [],
      host: '127.0.0.1',
      port: 20001,
      rank: 0,
      peers: [],
    };
    const on = adapterFor('vllm', { otlpTracesEndpoint: 'http://c:4318/v1/traces' }).plan(launch);
    const at = on.argv.indexOf('--otlp-traces-endpoint');
    expect(on.argv[at + 1]).toBe('http://c:4318/v1/traces');
    expect(on.env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL).toBe('http/protobuf');
    const off = adapterFor('vllm', {}).plan(launch);
    expect(off.argv).not.toContain('--otlp-traces-endpoint');
    expect(off.env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL).toBeUndefined();
  });
});
