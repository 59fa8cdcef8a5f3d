// Fetches a source into the weight cache, or finds it there, or (file://)
// uses it where it is. One download per cache name at a time: callers asking
// for the same weights join the download under way and see the same progress
// and the same result. Failures leave the cache either untouched or holding a
// partial that the next fetch, in this process or the next, resumes; only a
// full disk or bytes that fail verification throw the partial away, since
// resuming could not end differently.
import type { Stats } from 'node:fs';
import { lstat, mkdir, readdir, stat } from 'node:fs/promises';
import { posix } from 'node:path';
import type { Dispatcher } from 'undici';
import { LlmgwError } from '../../errors/index.js';
import { cacheName, canonicalSource, parseSource, type WeightSource } from '../../protocol/index.js';
import { nearestName } from '../../units/index.js';
import {
  FILES_DIR,
  MANIFEST_VERSION,
  type CacheEntry,
  type ManifestFile,
  type WeightCache,
  type WeightManifest,
} from '../cache/index.js';
import { type HostLookup, systemLookup } from './address-guard.js';
import { guardedHubFetch } from './hub-fetch.js';
import {
  defaultWriteStream,
  downloadFile,
  hashFile,
  partialBytes,
  type HttpContext,
  type WriteStreamFactory,
} from './http-download.js';
import { hubFileUrl, hubUnauthorizedHint, planHubFetch, type HfSource, type HubClient } from './hub.js';
import { PartialRecord } from './partial-record.js';
import { ProgressMeter, type FetchProgress } from './progress.js';

const DEFAULT_HUB_URL = 'https://huggingface.co';

export interface FetcherOptions {
  cache: WeightCache;
  /** HF_TOKEN: sent to the hub only, never logged or put in a message. Absent or empty: anonymous, public repositories only. */
  hfToken?: string;
  /** HF_ENDPOINT: the hub or a mirror of it. Absent: https://huggingface.co. */
  hubUrl?: string;
  /** Accept http:// sources. For tests on loopback only; absent: false. */
  allowHttp?: boolean;
  /** HTTP client for file bytes. Absent: undici's global dispatcher. */
  dispatcher?: Dispatcher;
  /** Resolves the host of a redirect to check it stays out of the agent's network (address-guard.ts). Absent: the system resolver. */
  lookup?: HostLookup;
  /** fetch() for the hub's API (through @huggingface/hub). Absent: the global fetch. */
  hubFetch?: typeof fetch;
  /** At most one progress report per this many ms, plus one at the start and one at the end. Absent: 250. 0: every chunk. */
  progressIntervalMs?: number;
  /** Files of one repository fetched at once. Absent: 4. */
  fileConcurrency?: number;
  /** Epoch ms, for progress rates and `fetched_at`. Absent: Date.now. */
  now?: () => number;
  /** Opens partial files for writing. Absent: fs.createWriteStream. Tests pass one that fails like a full disk. */
  createWriteStream?: WriteStreamFactory;
}

interface CompiledFetcherOptions {
  readonly cache: WeightCache;
  readonly hfToken: string | undefined;
  readonly hubUrl: string;
  readonly allowHttp: boolean;
  readonly dispatcher: Dispatcher | undefined;
  readonly lookup: HostLookup | undefined;
  readonly hubFetch: typeof fetch;
  readonly progressIntervalMs: number;
  readonly fileConcurrency: number;
  readonly now: () => number;
  readonly createWriteStream: WriteStreamFactory;
}

const OPTION_KEYS = [
  'cache',
  'hfToken',
  'hubUrl',
  'allowHttp',
  'dispatcher',
  'lookup',
  'hubFetch',
  'progressIntervalMs',
  'fileConcurrency',
  'now',
  'createWriteStream',
] as const;

