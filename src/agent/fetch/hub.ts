// What an `hf://` source is, asked of the Hugging Face hub (or a mirror at
// HF_ENDPOINT) through @huggingface/hub: the commit its revision points at,
// the files to fetch with their sizes and hashes, and each file's download
// URL. The bytes themselves go through http-download.ts, because the
// library's download returns a Blob whose reads cannot tell a resumed range
// from a whole file sent again, and resume must be able to tell.
import { fileDownloadInfo, HubApiError, listFiles, modelInfo, pathsInfo } from '@huggingface/hub';
import { LlmgwError } from '../../errors/index.js';
import type { WeightSource } from '../../protocol/index.js';

export type HfSource = Extract<WeightSource, { scheme: 'hf' }>;

export interface HubClient {
  /** Without a trailing slash, e.g. https://huggingface.co. */
  hubUrl: string;
  /** Absent: anonymous (public repositories only). Never logged or put in a message. */
  accessToken: string | undefined;
  fetch: typeof fetch;
}

export interface HubFile {
  /** Path in the repository, '/'-separated, already checked to stay inside it. */
  path: string;
  sizeBytes: number;
  /** LFS files: the sha256 the hub recorded. */
  sha256?: string;
  /** Files kept in git: the git blob id (sha1 of "blob <size>\0" + bytes). */
  gitBlobSha1?: string;
}

export interface HubPlan {
  /** The commit the revision points at now; fetching by commit keeps every file from one snapshot. */
  commit: string;
  files: HubFile[];
  /** Relative to the fetched files: '' for the whole repository, else the file or directory asked for. */
  weightsPath: string;
}

/** The commit, the files and where the weights are, for one source. */
export async function planHubFetch(source: HfSource, label: string, hub: HubClient): Promise<HubPlan> {
  const repo = { type: 'model' as const, name: source.repo };
  const credentials = hub.accessToken ? { accessToken: hub.accessToken } : {};
  return withHubErrors(label, hub, async () => {
    const info = await modelInfo({
      name: source.repo,
      revision: source.revision,
      additionalFields: ['sha'],
      hubUrl: hub.hubUrl,
      fetch: hub.fetch,
      ...credentials,
    });
    const commit = info.sha;
    if (typeof commit !== 'string' || !/^[0-9a-f]{40}$/.test(commit)) {
      throw new LlmgwError(
        'LLMGW_FETCH_FAILED',
        `${label}: the hub gave no commit for revision ${source.revision}; check HF_ENDPOINT points at a hub`,
      );
    }
    let listed: { path: string; size: number; type: string; oid?: string; lfs?: { oid: string; size: number } }[] = [];
    if (source.path === null) {
      for await (const entry of listFiles({
        repo,
        revision: commit,
        recursive: true,
        hubUrl: hub.hubUrl,
        fetch: hub.fetch,
        ...credentials,
      })) {
        listed.push(entry);
      }
    } else {
      const [info] = await pathsInfo({
        repo,
        paths: [source.path],
        revision: commit,
        hubUrl: hub.hubUrl,
        fetch: hub.fetch,
        ...credentials,
      });
      if (!info) {
        throw new LlmgwError(
          'LLMGW_FETCH_NOT_FOUND',
          `${label}: the repository has no file or directory ${source.path} at revision ${source.revision}`,
        );
      }
      if (info.type === 'directory') {
        const under = listFiles({
          repo,
          revision: commit,
          path: source.path,
          recursive: true,
          hubUrl: hub.hubUrl,
          fetch: hub.fetch,
          ...credentials,
        });
        for await (const entry of under) listed.push(entry);
      } else {
        listed = [info];
      }
    }
    const files: HubFile[] = [];
    for (const entry of listed) {
      if (entry.type !== 'file') continue;
      const problem = unsafeRepoPath(entry.path);
      if (problem)
        throw new LlmgwError(
          'LLMGW_FETCH_FAILED',
          `${label}: the hub listed a file ${JSON.stringify(entry.path)} that ${problem}; refusing to write it`,
        );
      const file: HubFile = { path: entry.path, sizeBytes: entry.lfs?.size ?? entry.size };
      if (entry.lfs && /^[0-9a-f]{64}$/.test(entry.lfs.oid)) file.sha256 = entry.lfs.oid;
      else if (!entry.lfs && entry.oid && /^[0-9a-f]{40}$/.test(entry.oid)) file.gitBlobSha1 = entry.oid;
      files.push(file);
    }
    if (files.length === 0) {
      throw new LlmgwError(
        'LLMGW_FETCH_NOT_FOUND',
        `${label}: the hub lists no files there at revision ${source.revision}`,
      );
    }
    return { commit, files, weightsPath: source.path ?? '' };
  });
}

/** The URL to GET for one file at one commit (the hub's resolve URL, or where the hub says it lives). */
export async function hubFileUrl(
  source: HfSource,
  commit: string,
  path: string,
  label: string,
  hub: HubClient,
): Promise<string> {
  return withHubErrors(label, hub, async () => {
    const info = await fileDownloadInfo({
      repo: { type: 'model', name: source.repo },
      path,
      revision: commit,
      hubUrl: hub.hubUrl,
      fetch: hub.fetch,
      ...(hub.accessToken ? { accessToken: hub.accessToken } : {}),
    });
    if (!info)
      throw new LlmgwError('LLMGW_FETCH_NOT_FOUND', `${label}: the hub has no file ${path} at commit ${commit}`);
    return info.url;
  });
}

/** Why a path from a listing must not be written under the entry, or null when it is fine. */
export function unsafeRepoPath(path: string): string | null {
  if (path === '' || path.startsWith('/')) return 'is empty or absolute';
  if (path.includes('\0') || path.includes('\\')) return 'holds a NUL or a backslash';
  if (path.split('/').some((part) => part === '' || part === '.' || part === '..'))
    return 'has an empty, "." or ".." segment';
  return null;
}

/** The hint for a refusal: what the operator sets so the hub lets the agent in. */
export function hubUnauthorizedHint(hub: HubClient): string {
  return hub.accessToken
    ? "the agent's HF_TOKEN may lack access (a gated model needs its terms accepted on the model page)"
    : 'set HF_TOKEN on the agent';
}

async function withHubErrors<T>(label: string, hub: HubClient, run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (err) {
    if (err instanceof LlmgwError) throw err;
    if (err instanceof HubApiError) {
      const status = err.statusCode;
      const context = { status, hubUrl: hub.hubUrl };
      if (status === 404) {
        throw new LlmgwError('LLMGW_FETCH_NOT_FOUND', `${label}: the hub has no such repository or revision (404)`, {
          context,
          cause: err,
        });
      }
      if (status === 401 || status === 403) {
        // The hub also answers 401 for a repository that does not exist, so that private names do not leak.
        throw new LlmgwError(
          'LLMGW_FETCH_UNAUTHORIZED',
          `${label}: the hub refused access (${status}); ${hubUnauthorizedHint(hub)} (the hub answers ${status} for a repository that does not exist, too)`,
          { context, cause: err },
        );
      }
      throw new LlmgwError('LLMGW_FETCH_FAILED', `${label}: the hub answered ${status}`, { context, cause: err });
    }
    if ((err as Error).name === 'AbortError') throw err;
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    const why = cause?.code ?? cause?.message ?? (err as Error).message;
    throw new LlmgwError(
      'LLMGW_FETCH_FAILED',
      `${label}: could not reach the hub at ${hub.hubUrl} (${why}); check the network or HF_ENDPOINT`,
      {
        context: { hubUrl: hub.hubUrl },
        cause: err,
      },
    );
  }
}
