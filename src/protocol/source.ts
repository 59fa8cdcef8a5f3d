// Weight sources and their cache names. Both sides need the same answer: the
// control plane computes the wanted set from the catalog, the agent names the
// directory it fetches into, and an agent refuses to delete anything whose name
// is not of this form. So the calculation lives here, shared, and nowhere else.
import { createHash } from 'node:crypto';

export type WeightSource =
  | { scheme: 'hf'; repo: string; revision: string; path: string | null }
  | { scheme: 'https' | 'http'; url: string; sha256: string | null }
  | { scheme: 'file'; path: string };

export const SOURCE_SCHEMES = ['hf://', 'https://', 'file://'] as const;

/** A cache name is exactly 64 lowercase hex digits: the form the agent itself writes. */
export const CACHE_NAME_RE = /^[0-9a-f]{64}$/;

/** HF's default branch: `hf://org/repo` and `hf://org/repo@main` are the same weights. */
const HF_DEFAULT_REVISION = 'main';

/**
 * Parses a source string. Returns a sentence naming what is wrong instead of
 * throwing, because callers gather every problem of a model before answering.
 * `http://` is accepted only when `allowHttp` is set (tests on loopback).
 */
export function parseSource(raw: string, options: { allowHttp?: boolean } = {}): WeightSource | string {
  const text = raw.trim();
  if (text === '') return 'source is empty; want hf://org/repo[@revision][/file], https://… or file:///…';
  if (text.startsWith('hf://')) {
    const rest = text.slice('hf://'.length).replace(/\/+$/, '');
    const parts = rest.split('/');
    if (parts.length < 2 || !parts[0] || !parts[1]) {
      return `source ${JSON.stringify(raw)} names no repository; want hf://org/repo[@revision][/file]`;
    }
    const [org, repoAndRev, ...pathParts] = parts as [string, string, ...string[]];
    const at = repoAndRev.indexOf('@');
    const repoName = at === -1 ? repoAndRev : repoAndRev.slice(0, at);
    // A revision with a slash (refs/pr/1) is written percent-encoded (refs%2Fpr%2F1),
    // since an unencoded slash would start the path in the repository.
    let revision: string;
    try {
      revision = at === -1 ? HF_DEFAULT_REVISION : decodeURIComponent(repoAndRev.slice(at + 1));
    } catch {
      return `source ${JSON.stringify(raw)} has a badly percent-encoded revision`;
    }
    if (!repoName || !revision) return `source ${JSON.stringify(raw)} has an empty repository or revision`;
    const problem =
      hfNameProblem('organisation', org) ??
      hfNameProblem('repository name', repoName) ??
      hfRevisionProblem(revision) ??
      hfPathProblem(pathParts);
    if (problem) return `source ${JSON.stringify(raw)}: ${problem}; want hf://org/repo[@revision][/file]`;
    return { scheme: 'hf', repo: `${org}/${repoName}`, revision, path: pathParts.length ? pathParts.join('/') : null };
  }
  if (text.startsWith('https://') || text.startsWith('http://')) {
    let url: URL;
    try {
      url = new URL(text);
    } catch {
      return `source ${JSON.stringify(raw)} is not a valid URL`;
    }
    if (url.protocol === 'http:' && !options.allowHttp) {
      return `source ${JSON.stringify(raw)} uses plain http; use https:// (http is allowed only in tests)`;
    }
    const match = /^sha256=([0-9a-fA-F]{64})$/.exec(url.hash.slice(1));
    if (url.hash && !match) return `source ${JSON.stringify(raw)} has a fragment that is not #sha256=<64 hex digits>`;
    url.hash = '';
    return {
      scheme: url.protocol === 'http:' ? 'http' : 'https',
      url: url.href,
      sha256: match ? match[1]!.toLowerCase() : null,
    };
  }
  if (text.startsWith('file://')) {
    let path: string;
    try {
      const url = new URL(text);
      // file://models/x would silently mean /x on a host named "models".
      if (url.host !== '' && url.host !== 'localhost')
        return `source ${JSON.stringify(raw)} must be an absolute path: file:///path/to/model`;
      path = decodeURIComponent(url.pathname);
    } catch {
      return `source ${JSON.stringify(raw)} is not a valid file:// URL`;
    }
    if (!path.startsWith('/')) return `source ${JSON.stringify(raw)} must be an absolute path: file:///path/to/model`;
    return { scheme: 'file', path: path.length > 1 ? path.replace(/\/+$/, '') : path };
  }
  const scheme = /^([a-z0-9+.-]+):/i.exec(text)?.[1];
  return scheme
    ? `source scheme "${scheme}:" is not supported; use hf://, https:// or file://`
    : `source ${JSON.stringify(raw)} has no scheme; use hf://org/repo, https://… or file:///…`;
}