export function compileFetcherOptions(options: FetcherOptions): CompiledFetcherOptions {
  const problems: string[] = [];
  for (const key of Object.keys(options)) {
    if ((OPTION_KEYS as readonly string[]).includes(key)) continue;
    const near = nearestName(key, OPTION_KEYS);
    problems.push(`fetcher option "${key}" is unknown${near ? `; did you mean "${near}"?` : ''}`);
  }
  const hfToken = options.hfToken === undefined || options.hfToken.trim() === '' ? undefined : options.hfToken.trim();
  // @huggingface/hub refuses other tokens with a TypeError; say so at start-up instead, without echoing the token.
  if (hfToken !== undefined && !hfToken.startsWith('hf_')) {
    problems.push('HF_TOKEN does not start with "hf_"; set it to a user access token from the hub\'s settings page');
  }
  let hubUrl = DEFAULT_HUB_URL;
  if (options.hubUrl !== undefined && options.hubUrl.trim() !== '') {
    try {
      const url = new URL(options.hubUrl.trim());
      if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new Error('not http(s)');
      hubUrl = url.href.replace(/\/+$/, '');
    } catch {
      problems.push(
        `HF_ENDPOINT ${JSON.stringify(options.hubUrl)} is not an http(s) URL; want e.g. https://huggingface.co or a mirror's address`,
      );
    }
  }
  const progressIntervalMs = options.progressIntervalMs ?? 250;
  if (!Number.isInteger(progressIntervalMs) || progressIntervalMs < 0) {
    problems.push(`progressIntervalMs must be a whole number of milliseconds, 0 or more; got ${progressIntervalMs}`);
  }
  const fileConcurrency = options.fileConcurrency ?? 4;
  if (!Number.isInteger(fileConcurrency) || fileConcurrency < 1 || fileConcurrency > 64) {
    problems.push(`fileConcurrency must be a whole number from 1 to 64; got ${fileConcurrency}`);
  }
  if (problems.length > 0) throw new LlmgwError('LLMGW_CONFIG_INVALID', problems.join('; '));
  return {
    cache: options.cache,
    hfToken,
    hubUrl,
    allowHttp: options.allowHttp ?? false,
    dispatcher: options.dispatcher,
    lookup: options.lookup,
    // Redirects are followed by hand, under the rule file downloads follow (hub-fetch.ts).
    hubFetch: guardedHubFetch(
      options.hubFetch ?? ((input, init) => fetch(input, init)),
      hubUrl,
      options.lookup ?? systemLookup,
    ),
    progressIntervalMs,
    fileConcurrency,
    now: options.now ?? Date.now,
    createWriteStream: options.createWriteStream ?? defaultWriteStream,
  };
}

export interface FetchOptions {
  /** Stops this caller's wait; the download itself stops when every caller waiting on it has stopped. The partial is kept. */
  signal?: AbortSignal;
  /** Throttled: see `progressIntervalMs`. A caller joining a download under way gets the latest report at once. */
  onProgress?: (progress: FetchProgress) => void;
}

export interface FetchResult {
  /** What an engine is given: a directory (a repository) or one file. */
  path: string;
  sizeBytes: number;
  /** Null for file:// sources: used in place, nothing was fetched and llmgw owns nothing there. */
  manifest: WeightManifest | null;
}

/** A download under way, as heartbeats report it. */
export interface InFlightFetch {
  cacheName: string;
  /** The source without secrets. */
  source: string;
  progress: FetchProgress | null;
}

interface SharedFetch {
  readonly name: string;
  readonly label: string;
  readonly meter: ProgressMeter;
  readonly listeners: Set<(progress: FetchProgress) => void>;
  readonly controller: AbortController;
  callers: number;
  promise: Promise<FetchResult>;
}

/** One file to fetch into `files/<path>`. */
interface PlannedFile {
  path: string;
  /** From a listing; absent for a URL until its server answers. */
  expectedBytes: number | undefined;
  sha256: string | undefined;
  gitBlobSha1: string | undefined;
  url: () => Promise<string>;
}

interface DownloadPlan {
  files: PlannedFile[];
  /** Relative to the entry directory. */
  weightsPath: string;
  revision?: string;
  commit?: string;
  peer: string;
  authorization?: { origin: string; value: string };
  unauthorizedHint: string;
  allowHttp: boolean;
}

export class Fetcher {
  readonly #options: CompiledFetcherOptions;
  readonly #inFlight = new Map<string, SharedFetch>();
  /** The last download of each name, settled or not: a new one waits for the old to let go of the partial. */
  readonly #lastRun = new Map<string, Promise<unknown>>();

  constructor(options: FetcherOptions) {
    this.#options = compileFetcherOptions(options);
  }

