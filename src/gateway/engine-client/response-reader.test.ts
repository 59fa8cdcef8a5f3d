// The engine client's framing, byte by byte: a proxy that mis-reads a
// chunk boundary cut across two reads relays a corrupt stream (or hangs
// waiting for bytes already read), and only some socket timings show it.
// Here every response is also fed cut at every possible byte.
import type { IncomingHttpHeaders } from 'node:http';
import { describe, expect, it } from 'vitest';
import { MAX_HEAD_BYTES, ResponseFramingError, ResponseReader } from './response-reader.js';

interface Read {
  status: number;
  headers: IncomingHttpHeaders;
  statusText: string;
  body: string;
  trailers: IncomingHttpHeaders | null;
  /** Callbacks in the order they came: h(ead), d(ata), e(nd). */
  order: string;
}

function reader(): { r: ResponseReader; got: Read } {
  const got: Read = { status: 0, headers: {}, statusText: '', body: '', trailers: null, order: '' };
  const r = new ResponseReader({
    head(status, headers, statusText) {
      Object.assign(got, { status, headers, statusText });
      got.order += 'h';
    },
    data(chunk) {
      got.body += chunk.toString('latin1');
      if (!got.order.endsWith('d')) got.order += 'd';
    },
    end(trailers) {
      got.trailers = trailers;
      got.order += 'e';
    },
  });
  return { r, got };
}

/** `bytes` fed in reads cut at `cuts`. */
function read(bytes: string, cuts: number[] = []): { r: ResponseReader; got: Read } {
  const out = reader();
  const buf = Buffer.from(bytes, 'latin1');
  let from = 0;
  for (const cut of [...cuts, buf.length]) {
    if (cut > from) out.r.feed(buf.subarray(from, cut));
    from = Math.max(from, cut);
  }
  return out;
}

/** Reads `bytes` whole, then cut once at every byte and twice at every pair of neighbouring bytes; every way gives the same. */
function readEveryWay(bytes: string): Read {
  const whole = read(bytes).got;
  for (let i = 1; i < bytes.length; i++) {
    expect(read(bytes, [i]).got, `cut at byte ${i}`).toEqual(whole);
    expect(read(bytes, [i, i + 1]).got, `cut at bytes ${i} and ${i + 1}`).toEqual(whole);
  }
  return whole;
}