/**
 * Why an organisation or repository name is not one the hub allows, or null.
 * The names go into hub URLs unescaped (by @huggingface/hub) with HF_TOKEN
 * attached, so `..` or an escaped separator would point the token at another
 * hub path than `/api/models/org/name`. The rule is the hub's own: letters,
 * digits, `_`, `-` and `.`, beginning and ending with a letter, digit or `_`,
 * no `--` or `..`, at most 96 characters.
 */
function hfNameProblem(what: string, name: string): string | null {
  if (!/^[A-Za-z0-9_](?:[A-Za-z0-9_.-]{0,94}[A-Za-z0-9_])?$/.test(name) || name.includes('--') || name.includes('..')) {
    return `the ${what} ${JSON.stringify(name)} is not a hub name (letters, digits, "_", "-" and "." only, beginning and ending with a letter, digit or "_", no "--" or "..", at most 96 characters)`;
  }
  return null;
}

/** Why a decoded revision (a branch, tag or commit; `refs/pr/1`) cannot be sent to the hub, or null. */
function hfRevisionProblem(revision: string): string | null {
  // The library escapes the revision as one path segment, but a mirror at HF_ENDPOINT may decode it again.
  // eslint-disable-next-line no-control-regex -- finding control characters is the point
  if (/[\u0000-\u001f\u007f\\]/.test(revision)) return 'the revision holds a control character or a backslash';
  if (revision.split('/').some((part) => part === '' || part === '.' || part === '..'))
    return 'the revision has an empty, "." or ".." segment';
  return null;
}

/**
 * Why a file path in the repository cannot be sent to the hub, or null.
 * The library puts it into the URL as written, and a URL parser reads `%2e%2e`
 * as `..` and a backslash as `/`, so each segment is judged both as written
 * and decoded: no empty, "." or ".." segment, no escaped separator.
 */
function hfPathProblem(parts: readonly string[]): string | null {
  for (const part of parts) {
    // eslint-disable-next-line no-control-regex -- finding control characters is the point
    if (/[\u0000-\u001f\u007f\\]/.test(part))
      return `the file path segment ${JSON.stringify(part)} holds a control character or a backslash`;
    if (/[?#]/.test(part))
      return `the file path segment ${JSON.stringify(part)} holds "?" or "#", which would end the path in a URL`;
    if (/%2f|%5c/i.test(part))
      return `the file path segment ${JSON.stringify(part)} holds an escaped separator (%2F or %5C)`;
    let decoded: string;
    try {
      decoded = decodeURIComponent(part);
    } catch {
      return `the file path segment ${JSON.stringify(part)} is badly percent-encoded`;
    }
    if (decoded === '' || decoded === '.' || decoded === '..')
      return 'the file path has an empty, "." or ".." path segment';
  }
  return null;
}

/**
 * The canonical text of a source: what two spellings of the same weights have
 * in common. HF repository ids are case-insensitive on the hub, revisions and
 * file paths are not; URLs are normalised by WHATWG rules (host case, default
 * port); a URL pinned with #sha256= is named by that hash alone, since the
 * hash says exactly which bytes they are, whatever URL serves them.
 */
export function canonicalSource(source: WeightSource): string {
  switch (source.scheme) {
    case 'hf':
      return `hf://${source.repo.toLowerCase()}@${source.revision}${source.path ? `/${source.path}` : ''}`;
    case 'http':
    case 'https':
      // Pinned bytes are the identity: a signed URL whose signature rotates
      // must not become a new cache entry (and a new download) each time.
      return source.sha256 ? `sha256:${source.sha256}` : source.url;
    case 'file':
      return `file://${source.path}`;
  }
}

/**
 * The cache name of a fetched source, or null for `file://`, which is used in
 * place and never fetched, so never owned (and never deleted) by llmgw. The
 * hash input is domain-separated so that no other llmgw hash can collide with
 * a cache name by construction.
 */
export function cacheName(source: WeightSource): string | null {
  if (source.scheme === 'file') return null;
  return createHash('sha256').update('llmgw/cache-name/v1\0').update(canonicalSource(source)).digest('hex');
}

/** Convenience for callers holding the raw string; null when unparsable or `file://`. */
export function cacheNameOf(raw: string, options: { allowHttp?: boolean } = {}): string | null {
  const parsed = parseSource(raw, options);
  return typeof parsed === 'string' ? null : cacheName(parsed);
}
