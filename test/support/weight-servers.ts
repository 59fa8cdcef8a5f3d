// Loopback servers for the fetch tests: a plain file server that honours
// Range and If-Range and can cut a response halfway, and a stand-in for the
// Hugging Face endpoints @huggingface/hub calls (model info by revision, tree,
// paths-info, resolve). Used only by tests; they listen on 127.0.0.1 port 0
// and record every request so a test can assert what was asked.
import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface SeenRequest {
  method: string;
  path: string;
  range: string | undefined;
  ifRange: string | undefined;
  authorization: string | undefined;
}

export interface ServeOptions {
  /** Sends this many body bytes, then destroys the socket. Absent: sends it all. */
  cutAfterBytes?: number;
  /** Answers 200 with the whole file even when asked for a range. */
  ignoreRange?: boolean;
  etag: string;
  extraHeaders?: Record<string, string>;
}

/** Answers a GET for `content` the way a CDN does: 206 for ranges, 416 past the end, 200 when If-Range no longer matches. */
export function serveBytes(req: IncomingMessage, res: ServerResponse, content: Buffer, options: ServeOptions): void {
  const headers: Record<string, string> = {
    'content-type': 'application/octet-stream',
    etag: options.etag,
    'accept-ranges': 'bytes',
    ...options.extraHeaders,
  };
  const range = req.headers.range;
  const ifRange = req.headers['if-range'];
  let start = 0;
  let end = content.length - 1;
  let status = 200;
  if (range && !options.ignoreRange && (ifRange === undefined || ifRange === options.etag)) {
    const match = /^bytes=(\d+)-(\d*)$/.exec(range);
    if (match) {
      start = Number(match[1]);
      if (match[2]) end = Math.min(Number(match[2]), content.length - 1);
      if (start >= content.length) {
        res.writeHead(416, { ...headers, 'content-range': `bytes */${content.length}` }).end();
        return;
      }
      status = 206;
      headers['content-range'] = `bytes ${start}-${end}/${content.length}`;
    }
  }
  const body = content.subarray(start, end + 1);
  headers['content-length'] = String(body.length);
  res.writeHead(status, headers);
  if (options.cutAfterBytes !== undefined && options.cutAfterBytes < body.length) {
    res.write(body.subarray(0, options.cutAfterBytes), () => res.destroy());
    return;
  }
  res.end(body);
}

abstract class LoopbackServer {
  readonly requests: SeenRequest[] = [];
  #server: Server | null = null;
  #url = '';

  get url(): string {
    return this.#url;
  }

  async listen(): Promise<this> {
    const server = createServer((req, res) => {
      const path = decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname);
      this.requests.push({
        method: req.method ?? 'GET',
        path,
        range: req.headers.range,
        ifRange: req.headers['if-range'] as string | undefined,
        authorization: req.headers.authorization,
      });
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => this.handle(req, res, path, Buffer.concat(chunks)));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    this.#server = server;
    this.#url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    return this;
  }

  async close(): Promise<void> {
    const server = this.#server;
    if (!server) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  protected abstract handle(req: IncomingMessage, res: ServerResponse, path: string, body: Buffer): void;
}

/** Serves `files` by path; `cutFirst` cuts the first GET of each path after that many bytes. */
export class FileServer extends LoopbackServer {
  readonly files = new Map<string, Buffer>();
  cutFirst: number | undefined;
  ignoreRange = false;
  /** Replies with this status for every request instead of the file. Absent: serve. */
  forceStatus: number | undefined;
  /** Holds every answer until it settles, so a test can act while a download is under way. Absent: answer at once. */
  gate: Promise<void> | undefined;
  readonly #served = new Set<string>();

  protected handle(req: IncomingMessage, res: ServerResponse, path: string): void {
    if (this.gate) {
      void this.gate.then(() => this.#answer(req, res, path));
      return;
    }
    this.#answer(req, res, path);
  }

  #answer(req: IncomingMessage, res: ServerResponse, path: string): void {
    if (this.forceStatus !== undefined) {
      res.writeHead(this.forceStatus).end();
      return;
    }
    const content = this.files.get(path);
    if (!content) {
      res.writeHead(404).end('no such file');
      return;
    }
    const first = !this.#served.has(path);
    this.#served.add(path);
    serveBytes(req, res, content, {
      etag: `"${sha256(content)}"`,
      ignoreRange: this.ignoreRange,
      ...(first && this.cutFirst !== undefined ? { cutAfterBytes: this.cutFirst } : {}),
    });
  }
}

export interface HubRepoFixture {
  /** "org/name". */
  id: string;
  /** 40 hex digits. */
  commit: string;
  /** Path in the repository → bytes. Names ending in .safetensors or .gguf are listed as LFS files. */
  files: Record<string, Buffer>;
  /** Needs `Authorization: Bearer <token>`; absent: public. */
  token?: string;
  /** Bytes served for a path instead of the listed ones (same size, other content): a corrupt CDN. Absent: the listed bytes. */
  served?: Record<string, Buffer>;
}

/** The slice of the Hugging Face hub that @huggingface/hub uses to list and resolve a model repository. */
export class HubStandIn extends LoopbackServer {
  readonly repos = new Map<string, HubRepoFixture>();
  /** Cuts the first full (non-probe) download of each file after this many bytes. Absent: never. */
  cutFirstDownload: number | undefined;
  readonly #downloaded = new Set<string>();

