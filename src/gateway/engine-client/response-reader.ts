// An HTTP/1.1 response read from a socket's bytes as they come: the status
// and headers, then the body framed by Content-Length, by chunked transfer
// coding, or by the connection's end. Apart from the connection so that the
// framing rules, where a proxy goes wrong (a chunk split across reads, a
// size line cut in two, trailers), are tested byte by byte without sockets.
// The body is handed on as views of the socket's own buffers, and the
// chunks of one read together: an engine's stream read in one go holds
// dozens of one-token chunks, and a callback per chunk cost more than the
// rest of the read (the relay gathers them into one write anyway).
import type { IncomingHttpHeaders } from 'node:http';

/** Where a response's parts go, in order: one head, any number of data, one end. */
export interface ResponseSink {
  head(status: number, headers: IncomingHttpHeaders, statusText: string): void;
  data(chunk: Buffer): void;
  end(trailers: IncomingHttpHeaders): void;
}

/** The engine broke HTTP/1.1's framing: the connection cannot be trusted for another request. */
export class ResponseFramingError extends Error {
  readonly code = 'UND_ERR_SOCKET';
  constructor(what: string) {
    super(`the engine's response broke HTTP/1.1 framing: ${what}`);
  }
}

/** The head (status line and headers) grew past the limit: undici's and Node's default, 16 KiB. */
export const MAX_HEAD_BYTES = 16 * 1024;
/** A chunk-size line longer than this is no size line (hex digits and a short extension). */
const MAX_SIZE_LINE_BYTES = 1024;

const HEAD = 0;
const LENGTH = 1;
const CHUNK_SIZE = 2;
const CHUNK_DATA = 3;
const CHUNK_CR = 4;
const CHUNK_LF = 5;
const TRAILERS = 6;
const UNTIL_CLOSE = 7;
const DONE = 8;

const CRLF_CRLF = Buffer.from('\r\n\r\n');

export class ResponseReader {
  private state = HEAD;
  /** Head bytes of earlier reads while the head is incomplete; null = none held. */
  private partialHead: Buffer | null = null;
  /** Body bytes still to come (LENGTH), or of the current chunk (CHUNK_DATA). */
  private remaining = 0;
  /** A size or trailer line cut across reads. */
  private line = '';
  /** Chunk data of the read being fed, handed on at its end (or at the response's end) in one callback. */
  private batch: Buffer[] = [];
  /** Trailer lines read so far. */
  private trailerLines: string[] = [];
  private stopped = false;
  /** The response's status, once its head is read (1xx heads are skipped); 0 = not yet. */
  status = 0;
  /** The engine will close the connection after this response (or gave no length): it is not reused. */
  closes = false;
  /** Bytes came after the response's end, which no request asked for: the connection is not reused. */
  extra = false;

  constructor(private readonly sink: ResponseSink) {}

  /** The whole response was read. */
  get done(): boolean {
    return this.state === DONE;
  }

  /** Whether anything of the response (a byte of its head) arrived. */
  get begun(): boolean {
    return this.status !== 0 || this.partialHead !== null;
  }

  /** No more callbacks, whatever arrives (the request was aborted). */
  stop(): void {
    this.stopped = true;
  }

  /** Reads one socket read; throws ResponseFramingError on bytes that are not HTTP/1.1 (after handing on the body before them). */
  feed(buf: Buffer): void {
    try {
      this.read(buf);
    } finally {
      this.flushBatch();
    }
  }

  private read(buf: Buffer): void {
    let at = 0;
    while (at < buf.length && !this.stopped) {
      switch (this.state) {
        case HEAD: {
          if (this.partialHead) {
            buf = Buffer.concat([this.partialHead, buf.subarray(at)]);
            at = 0;
            this.partialHead = null;
          }
          const end = buf.indexOf(CRLF_CRLF, at);
          if (end === -1) {
            if (buf.length - at > MAX_HEAD_BYTES) throw new ResponseFramingError(`a head over ${MAX_HEAD_BYTES} bytes`);
            this.partialHead = buf.subarray(at);
            return;
          }
          if (end - at > MAX_HEAD_BYTES) throw new ResponseFramingError(`a head over ${MAX_HEAD_BYTES} bytes`);
          this.readHead(buf.toString('latin1', at, end));
          at = end + 4;
          break;
        }
        case LENGTH: {
          const n = Math.min(this.remaining, buf.length - at);
          this.remaining -= n;
          this.sink.data(at === 0 && n === buf.length ? buf : buf.subarray(at, at + n));
          at += n;
          if (this.remaining === 0) this.finish();
          break;
        }
        case CHUNK_SIZE: {
          const lf = buf.indexOf(0x0a, at);
          if (lf === -1) {
            this.line += buf.toString('latin1', at, buf.length);
            if (this.line.length > MAX_SIZE_LINE_BYTES) throw new ResponseFramingError('a chunk size line too long');
            return;
          }
          const text = this.line + buf.toString('latin1', at, lf);
          this.line = '';
          at = lf + 1;
          const size = chunkSize(text);
          if (size === 0) this.state = TRAILERS;
          else {
            this.remaining = size;
            this.state = CHUNK_DATA;
          }
          break;
        }
        case CHUNK_DATA: {
          const n = Math.min(this.remaining, buf.length - at);
          this.remaining -= n;
          this.batch.push(at === 0 && n === buf.length ? buf : buf.subarray(at, at + n));
          at += n;
          if (this.remaining === 0) this.state = CHUNK_CR;
          break;
        }
        case CHUNK_CR:
          if (buf[at] !== 0x0d) throw new ResponseFramingError('a chunk not followed by CRLF');
          at++;
          this.state = CHUNK_LF;
          break;
        case CHUNK_LF:
          if (buf[at] !== 0x0a) throw new ResponseFramingError('a chunk not followed by CRLF');
          at++;
          this.state = CHUNK_SIZE;
          break;
        case TRAILERS: {
          const lf = buf.indexOf(0x0a, at);
          if (lf === -1) {
            this.line += buf.toString('latin1', at, buf.length);
            if (this.line.length > MAX_HEAD_BYTES)
              throw new ResponseFramingError(`trailers over ${MAX_HEAD_BYTES} bytes`);
            return;
          }
          const text = stripCr(this.line + buf.toString('latin1', at, lf));
          this.line = '';
          at = lf + 1;
          if (text === '') this.finish(parseFields(this.trailerLines, 0));
          else this.trailerLines.push(text);
          break;
        }
        case UNTIL_CLOSE:
          this.sink.data(at === 0 ? buf : buf.subarray(at));
          return;
        default:
          // DONE: a response nobody asked for, or garbage; the connection is not reused.
          this.extra = true;
          return;
      }
    }
  }

