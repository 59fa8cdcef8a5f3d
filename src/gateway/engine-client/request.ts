// A request to an engine as HTTP/1.1 bytes, and what it may hold: the one
// place the engine client writes bytes, so the one place that checks a
// header or a path cannot break the request's framing (a value with a line
// break would add headers of the client's choosing). Apart from the pool,
// which only moves these bytes.

/** One request to the engine. */
export interface EngineRequest {
  readonly path: string;
  readonly method: string;
  /** Names in lower case; host and content-length are the pool's to write. */
  readonly headers: Readonly<Record<string, string>>;
  readonly body: Buffer | string | null;
  /** Time from sending to the response's head; 0 or absent = no limit. */
  readonly headersTimeout?: number;
  /** Silence allowed between reads of the body (time paused by the handler not counted); 0 or absent = no limit. */
  readonly bodyTimeout?: number;
}

/** A failure of the engine or its connection, with undici's code for the same failure so one reader serves both clients. */
export class EngineRequestError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const BAD_VALUE = /[^\t\x20-\x7e\x80-\xff]/;
const BAD_PATH = /[^\u0021-\u00ff]/;
/** Headers the pool writes itself. */
const OWN_HEADERS = new Set(['host', 'content-length', 'connection', 'transfer-encoding', 'keep-alive']);

/** Why `req` cannot be written as HTTP/1.1 (a header value with a line break would inject headers); null = it can. */
export function requestProblem(req: EngineRequest): string | null {
  if (!TOKEN.test(req.method)) return `a method of ${JSON.stringify(req.method)}`;
  if (req.path[0] !== '/' || BAD_PATH.test(req.path)) return `a path of ${JSON.stringify(req.path.slice(0, 80))}`;
  for (const name in req.headers) {
    const value = req.headers[name];
    if (value === undefined) continue;
    if (!TOKEN.test(name)) return `a header name of ${JSON.stringify(name.slice(0, 40))}`;
    if (BAD_VALUE.test(value)) return `a value of header ${name} with characters HTTP forbids`;
  }
  return null;
}

/** The request's bytes, head and body, in one buffer: one write, one syscall. */
export function encodeRequest(req: EngineRequest, hostHeader: string): Buffer {
  const body = req.body === null ? null : typeof req.body === 'string' ? Buffer.from(req.body, 'utf8') : req.body;
  let head = `${req.method} ${req.path} HTTP/1.1\r\nhost: ${hostHeader}\r\n`;
  for (const name in req.headers) {
    const value = req.headers[name];
    if (value === undefined || OWN_HEADERS.has(name)) continue;
    head += `${name}: ${value}\r\n`;
  }
  if (body !== null || req.method === 'POST' || req.method === 'PUT')
    head += `content-length: ${body?.length ?? 0}\r\n`;
  head += '\r\n';
  const headBytes = Buffer.byteLength(head, 'latin1');
  const out = Buffer.allocUnsafe(headBytes + (body?.length ?? 0));
  out.write(head, 0, 'latin1');
  if (body) body.copy(out, headBytes);
  return out;
}
