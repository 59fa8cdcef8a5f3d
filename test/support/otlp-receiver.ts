// A test OTLP/HTTP receiver on loopback: it takes what an OpenTelemetry
// exporter POSTs to /v1/traces (an ExportTraceServiceRequest in protobuf),
// decodes it into plain spans and answers 200 with an empty
// ExportTraceServiceResponse, as a collector would. The decoding reads the
// wire with OpenTelemetry's own ProtobufReader from @opentelemetry/otlp-transformer:
// that package serialises requests and deserialises responses, but ships no
// request deserialiser, so the field walk of opentelemetry-proto's
// trace.proto is written here (the numbers are in each reader's comment).
// otlp-receiver.test.ts checks it against the package's own serializer.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ProtobufReader } from '@opentelemetry/otlp-transformer/build/src/common/protobuf/protobuf-reader.js';

export type AttributeValue = string | number | boolean | AttributeValue[] | null;

export interface ReceivedEvent {
  name: string;
  timeUnixNano: bigint;
  attributes: Record<string, AttributeValue>;
}

export interface ReceivedSpan {
  /** 32 hex digits. */
  traceId: string;
  /** 16 hex digits. */
  spanId: string;
  /** '' = a root span. */
  parentSpanId: string;
  name: string;
  /** OTLP's SpanKind: 1 internal, 2 server, 3 client, 4 producer, 5 consumer. */
  kind: number;
  startUnixNano: bigint;
  endUnixNano: bigint;
  attributes: Record<string, AttributeValue>;
  events: ReceivedEvent[];
  /** 0 unset, 1 ok, 2 error. */
  statusCode: number;
  statusMessage: string;
  /** The resource's attributes (service.name, service.instance.id, …). */
  resource: Record<string, AttributeValue>;
}

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

/** A fixed64 at the reader's position, as ProtobufReader reads none: little-endian, from the message's bytes. */
function fixed64(buf: Uint8Array, r: ProtobufReader): DataView {
  const view = new DataView(buf.buffer, buf.byteOffset + r.pos, 8);
  r.pos += 8;
  return view;
}

/** A message's fields, each handled by `on` (which returns false for one it does not read). */
function walk(
  buf: Uint8Array,
  on: (field: number, wireType: number, r: ProtobufReader, buf: Uint8Array) => boolean,
): void {
  const r = new ProtobufReader(buf);
  while (!r.isAtEnd()) {
    const { fieldNumber, wireType } = r.readTag();
    if (!on(fieldNumber, wireType, r, buf)) r.skip(wireType);
  }
}

/** AnyValue: 1 string, 2 bool, 3 int64, 4 double, 5 ArrayValue (1 repeated AnyValue), 7 bytes. */
function anyValue(buf: Uint8Array): AttributeValue {
  let value: AttributeValue = null;
  walk(buf, (f, w, r, b) => {
    if (f === 1 && w === 2) value = r.readString();
    else if (f === 2 && w === 0) value = r.readVarint() !== 0;
    else if (f === 3 && w === 0) value = r.readVarint();
    else if (f === 4 && w === 1) value = fixed64(b, r).getFloat64(0, true);
    else if (f === 5 && w === 2) {
      const items: AttributeValue[] = [];
      walk(r.readBytes(), (g, x, rr) => (g === 1 && x === 2 ? (items.push(anyValue(rr.readBytes())), true) : false));
      value = items;
    } else if (f === 7 && w === 2) value = hex(r.readBytes());
    else return false;
    return true;
  });
  return value;
}

/** KeyValue: 1 key, 2 value (AnyValue). */
function keyValue(buf: Uint8Array, into: Record<string, AttributeValue>): void {
  let key = '';
  let value: AttributeValue = null;
  walk(buf, (f, w, r) => {
    if (f === 1 && w === 2) key = r.readString();
    else if (f === 2 && w === 2) value = anyValue(r.readBytes());
    else return false;
    return true;
  });
  into[key] = value;
}

