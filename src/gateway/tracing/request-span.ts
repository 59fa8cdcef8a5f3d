// One client request's spans: the request span (a SERVER span named as
// the GenAI conventions name it, "chat llama-3"), its admission, its cold
// hold, one CLIENT span per upstream attempt (the replica, its nodes and
// engine, the candidates the chooser weighed with their scores), the first
// token as an event and the stream as a span of its own. Made only when the
// router was given a tracer (RouterDeps.tracing): with tracing off the
// exchange holds null and nothing here runs. A span the sampler dropped is
// still made (a non-recording one, so its context reaches the engine
// unsampled), but no attribute is built for it.
import type { IncomingHttpHeaders } from 'node:http';
import {
  defaultTextMapGetter,
  defaultTextMapSetter,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type Span,
  type TextMapPropagator,
  type Tracer,
} from '@opentelemetry/api';
import type { RoutedModel, RouterReplica } from '../ports/index.js';
import type { RequestAttempt, RequestRecord } from '../core/request-log.js';
import type { Endpoint, ParsedRequest } from '../core/validate.js';
import type { RequestTracing } from '../core/exchange.js';
import {
  answerFacts,
  ATTR,
  hostPort,
  inputMessages,
  OPERATION,
  outputMessages,
  requestedMaxTokens,
  type AnswerFacts,
} from './attributes.js';

/** What the router is given to trace with (RouterDeps.tracing); absent there = tracing off. */
export interface GatewayTracing {
  readonly tracer: Tracer;
  /** Reads a client's traceparent and writes the attempt's for the engine: W3C Trace Context. */
  readonly propagator: TextMapPropagator;
  /** True: prompts (and whole answers) are recorded on the request span (trace_content). False: never. */
  readonly recordContent: boolean;
}

/** What a request span is started from, all known when the router takes the request. */
export interface RequestStart {
  readonly id: string;
  readonly endpoint: Endpoint;
  readonly model: RoutedModel;
  readonly parsed: ParsedRequest;
  readonly headers: IncomingHttpHeaders;
  /** performance.now() at arrival. */
  readonly startedAt: number;
}

/** Each engine endpoint's host and port, parsed once: a URL parse per attempt is most of an attempt span's own cost. */
const ENDPOINT_ADDRESSES = new Map<string, { host: string; port: number } | null>();
/** Past this many endpoints the cache starts afresh: a fleet's endpoints change as replicas come and go. */
const ENDPOINT_CACHE_MAX = 4096;

function endpointAddress(endpoint: string): { host: string; port: number } | null {
  let at = ENDPOINT_ADDRESSES.get(endpoint);
  if (at === undefined) {
    if (ENDPOINT_ADDRESSES.size >= ENDPOINT_CACHE_MAX) ENDPOINT_ADDRESSES.clear();
    at = hostPort(endpoint);
    ENDPOINT_ADDRESSES.set(endpoint, at);
  }
  return at;
}

/** performance.now() as epoch ms, which spans take as a start or end time. */
function epochMs(perfMs: number): number {
  return performance.timeOrigin + perfMs;
}

export class RequestSpan implements RequestTracing {
  private readonly span: Span;
  private readonly context: Context;
  private readonly recording: boolean;
  private hold: Span | null = null;
  private attemptSpan: Span | null = null;
  private attemptContext: Context | null = null;
  private attempts = 0;
  private stream: Span | null = null;
  private facts: AnswerFacts | null = null;
  private output: string | undefined;