  /**
   * The connection ended. True when that ends the response (a body framed
   * by the close); false when the response was cut short.
   */
  eof(): boolean {
    if (this.state === UNTIL_CLOSE && !this.stopped) {
      this.finish();
      return true;
    }
    return this.state === DONE;
  }

  private readHead(text: string): void {
    const lines = text.split('\r\n');
    const statusLine = lines[0]!;
    // "HTTP/1.1 200 OK": the reason phrase may be empty or absent.
    if (!statusLine.startsWith('HTTP/1.') || statusLine.length < 12 || statusLine[8] !== ' ')
      throw new ResponseFramingError(`a status line of ${JSON.stringify(statusLine.slice(0, 40))}`);
    const status = Number(statusLine.slice(9, 12));
    if (!Number.isInteger(status) || status < 100 || status > 999)
      throw new ResponseFramingError(`a status line of ${JSON.stringify(statusLine.slice(0, 40))}`);
    // 100 Continue, 103 Early Hints: informational, the real head follows.
    if (status < 200) return;
    const headers = parseFields(lines, 1);
    this.status = status;
    if (statusLine[7] === '0') this.closes = true;
    const connection = headers.connection;
    if (typeof connection === 'string' && /(^|,)\s*close\s*(,|$)/i.test(connection)) this.closes = true;
    const te = headers['transfer-encoding'];
    const cl = headers['content-length'];
    if (status === 204 || status === 304) this.state = DONE;
    else if (te !== undefined) {
      if (!/(^|,)\s*chunked\s*$/i.test(String(te))) {
        // A coding not ending in chunked has no framing but the close.
        this.closes = true;
        this.state = UNTIL_CLOSE;
      } else this.state = CHUNK_SIZE;
    } else if (cl !== undefined) {
      const length = contentLength(cl);
      if (length === 0) this.state = DONE;
      else {
        this.remaining = length;
        this.state = LENGTH;
      }
    } else {
      this.closes = true;
      this.state = UNTIL_CLOSE;
    }
    this.sink.head(status, headers, statusLine.slice(13));
    if (this.state === DONE && !this.stopped) this.sink.end({});
  }

  private flushBatch(): void {
    const batch = this.batch;
    if (batch.length === 0) return;
    this.batch = [];
    if (!this.stopped) this.sink.data(batch.length === 1 ? batch[0]! : Buffer.concat(batch));
  }

  private finish(trailers: IncomingHttpHeaders = {}): void {
    this.flushBatch();
    this.state = DONE;
    if (!this.stopped) this.sink.end(trailers);
  }
}

/** `name: value` lines from `from` on, names lower-cased; a repeated name's values gathered in an array (set-cookie) or joined. */
function parseFields(lines: readonly string[], from: number): IncomingHttpHeaders {
  const fields: IncomingHttpHeaders = {};
  for (let i = from; i < lines.length; i++) {
    const line = lines[i]!;
    const colon = line.indexOf(':');
    // Obsolete line folding (a line opening with whitespace) and nameless lines are refused, as llhttp refuses them.
    if (colon <= 0 || line.charCodeAt(0) === 0x20 || line.charCodeAt(0) === 0x09)
      throw new ResponseFramingError(`a header line of ${JSON.stringify(line.slice(0, 40))}`);
    const name = line.slice(0, colon).toLowerCase();
    if (name.charCodeAt(name.length - 1) === 0x20) throw new ResponseFramingError(`whitespace before a header's colon`);
    const value = line.slice(colon + 1).trim();
    const had = fields[name];
    if (had === undefined) fields[name] = name === 'set-cookie' ? [value] : value;
    else if (Array.isArray(had)) had.push(value);
    else fields[name] = `${had}, ${value}`;
  }
  return fields;
}

/** A Content-Length's value; two different ones (or a bad one) cannot frame a body. */
function contentLength(value: string | string[]): number {
  const text = String(value);
  const parts = text.split(',');
  const first = parts[0]!.trim();
  if (!/^\d{1,15}$/.test(first) || parts.some((p) => p.trim() !== first))
    throw new ResponseFramingError(`a Content-Length of ${JSON.stringify(text.slice(0, 40))}`);
  return Number(first);
}

/** A chunk-size line's size: hex digits, then an extension after `;` that is ignored. */
function chunkSize(line: string): number {
  const text = stripCr(line);
  const semi = text.indexOf(';');
  const hex = (semi === -1 ? text : text.slice(0, semi)).trimEnd();
  if (!/^[0-9a-fA-F]{1,12}$/.test(hex))
    throw new ResponseFramingError(`a chunk size of ${JSON.stringify(hex.slice(0, 20))}`);
  return parseInt(hex, 16);
}

function stripCr(line: string): string {
  return line.charCodeAt(line.length - 1) === 0x0d ? line.slice(0, -1) : line;
}