/** Span.Event: 1 time_unix_nano (fixed64), 2 name, 3 attributes. */
function event(buf: Uint8Array): ReceivedEvent {
  const e: ReceivedEvent = { name: '', timeUnixNano: 0n, attributes: {} };
  walk(buf, (f, w, r, b) => {
    if (f === 1 && w === 1) e.timeUnixNano = fixed64(b, r).getBigUint64(0, true);
    else if (f === 2 && w === 2) e.name = r.readString();
    else if (f === 3 && w === 2) keyValue(r.readBytes(), e.attributes);
    else return false;
    return true;
  });
  return e;
}

/**
 * Span: 1 trace_id, 2 span_id, 4 parent_span_id, 5 name, 6 kind, 7/8 start
 * and end (fixed64), 9 attributes, 11 events, 15 status (2 message, 3 code).
 */
function span(buf: Uint8Array, resource: Record<string, AttributeValue>): ReceivedSpan {
  const s: ReceivedSpan = {
    traceId: '',
    spanId: '',
    parentSpanId: '',
    name: '',
    kind: 0,
    startUnixNano: 0n,
    endUnixNano: 0n,
    attributes: {},
    events: [],
    statusCode: 0,
    statusMessage: '',
    resource,
  };
  walk(buf, (f, w, r, b) => {
    if (f === 1 && w === 2) s.traceId = hex(r.readBytes());
    else if (f === 2 && w === 2) s.spanId = hex(r.readBytes());
    else if (f === 4 && w === 2) s.parentSpanId = hex(r.readBytes());
    else if (f === 5 && w === 2) s.name = r.readString();
    else if (f === 6 && w === 0) s.kind = r.readVarint();
    else if (f === 7 && w === 1) s.startUnixNano = fixed64(b, r).getBigUint64(0, true);
    else if (f === 8 && w === 1) s.endUnixNano = fixed64(b, r).getBigUint64(0, true);
    else if (f === 9 && w === 2) keyValue(r.readBytes(), s.attributes);
    else if (f === 11 && w === 2) s.events.push(event(r.readBytes()));
    else if (f === 15 && w === 2) {
      walk(r.readBytes(), (g, x, rr) => {
        if (g === 2 && x === 2) s.statusMessage = rr.readString();
        else if (g === 3 && x === 0) s.statusCode = rr.readVarint();
        else return false;
        return true;
      });
    } else return false;
    return true;
  });
  return s;
}

/**
 * ExportTraceServiceRequest: 1 resource_spans; ResourceSpans: 1 resource
 * (1 attributes), 2 scope_spans; ScopeSpans: 2 spans.
 */
export function decodeExportTraceRequest(buf: Uint8Array): ReceivedSpan[] {
  const out: ReceivedSpan[] = [];
  walk(buf, (f, w, r) => {
    if (f !== 1 || w !== 2) return false;
    const resourceSpans = r.readBytes();
    const resource: Record<string, AttributeValue> = {};
    const scopes: Uint8Array[] = [];
    walk(resourceSpans, (g, x, rr) => {
      if (g === 1 && x === 2) {
        walk(rr.readBytes(), (h, y, r3) => (h === 1 && y === 2 ? (keyValue(r3.readBytes(), resource), true) : false));
      } else if (g === 2 && x === 2) scopes.push(rr.readBytes());
      else return false;
      return true;
    });
    for (const scope of scopes) {
      walk(scope, (g, x, rr) => (g === 2 && x === 2 ? (out.push(span(rr.readBytes(), resource)), true) : false));
    }
    return true;
  });
  return out;
}

export interface OtlpReceiver {
  /** The base endpoint to configure (http://127.0.0.1:PORT); exporters post to /v1/traces under it. */
  readonly url: string;
  /** Every span received so far, in arrival order. */
  readonly spans: ReceivedSpan[];
  /** Requests that were not OTLP protobuf on /v1/traces, as "METHOD path content-type". */
  readonly refused: string[];
  close(): Promise<void>;
}

/** Starts the receiver on 127.0.0.1 and a free port. */
export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const refused: string[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (
        req.method !== 'POST' ||
        req.url !== '/v1/traces' ||
        req.headers['content-type'] !== 'application/x-protobuf'
      ) {
        refused.push(`${req.method} ${req.url} ${req.headers['content-type']}`);
        res.writeHead(404).end();
        return;
      }
      spans.push(...decodeExportTraceRequest(Buffer.concat(chunks)));
      res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    spans,
    refused,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