  private constructor(
    private readonly tracing: GatewayTracing,
    private readonly start: RequestStart,
  ) {
    const { tracer, propagator } = tracing;
    const parent = propagator.extract(ROOT_CONTEXT, start.headers, defaultTextMapGetter);
    const operation = OPERATION[start.endpoint];
    const arrivedAt = epochMs(start.startedAt);
    this.span = tracer.startSpan(
      `${operation} ${start.model.name}`,
      { kind: SpanKind.SERVER, startTime: arrivedAt },
      parent,
    );
    this.recording = this.span.isRecording();
    this.context = trace.setSpan(parent, this.span);
    if (!this.recording) return;
    const attrs: Attributes = {
      [ATTR.operationName]: operation,
      [ATTR.requestModel]: start.parsed.model,
      [ATTR.requestStream]: start.parsed.stream,
      [ATTR.requestId]: start.id,
      [ATTR.endpoint]: start.endpoint,
    };
    const maxTokens = requestedMaxTokens(start.parsed.body);
    if (maxTokens !== undefined) attrs[ATTR.requestMaxTokens] = maxTokens;
    const host = start.headers.host ? hostPort(`http://${start.headers.host}`) : null;
    if (host) {
      attrs[ATTR.serverAddress] = host.host;
      attrs[ATTR.serverPort] = host.port;
    }
    if (tracing.recordContent) {
      const input = inputMessages(start.parsed.body);
      if (input !== undefined) attrs[ATTR.inputMessages] = input;
    }
    this.span.setAttributes(attrs);
    // Admission ran before the router took the request (the body, the key, the checks, the limits): its span is drawn after the fact.
    tracer.startSpan('llmgw.admission', { startTime: arrivedAt }, this.context).end();
  }

  /** The request span of a request the router took; its admission ended now. */
  static start(tracing: GatewayTracing, start: RequestStart): RequestSpan {
    return new RequestSpan(tracing, start);
  }

  /** The trace id when the trace is sampled, for the request log; undefined = not recorded. */
  get traceId(): string | undefined {
    return this.recording ? this.span.spanContext().traceId : undefined;
  }

  /** The request waits in the cold hold for `model` to have a ready replica. */
  holdStarted(model: RoutedModel): void {
    // A trace the sampler dropped gets no child span: only the attempt's context travels, and the request's serves.
    if (!this.recording) return;
    this.hold = this.tracing.tracer.startSpan(
      'llmgw.cold_hold',
      { attributes: { [ATTR.requestModel]: model.name } },
      this.context,
    );
  }

  /** The hold ended: `ready` = a replica is ready now. */
  holdEnded(ready: boolean, heldMs: number): void {
    const hold = this.hold;
    if (!hold) return;
    this.hold = null;
    if (this.recording)
      hold.setAttributes({ [ATTR.heldMs]: Math.round(heldMs), [ATTR.holdEnd]: ready ? 'ready' : 'gave_up' });
    hold.end();
  }

  /** An attempt at `replica` of `model` is about to be sent; its traceparent is what inject() writes. */
  attemptStarted(model: RoutedModel, replica: RouterReplica): void {
    this.attempts++;
    // Unsampled: the engine is sent the request span's context (sampled flag off), and no attempt span is made.
    if (!this.recording) return;
    const attrs: Attributes = {
      [ATTR.operationName]: OPERATION[this.start.endpoint],
      [ATTR.requestModel]: model.name,
      [ATTR.replica]: replica.id,
      [ATTR.attempt]: this.attempts,
    };
    if (replica.engine !== undefined) attrs[ATTR.engine] = replica.engine;
    if (replica.nodes) attrs[ATTR.nodes] = [...replica.nodes];
    const at = endpointAddress(replica.endpoint);
    if (at) {
      attrs[ATTR.serverAddress] = at.host;
      attrs[ATTR.serverPort] = at.port;
    }
    const span = this.tracing.tracer.startSpan(
      'llmgw.attempt',
      { kind: SpanKind.CLIENT, attributes: attrs },
      this.context,
    );
    this.attemptSpan = span;
    this.attemptContext = trace.setSpan(this.context, span);
  }

  /** Writes the attempt's traceparent (and tracestate) into the upstream request's headers. */
  inject(headers: Record<string, string>): void {
    this.tracing.propagator.inject(this.attemptContext ?? this.context, headers, defaultTextMapSetter);
  }

