// One file over HTTP into a partial file, resuming from whatever is already
// on disk. Both https:// sources and the hub's files come through here, so
// that resume has one implementation with one set of rules: ask for
// `Range: bytes=N-` (with If-Range, so a file changed since is sent whole),
// accept the answer only if it is a 206 whose Content-Range starts at N, and
// otherwise start again from zero. Redirects are followed by hand, to drop
// the hub token on a hop to another origin, to refuse a hop to plain http,
// and to refuse a hop into the agent's own network (address-guard.ts).
import { createHash, type Hash } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { open, stat, truncate } from 'node:fs/promises';
import { Transform, type Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { type Agent, request, type Dispatcher } from 'undici';
import { LlmgwError } from '../../errors/index.js';
import {
  type AddressClass,
  addressesOf,
  forbiddenHop,
  type HostLookup,
  pinnedAgent,
  refusedAddress,
  sourceClasses,
  systemLookup,
} from './address-guard.js';

const MAX_REDIRECTS = 5;
const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);

/** Opens the partial file for writing: 'w' from zero, 'a' to append after a resume. */
export type WriteStreamFactory = (path: string, flags: 'w' | 'a') => Writable;

export const defaultWriteStream: WriteStreamFactory = (path, flags) => createWriteStream(path, { flags });

export interface HttpContext {
  /** Absent: undici's global dispatcher. */
  dispatcher: Dispatcher | undefined;
  allowHttp: boolean;
  signal: AbortSignal;
  /** Resolves a redirect's host to check where it leads. Absent: the system resolver. Tests inject one. */
  lookup?: HostLookup;
  createWriteStream: WriteStreamFactory;
}

export interface HttpFileRequest {
  url: string;
  /** For messages: the source without secrets (no query string, no credentials). */
  label: string;
  /** 'the hub' or 'the server', for messages. */
  peer: string;
  /** Sent only while the request stays on `origin`; dropped on a redirect elsewhere. Never logged. */
  authorization?: { origin: string; value: string };
  /** Hints for a 401/403 message: what to set to get in. */
  unauthorizedHint: string;
  filePath: string;
  /** Known size (from a listing); absent: learned from the response. */
  expectedBytes: number | undefined;
  /** The validator (strong ETag or Last-Modified) of the response that began this partial; absent: none recorded. */
  validator: string | undefined;
  /** Called before any body byte is written, with the size and validator of what is being written, so a later run can resume it. */
  onStart: (info: { totalBytes: number | undefined; validator: string | undefined }) => Promise<void>;
  /** Bytes added to the file; negative when a partial is discarded to start again. */
  onBytes: (bytes: number) => void;
}

export interface HttpFileResult {
  sizeBytes: number;
  /** Lowercase hex of the whole file. */
  sha256: string;
}

/** The size of a partial file, 0 when there is none. Call before `downloadFile` to count resumed bytes. */
export async function partialBytes(path: string): Promise<number> {
  try {
    return (await stat(path)).size;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 0;
    throw err;
  }
}

/**
 * Brings `req.filePath` to the whole file. The bytes already there must have
 * been counted by the caller (see `partialBytes`); this reports only changes.
 */