  async fetch(rawSource: string, options: FetchOptions = {}): Promise<FetchResult> {
    const source = parseSource(rawSource, { allowHttp: this.#options.allowHttp });
    if (typeof source === 'string') throw new LlmgwError('LLMGW_SOURCE_INVALID', source);
    options.signal?.throwIfAborted();
    if (source.scheme === 'file') return inPlace(source);
    const name = cacheName(source)!;
    const existing = await this.#options.cache.lookup(name);
    if (existing) {
      options.onProgress?.({ bytesDone: existing.sizeBytes, totalBytes: existing.sizeBytes });
      return resultOf(existing);
    }
    options.signal?.throwIfAborted();
    const shared = this.#inFlight.get(name) ?? this.#start(name, source, rawSource.trim());
    return this.#join(shared, options);
  }

  /** Downloads under way, for the heartbeat. */
  downloads(): InFlightFetch[] {
    // The bytes so far, not the last throttled report: a download that stalls
    // right after a burst must not read as further behind than it is.
    return [...this.#inFlight.values()].map((shared) => {
      const { meter } = shared;
      const progress: FetchProgress | null =
        meter.last === null
          ? null
          : {
              bytesDone: meter.bytesDone,
              ...(meter.totalBytes !== undefined ? { totalBytes: meter.totalBytes } : {}),
              ...(meter.last.bytesPerSecond !== undefined ? { bytesPerSecond: meter.last.bytesPerSecond } : {}),
            };
      return { cacheName: shared.name, source: shared.label, progress };
    });
  }

  #start(name: string, source: Exclude<WeightSource, { scheme: 'file' }>, rawSource: string): SharedFetch {
    const listeners = new Set<(progress: FetchProgress) => void>();
    const meter = new ProgressMeter({
      intervalMs: this.#options.progressIntervalMs,
      now: this.#options.now,
      emit: (progress) => {
        for (const listener of listeners) listener(progress);
      },
    });
    const controller = new AbortController();
    const shared: SharedFetch = {
      name,
      label: displaySource(source),
      meter,
      listeners,
      controller,
      callers: 0,
      promise: Promise.resolve(null as never),
    };
    const previous = this.#lastRun.get(name) ?? Promise.resolve();
    shared.promise = previous
      .catch(() => undefined)
      .then(() => this.#download(name, source, rawSource, shared))
      .finally(() => {
        if (this.#inFlight.get(name) === shared) this.#inFlight.delete(name);
        if (this.#lastRun.get(name) === settled) this.#lastRun.delete(name);
      });
    const settled = shared.promise.catch(() => undefined);
    this.#lastRun.set(name, settled);
    this.#inFlight.set(name, shared);
    return shared;
  }

  #join(shared: SharedFetch, options: FetchOptions): Promise<FetchResult> {
    shared.callers++;
    const { onProgress, signal } = options;
    if (onProgress) {
      shared.listeners.add(onProgress);
      if (shared.meter.last) onProgress(shared.meter.last);
    }
    return new Promise<FetchResult>((resolve, reject) => {
      const leave = (): void => {
        if (onProgress) shared.listeners.delete(onProgress);
        signal?.removeEventListener('abort', onAbort);
      };
      const onAbort = (): void => {
        leave();
        shared.callers--;
        if (shared.callers === 0) {
          // Nobody waits any more: stop, and let a later fetch start afresh (it resumes the partial).
          if (this.#inFlight.get(shared.name) === shared) this.#inFlight.delete(shared.name);
          shared.controller.abort(signal?.reason);
        }
        reject(signal?.reason);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      shared.promise.then(
        (result) => {
          leave();
          resolve(result);
        },
        (err: unknown) => {
          leave();
          reject(err);
        },
      );
    });
  }

  async #download(
    name: string,
    source: Exclude<WeightSource, { scheme: 'file' }>,
    rawSource: string,
    shared: SharedFetch,
  ): Promise<FetchResult> {
    const { cache } = this.#options;
    const { label, meter } = shared;
    const signal = shared.controller.signal;
    signal.throwIfAborted();
    // An earlier download of the same name may have finished while this one waited to start.
    const existing = await cache.lookup(name);
    if (existing) return resultOf(existing);

    const plan = await this.#plan(source, label, signal);
    const partial = cache.partialPath(name);
    const filesDir = posix.join(partial, FILES_DIR);
    const canonical = canonicalSource(source);
    try {
      return await this.#fill(name, rawSource, canonical, partial, filesDir, plan, shared);
    } catch (err) {
      throw await this.#failure(err, name, label, filesDir, plan, meter, signal);
    }
  }

  /** Brings the partial to complete and verified, then has the cache rename it into place. */
  async #fill(
    name: string,
    rawSource: string,
    canonical: string,
    partial: string,
    filesDir: string,
    plan: DownloadPlan,
    shared: SharedFetch,
  ): Promise<FetchResult> {
    const { cache } = this.#options;
    const { label, meter } = shared;
    const signal = shared.controller.signal;
    await mkdir(filesDir, { recursive: true });
    let record = await PartialRecord.open(partial, canonical, plan.commit);
    if (!record) {
      // A partial of another commit (the branch moved) or an unreadable record: resuming it would splice two versions.
      await cache.discardPartial(name);
      await mkdir(filesDir, { recursive: true });
      record = (await PartialRecord.open(partial, canonical, plan.commit))!;
    }

    let resumedBytes = 0;
    for (const file of plan.files) resumedBytes += await partialBytes(posix.join(filesDir, file.path));
    const listedBytes = plan.files.every((f) => f.expectedBytes !== undefined)
      ? plan.files.reduce((sum, f) => sum + f.expectedBytes!, 0)
      : undefined;
    meter.setTotal(listedBytes);
    meter.add(resumedBytes);
    meter.flush();

    const stopOthers = new AbortController();
    const ctx: HttpContext = {
      dispatcher: this.#options.dispatcher,
      ...(this.#options.lookup ? { lookup: this.#options.lookup } : {}),
      allowHttp: plan.allowHttp,
      signal: AbortSignal.any([signal, stopOthers.signal]),
      createWriteStream: this.#options.createWriteStream,
    };
    const files: ManifestFile[] = await runPool(
      plan.files,
      this.#options.fileConcurrency,
      () => stopOthers.abort(),
      async (file) => {
        const filePath = posix.join(filesDir, file.path);
        await mkdir(posix.dirname(filePath), { recursive: true });
        const state = record.file(file.path);
        if (
          state.sha256 !== undefined &&
          state.total_bytes !== undefined &&
          (await partialBytes(filePath)) === state.total_bytes
        ) {
          // Verified by an earlier run before it stopped; reading 10 GiB again to learn the same hash helps nobody.
          return { path: file.path, size_bytes: state.total_bytes, sha256: state.sha256 };
        }
        const got = await downloadFile(
          {
            url: await file.url(),
            label,
            peer: plan.peer,
            ...(plan.authorization ? { authorization: plan.authorization } : {}),
            unauthorizedHint: plan.unauthorizedHint,
            filePath,
            expectedBytes: file.expectedBytes,
            validator: state.validator,
            onStart: async (info) => {
              if (file.expectedBytes === undefined && info.totalBytes !== undefined && plan.files.length === 1)
                meter.setTotal(info.totalBytes);
              await record.update(file.path, {
                ...(info.totalBytes === undefined ? {} : { total_bytes: info.totalBytes }),
                ...(info.validator === undefined ? {} : { validator: info.validator }),
              });
            },
            onBytes: (bytes) => meter.add(bytes),
          },
          ctx,
        );
        await verify(label, file, filePath, got.sizeBytes, got.sha256);
        await record.update(file.path, { total_bytes: got.sizeBytes, sha256: got.sha256 });
        return { path: file.path, size_bytes: got.sizeBytes, sha256: got.sha256 };
      },
    );

    await record.remove();
    const manifest: WeightManifest = {
      version: MANIFEST_VERSION,
      source: rawSource,
      canonical_source: canonical,
      cache_name: name,
      ...(plan.revision === undefined ? {} : { revision: plan.revision }),
      ...(plan.commit === undefined ? {} : { commit: plan.commit }),
      weights_path: plan.weightsPath,
      files,
      size_bytes: files.reduce((sum, f) => sum + f.size_bytes, 0),
      fetched_at: new Date(this.#options.now()).toISOString(),
    };
    const entry = await cache.commit(name, manifest);
    meter.setTotal(entry.sizeBytes);
    meter.flush();
    return resultOf(entry);
  }

  async #plan(
    source: Exclude<WeightSource, { scheme: 'file' }>,
    label: string,
    signal: AbortSignal,
  ): Promise<DownloadPlan> {
    if (source.scheme === 'hf') {
      const hub = this.#hubClient(signal);
      const plan = await planHubFetch(source, label, hub);
      return {
        files: plan.files.map((file) => ({
          path: file.path,
          expectedBytes: file.sizeBytes,
          sha256: file.sha256,
          gitBlobSha1: file.gitBlobSha1,
          url: () => hubFileUrl(source as HfSource, plan.commit, file.path, label, hub),
        })),
        weightsPath: plan.weightsPath === '' ? FILES_DIR : posix.join(FILES_DIR, plan.weightsPath),
        revision: source.revision,
        commit: plan.commit,
        peer: 'the hub',
        ...(hub.accessToken
          ? { authorization: { origin: new URL(hub.hubUrl).origin, value: `Bearer ${hub.accessToken}` } }
          : {}),
        unauthorizedHint: hubUnauthorizedHint(hub),
        // A mirror the operator put on plain http is the operator's choice; a source URL on http is not.
        allowHttp: this.#options.allowHttp || hub.hubUrl.startsWith('http:'),
      };
    }
    const fileName = fileNameOf(source.url);
    return {
      files: [
        {
          path: fileName,
          expectedBytes: undefined,
          sha256: source.sha256 ?? undefined,
          gitBlobSha1: undefined,
          url: async () => source.url,
        },
      ],
      weightsPath: posix.join(FILES_DIR, fileName),
      peer: 'the server',
      unauthorizedHint:
        'the URL needs credentials llmgw does not send; use a URL that carries its own access (a signed URL)',
      allowHttp: this.#options.allowHttp,
    };
  }

  #hubClient(signal: AbortSignal): HubClient {
    const hubFetch = this.#options.hubFetch;
    return {
      hubUrl: this.#options.hubUrl,
      accessToken: this.#options.hfToken,
      fetch: (input, init) => hubFetch(input, { ...init, signal }),
    };
  }

  /** Turns a failure into the error the caller sees, throwing the partial away where resuming cannot help. */
  async #failure(
    err: unknown,
    name: string,
    label: string,
    filesDir: string,
    plan: DownloadPlan,
    meter: ProgressMeter,
    signal: AbortSignal,
  ): Promise<unknown> {
    const { cache } = this.#options;
    if (hasCode(err, 'ENOSPC')) {
      let writtenBytes = 0;
      for (const file of plan.files) writtenBytes += await partialBytes(posix.join(filesDir, file.path)).catch(() => 0);
      await cache.discardPartial(name);
      const total = meter.totalBytes;
      return new LlmgwError(
        'LLMGW_DISK_FULL',
        `disk full while fetching ${label} into ${cache.cacheDir} (${writtenBytes} of ${total ?? 'unknown'} bytes written); the partial download was removed: free space or move the cache, then fetch again`,
        { context: { writtenBytes, totalBytes: total, cacheDir: cache.cacheDir }, cause: err },
      );
    }
    if (err instanceof LlmgwError && err.code === 'LLMGW_FETCH_VERIFY_FAILED') {
      await cache.discardPartial(name);
      return err;
    }
    if (signal.aborted) return signal.reason;
    if (err instanceof LlmgwError) return err;
    const why = (err as { code?: string }).code ?? (err as Error).message;
    return new LlmgwError(
      'LLMGW_FETCH_FAILED',
      `${label}: the download stopped after ${meter.bytesDone} of ${meter.totalBytes ?? 'unknown'} bytes (${why}); the partial download is kept and the next fetch resumes it`,
      { context: { bytesDone: meter.bytesDone, totalBytes: meter.totalBytes }, cause: err },
    );
  }
}

async function verify(
  label: string,
  file: PlannedFile,
  filePath: string,
  sizeBytes: number,
  sha256: string,
): Promise<void> {
  const fail = (what: string): never => {
    throw new LlmgwError(
      'LLMGW_FETCH_VERIFY_FAILED',
      `${label}: ${file.path} ${what}; the download was removed, fetch again (and check the source if it repeats)`,
      {
        context: { path: file.path, sizeBytes },
      },
    );
  };
  if (file.expectedBytes !== undefined && sizeBytes !== file.expectedBytes)
    fail(`is ${sizeBytes} bytes where ${file.expectedBytes} were expected`);
  if (file.sha256 !== undefined && sha256 !== file.sha256)
    fail(`hashes to sha256 ${sha256}, not the expected ${file.sha256}`);
  if (file.gitBlobSha1 !== undefined) {
    const blob = await hashFile(filePath, 'sha1', `blob ${sizeBytes}\0`);
    if (blob !== file.gitBlobSha1) fail(`hashes to git blob ${blob}, not the expected ${file.gitBlobSha1}`);
  }
}

/**
 * Runs `work` over `items`, `concurrency` at a time, in order of start. On the
 * first failure no new item starts, `onFailure` stops those under way, and,
 * once every one has settled (so nothing writes into a partial about to be
 * removed), the first failure is thrown.
 */
async function runPool<T, R>(
  items: readonly T[],
  concurrency: number,
  onFailure: () => void,
  work: (item: T) => Promise<R>,
): Promise<R[]> {
  const results: R[] = [];
  let next = 0;
  let failed = false;
  let failure: unknown;
  const worker = async (): Promise<void> => {
    while (!failed && next < items.length) {
      const index = next++;
      try {
        results[index] = await work(items[index]!);
      } catch (err) {
        if (!failed) {
          failed = true;
          failure = err;
          onFailure();
        }
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, worker));
  if (failed) throw failure;
  return results;
}

async function inPlace(source: Extract<WeightSource, { scheme: 'file' }>): Promise<FetchResult> {
  let stats: Stats;
  try {
    stats = await stat(source.path);
  } catch (err) {
    if (hasCode(err, 'ENOENT')) {
      throw new LlmgwError(
        'LLMGW_FETCH_NOT_FOUND',
        `file://${source.path}: no such file or directory on this node; file:// weights are used in place, so the path must exist on every node that runs the model`,
        { cause: err },
      );
    }
    throw new LlmgwError('LLMGW_FETCH_FAILED', `file://${source.path}: ${(err as Error).message}`, { cause: err });
  }
  const sizeBytes = stats.isDirectory() ? await treeBytes(source.path) : stats.size;
  return { path: source.path, sizeBytes, manifest: null };
}

/**
 * Bytes under a directory the operator owns. A link to a file counts as the
 * file (a hub cache's snapshot is links into its blobs); a link to a directory
 * is not followed, so a loop cannot run forever.
 */
async function treeBytes(dir: string): Promise<number> {
  let total = 0;
  for (const dirent of await readdir(dir, { withFileTypes: true })) {
    const path = posix.join(dir, dirent.name);
    if (dirent.isDirectory()) total += await treeBytes(path);
    else if (dirent.isFile()) total += (await lstat(path)).size;
    else if (dirent.isSymbolicLink()) {
      const target = await stat(path).catch(() => null);
      if (target?.isFile()) total += target.size;
    }
  }
  return total;
}

function resultOf(entry: CacheEntry): FetchResult {
  return { path: entry.weightsPath, sizeBytes: entry.sizeBytes, manifest: entry.manifest };
}

/** A source for messages and logs: a URL loses its query (signed URLs carry credentials there) and any user:password. */
export function displaySource(source: WeightSource): string {
  if (source.scheme === 'http' || source.scheme === 'https') {
    const url = new URL(source.url);
    return `${url.origin}${url.pathname}${url.search ? '?…' : ''}`;
  }
  return canonicalSource(source);
}

/** The file name a URL's weights are stored under: the last path segment, made safe to be one name on disk. */
export function fileNameOf(url: string): string {
  const last = new URL(url).pathname.split('/').pop() ?? '';
  let decoded = last;
  try {
    decoded = decodeURIComponent(last);
  } catch {
    // Keep the raw segment; it is made safe below either way.
  }
  const safe = decoded
    .replace(/[^A-Za-z0-9._-]/g, '_')
    .replace(/^\.+/, '')
    .slice(0, 200);
  return safe === '' ? 'download' : safe;
}

function hasCode(err: unknown, code: string): boolean {
  for (let e: unknown = err, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    if ((e as { code?: unknown }).code === code) return true;
  }
  return false;
}
