// Whether the client listener traces, and where to: off unless
// otlp_endpoint or OpenTelemetry's own variables say otherwise, as
// OpenTelemetry users expect. A wrong reading would either send traces
// nobody asked for or drop the ones an operator configured.
import { describe, expect, it } from 'vitest';
import { compileControlOptions } from '../config/index.js';
import { tracesUrl } from '../../tracing/index.js';

describe('tracing settings', () => {
  it.each([
    ['nothing set: off', undefined, {}, null],
    ['a base endpoint gets /v1/traces', 'http://c:4318', {}, 'http://c:4318/v1/traces'],
    ['a traces URL is kept', 'http://c:4318/v1/traces/', {}, 'http://c:4318/v1/traces'],
    [
      'OTEL_EXPORTER_OTLP_ENDPOINT is a base',
      undefined,
      { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://e:4318' },
      'http://e:4318/v1/traces',
    ],
    [
      'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is used as it is, before the base',
      undefined,
      { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://t:9/x', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://e:4318' },
      'http://t:9/x',
    ],
    [
      'otlp_endpoint wins over the environment',
      'http://c:4318',
      { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://e:4318' },
      'http://c:4318/v1/traces',
    ],
  ])('%s', (_what, configured, env, url) => {
    expect(tracesUrl(configured, env)).toBe(url);
  });

  it('compiles the keys: defaults keep every trace and no content; a bad ratio is refused naming the key', () => {
    expect(compileControlOptions({}).tracing).toEqual({ url: null, sampleRatio: 1, content: false });
    expect(
      compileControlOptions(
        { trace_sample_ratio: '0.25', trace_content: 'true' },
        { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' },
      ).tracing,
    ).toEqual({ url: 'http://127.0.0.1:4318/v1/traces', sampleRatio: 0.25, content: true });
    expect(() => compileControlOptions({ trace_sample_ratio: 2 })).toThrow(/trace_sample_ratio/);
    expect(() => compileControlOptions({ otlp_endpoint: 'collector' })).toThrow(/otlp_endpoint/);
  });
});
