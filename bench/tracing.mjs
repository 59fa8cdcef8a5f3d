// Tracing's own CPU per request, in one process: the request span's calls
// for a streamed request answered at once (start, attempt, traceparent,
// first byte, answer, end), 20,000 times, with the SDK exporting to an OTLP
// sink on loopback, at sampling ratios 0, 0.1 and 1. Beside bench/router.mjs
// --phases traces, whose per-process figures a loaded machine inflates: this
// one has no router, engine or load generator around it.
//
//   npm run build && node bench/tracing.mjs
// Node's globals are imported by name: the lint config gives plain .mjs files no Node environment.
import console from 'node:console';
import { createServer } from 'node:http';
import { performance } from 'node:perf_hooks';
import process from 'node:process';
import { setTimeout } from 'node:timers/promises';

process.env.OTEL_BSP_SCHEDULE_DELAY = '200';
process.env.OTEL_BSP_MAX_QUEUE_SIZE = '65536';
const dist = (path) => new URL(`../dist/${path}`, import.meta.url).href;
const { startTracing } = await import(dist('tracing/index.js'));
const { RequestSpan } = await import(dist('gateway/tracing/index.js'));

const sink = createServer((req, res) => {
  req.resume();
  req.on('end', () => res.end());
});
await new Promise((resolve) => sink.listen(0, '127.0.0.1', resolve));
const url = `http://127.0.0.1:${sink.address().port}/v1/traces`;

const N = 20_000;
const model = { name: 'm' };
const replica = { id: 'r1', endpoint: 'http://10.0.0.1:8000', engine: 'vllm', nodes: ['n1'] };
const parsed = { model: 'm', stream: true, body: { max_tokens: 16 } };
const tail =
  'data: {"id":"x","model":"m","choices":[{"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":5}}\n\ndata: [DONE]\n\n';
const attempt = { model: 'm', replica: 'r1', outcome: 'answered', durationMs: 1 };
const choice = { by: 'least-load', candidates: [{ replica: 'r1', load: 0 }] };

for (const ratio of [0, 0.1, 1]) {
  const t = await startTracing({ url, sampleRatio: ratio, serviceName: 'bench', instance: 'bench' });
  const tracing = { tracer: t.tracer, propagator: t.propagator, recordContent: false };
  const run = () => {
    for (let i = 0; i < N; i++) {
      const s = RequestSpan.start(tracing, {
        id: 'a',
        endpoint: 'chat',
        model,
        parsed,
        headers: { host: 'gw:8080' },
        startedAt: performance.now(),
      });
      s.attemptStarted(model, replica);
      s.inject({});
      s.firstByte(10);
      s.answered(() => tail, 5);
      s.attemptEnded({ ...attempt, choice });
      s.ended({
        id: 'a',
        atMs: 0,
        model: 'm',
        endpoint: 'chat',
        stream: true,
        status: 200,
        clientGone: false,
        timedOut: false,
        attempts: [attempt],
        durationMs: 5,
        promptTokens: 3,
        completionTokens: 5,
      });
    }
  };
  run();
  await setTimeout(500);
  const before = process.cpuUsage();
  run();
  // The last batches go out within the schedule delay: their export is counted.
  await setTimeout(1000);
  const used = process.cpuUsage(before);
  console.log(`sampling ${ratio}: ${((used.user + used.system) / N).toFixed(1)} µs CPU a request, export included`);
  await t.shutdown();
}
sink.close();