  /** The first byte of the answer is going to the client, `ttftMs` after arrival. */
  firstByte(ttftMs: number): void {
    if (!this.recording) return;
    this.span.addEvent(
      'llmgw.first_token',
      { [ATTR.timeToFirstChunk]: ttftMs / 1000 },
      performance.timeOrigin + performance.now(),
    );
    if (this.start.parsed.stream) this.stream = this.tracing.tracer.startSpan('llmgw.stream', {}, this.context);
  }

  /** The answer ended (whatever its status); `tail` is its end as the relay kept it, `events` the SSE events relayed. */
  answered(tail: () => string, events: number): void {
    if (!this.recording) return;
    const text = tail();
    this.facts = answerFacts(text);
    if (this.tracing.recordContent && !this.start.parsed.stream) this.output = outputMessages(text);
    if (this.stream) this.stream.setAttribute(ATTR.events, events);
  }

  /** The attempt ended as `record` says (the request log's entry: outcome, reason, and the chooser's candidates when it gave them). */
  attemptEnded(record: RequestAttempt | undefined): void {
    const span = this.attemptSpan;
    if (!span) return;
    this.attemptSpan = null;
    this.attemptContext = null;
    if (this.recording && record) {
      if (record.outcome === 'failed') {
        span.setStatus({ code: SpanStatusCode.ERROR, message: record.reason ?? 'failed' });
        span.setAttribute(ATTR.errorType, 'attempt_failed');
        if (record.reason !== undefined) span.setAttribute(ATTR.reason, record.reason);
      }
      const choice = record.choice;
      if (choice) {
        span.setAttributes({
          [ATTR.pickRule]: choice.by,
          [ATTR.candidates]: choice.candidates.map((c) => c.replica),
          [ATTR.scores]: choice.candidates.map((c) => c.load),
        });
        if (choice.ringOwner !== undefined) span.setAttribute(ATTR.ringOwner, choice.ringOwner);
      }
    }
    span.end();
  }

  /**
   * The router is done with the request. Tokens are read from `record` a
   * turn later, once the ledger has settled them from the answer's usage
   * (it does so on the next turn of the event loop too, queued first).
   */
  ended(record: RequestRecord): void {
    this.attemptEnded(undefined);
    this.holdEnded(false, 0);
    setImmediate(() => this.finish(record));
  }

  private finish(r: RequestRecord): void {
    const span = this.span;
    const failed = r.timedOut || r.broken !== undefined || r.status >= 500;
    if (this.recording) {
      const attrs: Attributes = { [ATTR.httpStatus]: r.clientGone ? 499 : r.status, [ATTR.attempts]: this.attempts };
      const answered = r.attempts.find((a) => a.outcome === 'answered');
      if (answered) {
        attrs[ATTR.responseModel] = this.facts?.model ?? answered.model;
        if (answered.model !== r.model) attrs[ATTR.fallback] = answered.model;
      }
      if (this.facts?.id !== undefined) attrs[ATTR.responseId] = this.facts.id;
      if (this.facts?.finishReasons.length) attrs[ATTR.finishReasons] = this.facts.finishReasons;
      if (r.promptTokens !== undefined) attrs[ATTR.inputTokens] = r.promptTokens;
      if (r.completionTokens !== undefined) attrs[ATTR.outputTokens] = r.completionTokens;
      if (r.heldMs !== undefined) attrs[ATTR.heldMs] = Math.round(r.heldMs);
      if (this.output !== undefined) attrs[ATTR.outputMessages] = this.output;
      if (failed || r.failure)
        attrs[ATTR.errorType] = r.failure?.code ?? (r.broken !== undefined ? 'broken' : String(r.status));
      span.setAttributes(attrs);
      if (failed) span.setStatus({ code: SpanStatusCode.ERROR, message: r.broken ?? r.failure?.message ?? '' });
    }
    const end = epochMs(this.start.startedAt) + r.durationMs;
    if (this.stream) {
      if (this.recording && r.broken !== undefined)
        this.stream.setStatus({ code: SpanStatusCode.ERROR, message: r.broken });
      this.stream.end(end);
    }
    span.end(end);
  }
}