describe('ResponseReader', () => {
  it('reads a Content-Length body however the reads are cut', () => {
    const got = readEveryWay(
      'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 11\r\n\r\n{"a":"bcd"}',
    );
    expect(got).toMatchObject({ status: 200, statusText: 'OK', body: '{"a":"bcd"}', order: 'hde' });
    expect(got.headers).toEqual({ 'content-type': 'application/json', 'content-length': '11' });
  });

  it('reads a chunked body with extensions and trailers however the reads are cut', () => {
    const got = readEveryWay(
      'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n' +
        '5\r\nhello\r\n' +
        '1;name=value\r\n \r\n' +
        'A\r\n0123456789\r\n' +
        '0\r\nX-Checksum: abc\r\n\r\n',
    );
    expect(got.body).toBe('hello 0123456789');
    expect(got.trailers).toEqual({ 'x-checksum': 'abc' });
    expect(got.order).toBe('hde');
  });

  it('hands on the chunks of one read together, and a lone chunk as a view of its read', () => {
    const views: Buffer[] = [];
    const r = new ResponseReader({ head() {}, data: (c) => views.push(c), end() {} });
    r.feed(Buffer.from('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n3\r\ndef\r\n'));
    expect(views.map(String), 'two chunks of one read, one callback').toEqual(['abcdef']);
    const lone = Buffer.from('3\r\nghi\r\n');
    r.feed(lone);
    expect(views[1]!.buffer, 'not copied').toBe(lone.buffer);
    r.feed(Buffer.from('0\r\n\r\n'));
    expect(views.map(String)).toEqual(['abcdef', 'ghi']);
    expect(r.done).toBe(true);
  });

  it('hands on the body read before a framing error', () => {
    const { r, got } = reader();
    expect(() =>
      r.feed(Buffer.from('HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\nzz\r\n')),
    ).toThrow(ResponseFramingError);
    expect(got.body).toBe('abc');
  });

  it('skips informational heads (100 Continue) and reads the final one', () => {
    const got = readEveryWay('HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\ncontent-length: 2\r\n\r\nok');
    expect(got).toMatchObject({ status: 201, body: 'ok', order: 'hde' });
  });

  it('ends a 204 and a zero-length answer at their heads', () => {
    for (const head of ['HTTP/1.1 204 No Content\r\n\r\n', 'HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n']) {
      const { r, got } = read(head);
      expect(r.done, head).toBe(true);
      expect(got.order).toBe('he');
    }
  });

  it('reads a body without a length to the connection end, and marks the connection as closing', () => {
    const { r, got } = read('HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\nsome bytes');
    expect(r.done).toBe(false);
    expect(r.closes).toBe(true);
    expect(r.eof(), 'the close ends the body').toBe(true);
    expect(got).toMatchObject({ body: 'some bytes', order: 'hde' });
  });

  it('says a response cut short by the close was not whole', () => {
    const { r, got } = read('HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc');
    expect(r.eof()).toBe(false);
    expect(got.order).toBe('hd');
    expect(read('HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nab').r.eof()).toBe(false);
  });

  it('marks the connection as closing on Connection: close and on HTTP/1.0', () => {
    expect(read('HTTP/1.1 200 OK\r\nConnection: close\r\ncontent-length: 0\r\n\r\n').r.closes).toBe(true);
    expect(read('HTTP/1.0 200 OK\r\ncontent-length: 0\r\n\r\n').r.closes).toBe(true);
    expect(read('HTTP/1.1 200 OK\r\nconnection: keep-alive\r\ncontent-length: 0\r\n\r\n').r.closes).toBe(false);
  });

  it('flags bytes after the response, which no request asked for', () => {
    const { r, got } = read('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nokHTTP/1.1 200 OK\r\n');
    expect(got.body).toBe('ok');
    expect(r.extra, 'the connection is not to be reused').toBe(true);
  });

  it('keeps repeated headers: set-cookie as a list, others joined', () => {
    const { got } = read(
      'HTTP/1.1 200 OK\r\nSet-Cookie: a=1\r\nset-cookie: b=2\r\nVary: x\r\nvary: y\r\ncontent-length: 0\r\n\r\n',
    );
    expect(got.headers['set-cookie']).toEqual(['a=1', 'b=2']);
    expect(got.headers.vary).toBe('x, y');
  });

  it('stops calling back once stopped (the request was aborted)', () => {
    const { r, got } = reader();
    r.feed(Buffer.from('HTTP/1.1 200 OK\r\ncontent-length: 6\r\n\r\nabc'));
    r.stop();
    r.feed(Buffer.from('def'));
    expect(got).toMatchObject({ body: 'abc', order: 'hd' });
  });

  it.each([
    ['a status line that is not HTTP/1', 'HTTP/2 200 OK\r\n\r\n'],
    ['a status that is not a number', 'HTTP/1.1 2x0 OK\r\n\r\n'],
    ['a header line without a colon', 'HTTP/1.1 200 OK\r\nbroken\r\n\r\n'],
    ['obsolete line folding', 'HTTP/1.1 200 OK\r\nx-a: 1\r\n  folded\r\n\r\n'],
    ['whitespace before a colon', 'HTTP/1.1 200 OK\r\ncontent-length : 2\r\n\r\nok'],
    ['two different lengths', 'HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-length: 3\r\n\r\nok'],
    ['a negative length', 'HTTP/1.1 200 OK\r\ncontent-length: -1\r\n\r\n'],
    ['a chunk size that is not hex', 'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n'],
    ['a chunk not followed by CRLF', 'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nabX'],
  ])('refuses %s', (_what, bytes) => {
    expect(() => read(bytes)).toThrow(ResponseFramingError);
  });

  it('refuses a head that never ends, once it passes the limit', () => {
    const { r } = reader();
    r.feed(Buffer.from('HTTP/1.1 200 OK\r\n'));
    expect(() => {
      for (let i = 0; i < 100; i++) r.feed(Buffer.from(`x-filler-${i}: ${'y'.repeat(300)}\r\n`));
    }).toThrow(`a head over ${MAX_HEAD_BYTES} bytes`);
  });

  it('refuses a chunk size line that never ends', () => {
    const { r } = reader();
    r.feed(Buffer.from('HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n'));
    expect(() => r.feed(Buffer.from('1'.repeat(2000)))).toThrow(ResponseFramingError);
  });
});