  add(repo: HubRepoFixture): this {
    this.repos.set(repo.id, repo);
    return this;
  }

  /** Requests that fetched file bytes (not the one-byte probes the library makes first). */
  downloads(): SeenRequest[] {
    return this.requests.filter((r) => r.path.includes('/resolve/') && r.range !== 'bytes=0-0');
  }

  protected handle(req: IncomingMessage, res: ServerResponse, path: string, body: Buffer): void {
    const api = /^\/api\/models\/([^/]+\/[^/]+)\/(revision|tree|paths-info)\/([^/]+)(?:\/(.*))?$/.exec(path);
    const resolve = /^\/([^/]+\/[^/]+)\/resolve\/([^/]+)\/(.+)$/.exec(path);
    const repoId = api?.[1] ?? resolve?.[1];
    const repo = repoId ? this.repos.get(repoId) : undefined;
    if (!repo) {
      json(res, 404, { error: 'Repository not found' }, { 'x-error-code': 'RepoNotFound' });
      return;
    }
    if (repo.token && req.headers.authorization !== `Bearer ${repo.token}`) {
      json(res, 401, { error: 'Invalid credentials in Authorization header' });
      return;
    }
    const revision = api?.[3] ?? resolve?.[2];
    if (revision !== 'main' && revision !== repo.commit) {
      json(res, 404, { error: `Invalid rev id: ${revision}` }, { 'x-error-code': 'RevisionNotFound' });
      return;
    }
    if (resolve) {
      const filePath = resolve[3]!;
      const content = repo.served?.[filePath] ?? repo.files[filePath];
      if (!content) {
        json(res, 404, { error: 'Entry not found' }, { 'x-error-code': 'EntryNotFound' });
        return;
      }
      const probe = req.headers.range === 'bytes=0-0';
      const key = `${repo.id}/${filePath}`;
      const cut = !probe && this.cutFirstDownload !== undefined && !this.#downloaded.has(key);
      if (!probe) this.#downloaded.add(key);
      serveBytes(req, res, content, {
        etag: `"${isLfs(filePath) ? sha256(content) : gitBlobSha1(content)}"`,
        extraHeaders: { 'x-repo-commit': repo.commit },
        ...(cut ? { cutAfterBytes: this.cutFirstDownload! } : {}),
      });
      return;
    }
    const kind = api![2];
    if (kind === 'revision') {
      json(res, 200, {
        _id: `id-${repo.id}`,
        id: repo.id,
        sha: repo.commit,
        private: Boolean(repo.token),
        gated: false,
        downloads: 0,
        likes: 0,
        lastModified: '2024-01-01T00:00:00.000Z',
        pipeline_tag: 'text-generation',
      });
      return;
    }
    if (kind === 'tree') {
      const under = api![4] ?? '';
      const entries = Object.keys(repo.files)
        .filter((p) => under === '' || p.startsWith(`${under}/`))
        .map((p) => treeEntry(p, repo.files[p]!));
      json(res, 200, entries);
      return;
    }
    const asked = (JSON.parse(body.toString('utf8') || '{}') as { paths?: string[] }).paths ?? [];
    const out: unknown[] = [];
    for (const p of asked) {
      if (repo.files[p]) out.push(treeEntry(p, repo.files[p]));
      else if (Object.keys(repo.files).some((f) => f.startsWith(`${p}/`)))
        out.push({ type: 'directory', path: p, size: 0, oid: '0'.repeat(40) });
    }
    json(res, 200, out);
  }
}

function treeEntry(path: string, content: Buffer): Record<string, unknown> {
  if (isLfs(path)) {
    return {
      type: 'file',
      path,
      size: content.length,
      oid: gitBlobSha1(Buffer.from(`pointer ${path}`)),
      lfs: { oid: sha256(content), size: content.length, pointerSize: 130 },
    };
  }
  return { type: 'file', path, size: content.length, oid: gitBlobSha1(content) };
}

function isLfs(path: string): boolean {
  return path.endsWith('.safetensors') || path.endsWith('.gguf');
}

function json(res: ServerResponse, status: number, value: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(value));
}

export function sha256(content: Buffer): string {
  return createHash('sha256').update(content).digest('hex');
}

export function gitBlobSha1(content: Buffer): string {
  return createHash('sha1').update(`blob ${content.length}\0`).update(content).digest('hex');
}

/** Bytes that differ at every offset, so a splice at the wrong place cannot go unnoticed. */
export function patternBytes(sizeBytes: number, seed = 1): Buffer {
  const out = Buffer.alloc(sizeBytes);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < sizeBytes; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x & 0xff;
  }
  return out;
}