export async function downloadFile(req: HttpFileRequest, ctx: HttpContext): Promise<HttpFileResult> {
  let offset = await partialBytes(req.filePath);
  if (req.expectedBytes !== undefined && offset > req.expectedBytes) offset = await restart(req, offset);
  if (req.expectedBytes !== undefined && offset === req.expectedBytes) {
    // Complete already (a run that stopped before the rest of the repository), or an empty file, which needs no request.
    await (await open(req.filePath, 'a')).close();
    return { sizeBytes: offset, sha256: await hashFile(req.filePath) };
  }

  // Two rounds at most: a resume the server does not honour becomes one download from zero.
  for (let round = 0; round < 2; round++) {
    const hash = createHash('sha256');
    if (offset > 0) await hashInto(hash, req.filePath);
    const headers: Record<string, string> = { 'accept-encoding': 'identity' };
    if (offset > 0) {
      headers.range = `bytes=${offset}-`;
      if (req.validator) headers['if-range'] = req.validator;
    }
    const res = await requestFollowingRedirects(req, headers, ctx);

    let totalBytes: number | undefined;
    let appending = false;
    if (offset > 0 && res.statusCode === 206) {
      const range = parseContentRange(header(res, 'content-range'));
      if (
        !range ||
        range.start !== offset ||
        (req.expectedBytes !== undefined && range.totalBytes !== req.expectedBytes)
      ) {
        // The server sent some other part of the file, or of another file: start again rather than splice.
        await res.body.dump();
        offset = await restart(req, offset);
        continue;
      }
      totalBytes = range.totalBytes;
      appending = true;
    } else if (offset > 0 && res.statusCode === 416) {
      const total = parseUnsatisfiedRange(header(res, 'content-range'));
      await res.body.dump();
      if (total === offset) return { sizeBytes: offset, sha256: hash.digest('hex') };
      offset = await restart(req, offset);
      continue;
    } else if (res.statusCode === 200) {
      // Either a fresh download, or the server ignored Range or If-Range said the file changed: it is sending it whole.
      if (offset > 0) offset = await restart(req, offset, false);
      const length = header(res, 'content-length');
      totalBytes = length !== undefined && /^\d+$/.test(length) ? Number(length) : undefined;
    } else {
      await res.body.dump();
      throw statusError(req, res.statusCode);
    }

    if (req.expectedBytes !== undefined && totalBytes !== undefined && totalBytes !== req.expectedBytes) {
      await res.body.dump();
      throw new LlmgwError(
        'LLMGW_FETCH_VERIFY_FAILED',
        `${req.label}: ${req.peer} sends ${totalBytes} bytes where the listing says ${req.expectedBytes}`,
        { context: { totalBytes, expectedBytes: req.expectedBytes } },
      );
    }
    const fresh = appending ? hash : createHash('sha256');
    await req.onStart({
      totalBytes: totalBytes ?? req.expectedBytes,
      validator: appending ? req.validator : validatorOf(res),
    });

    let written = 0;
    const counter = new Transform({
      transform(chunk: Buffer, _encoding, callback) {
        fresh.update(chunk);
        written += chunk.length;
        req.onBytes(chunk.length);
        callback(null, chunk);
      },
    });
    await pipeline(res.body, counter, ctx.createWriteStream(req.filePath, appending ? 'a' : 'w'), {
      signal: ctx.signal,
    });
    await syncFile(req.filePath);

    const sizeBytes = (appending ? offset : 0) + written;
    if (totalBytes !== undefined && sizeBytes !== totalBytes) {
      throw new LlmgwError(
        'LLMGW_FETCH_FAILED',
        `${req.label}: the connection ended after ${sizeBytes} of ${totalBytes} bytes; the partial download is kept and the next fetch resumes it`,
        { context: { bytesDone: sizeBytes, totalBytes } },
      );
    }
    return { sizeBytes, sha256: fresh.digest('hex') };
  }
  throw new LlmgwError(
    'LLMGW_FETCH_FAILED',
    `${req.label}: ${req.peer} answered a resume with the wrong range twice; giving up`,
  );
}

/** Empties the partial file and takes its bytes back out of the progress count; returns the new offset, 0. */
async function restart(req: HttpFileRequest, offset: number, truncateFile = true): Promise<number> {
  if (truncateFile) await truncate(req.filePath, 0);
  req.onBytes(-offset);
  return 0;
}

async function requestFollowingRedirects(
  req: HttpFileRequest,
  headers: Record<string, string>,
  ctx: HttpContext,
): Promise<Dispatcher.ResponseData> {
  const source = new URL(req.url);
  let url = source;
  let allowed: Set<AddressClass> | null = null;
  for (let hop = 0; hop <= MAX_REDIRECTS; hop++) {
    if (url.protocol === 'http:' && !ctx.allowHttp) {
      throw new LlmgwError(
        'LLMGW_FETCH_FAILED',
        `${req.label}: ${req.peer} redirected to plain http (${url.origin}); refusing to fetch weights without TLS`,
      );
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') {
      throw new LlmgwError(
        'LLMGW_FETCH_FAILED',
        `${req.label}: ${req.peer} redirected to ${url.protocol} URL; only http(s) is followed`,
      );
    }
    const sent = { ...headers };
    if (req.authorization && url.origin === req.authorization.origin) sent.authorization = req.authorization.value;
    let dispatcher = ctx.dispatcher;
    let pinned: Agent | null = null;
    if (hop > 0) {
      const lookup = ctx.lookup ?? systemLookup;
      allowed ??= sourceClasses(await resolved(req, source, lookup));
      const addresses = await resolved(req, url, lookup);
      const bad = forbiddenHop(addresses, allowed);
      if (bad) {
        throw new LlmgwError(
          'LLMGW_FETCH_FAILED',
          `${req.label}: ${req.peer} redirected to ${url.origin}, which reaches ${refusedAddress(bad)}; from this source a redirect is followed only to public addresses${others(allowed)}. Use a source URL that serves the weights without such a redirect`,
          { context: { redirectOrigin: url.origin, address: bad.address, addressClass: bad.cls } },
        );
      }
      pinned = pinnedAgent(addresses);
      dispatcher = pinned;
    }
    let res: Dispatcher.ResponseData;
    try {
      res = await request(url, {
        method: 'GET',
        headers: sent,
        signal: ctx.signal,
        ...(dispatcher ? { dispatcher } : {}),
      });
    } catch (err) {
      if (pinned) void pinned.destroy();
      throw err;
    }
    // Closing waits for the request in flight, body included, so the caller can still read it.
    if (pinned) void pinned.close();
    const location = header(res, 'location');
    if (!REDIRECT_STATUSES.has(res.statusCode) || location === undefined) return res;
    await res.body.dump();
    url = new URL(location, url);
  }
  throw new LlmgwError('LLMGW_FETCH_FAILED', `${req.label}: more than ${MAX_REDIRECTS} redirects; check the URL`);
}

/** The classes besides public that a source's redirects may reach, for a message: '' when none. */
function others(classes: ReadonlySet<AddressClass>): string {
  const rest = [...classes].filter((c) => c !== 'public');
  return rest.length ? ` or ${rest.join(' or ')} ones like the source's own` : '';
}

/** A URL's addresses, or an error naming the host that could not be resolved. */
async function resolved(req: HttpFileRequest, url: URL, lookup: HostLookup): Promise<string[]> {
  try {
    return await addressesOf(url, lookup);
  } catch (err) {
    const why = (err as { code?: string }).code ?? (err as Error).message;
    throw new LlmgwError(
      'LLMGW_FETCH_FAILED',
      `${req.label}: could not resolve ${url.hostname} (${why}) to check where a redirect leads`,
      { cause: err },
    );
  }
}

function statusError(req: HttpFileRequest, status: number): LlmgwError {
  const context = { status };
  if (status === 404 || status === 410) {
    return new LlmgwError('LLMGW_FETCH_NOT_FOUND', `${req.label}: ${req.peer} has no such file (${status})`, {
      context,
    });
  }
  if (status === 401 || status === 403) {
    return new LlmgwError(
      'LLMGW_FETCH_UNAUTHORIZED',
      `${req.label}: ${req.peer} refused access (${status}); ${req.unauthorizedHint}`,
      { context },
    );
  }
  return new LlmgwError('LLMGW_FETCH_FAILED', `${req.label}: ${req.peer} answered ${status}`, { context });
}

function header(res: Dispatcher.ResponseData, name: string): string | undefined {
  const value = res.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** A strong ETag, else Last-Modified: what If-Range accepts. Weak ETags cannot be used for ranges. */
function validatorOf(res: Dispatcher.ResponseData): string | undefined {
  const etag = header(res, 'etag');
  if (etag && !etag.startsWith('W/')) return etag;
  return header(res, 'last-modified');
}

/** `bytes START-END/TOTAL` → start and total; null for anything else (including an unknown total). */
export function parseContentRange(value: string | undefined): { start: number; totalBytes: number } | null {
  const match = value ? /^bytes (\d+)-(\d+)\/(\d+)$/.exec(value.trim()) : null;
  if (!match) return null;
  const start = Number(match[1]);
  const end = Number(match[2]);
  const totalBytes = Number(match[3]);
  if (end < start || end >= totalBytes) return null;
  return { start, totalBytes };
}

/** `bytes *\/TOTAL` (a 416's answer) → total; null otherwise. */
function parseUnsatisfiedRange(value: string | undefined): number | null {
  const match = value ? /^bytes \*\/(\d+)$/.exec(value.trim()) : null;
  return match ? Number(match[1]) : null;
}

export async function hashFile(path: string, algorithm = 'sha256', prefix?: string): Promise<string> {
  const hash = createHash(algorithm);
  if (prefix !== undefined) hash.update(prefix);
  await hashInto(hash, path);
  return hash.digest('hex');
}

async function hashInto(hash: Hash, path: string): Promise<void> {
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
}

/** Flushes a finished file, so that a manifest written after it never describes bytes a crash lost. */
async function syncFile(path: string): Promise<void> {
  const handle = await open(path, 'r+');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}
