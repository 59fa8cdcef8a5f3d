// Checks a listener makes on a request before any route sees it, shared by
// the admin and client listeners: which Host names it answers to (so a DNS
// name rebound to 127.0.0.1 by a web page cannot reach it), and whether a
// state-changing call came from another site. Kept apart from the admin
// token check because they hold even where no token is configured, which on
// a loopback listener is exactly when they are the only protection.
import { isIP } from 'node:net';
import type { FastifyRequest } from 'fastify';
import { LlmgwError } from '../errors/index.js';
import { isWildcardHost } from '../net/index.js';

/** Names every loopback listener answers to, whatever it was bound to. */
const LOOPBACK_NAMES = ['localhost', '127.0.0.1', '::1'];

/** The Host names one listener accepts; `null` = any (a listener bound to every interface that requires a credential). */
export type HostAllowlist = ReadonlySet<string> | null;

export interface HostAllowlistInput {
  /** The address the listener is bound to, as configured: `127.0.0.1`, `::`, `10.0.0.5`. */
  boundHost: string;
  /** Names from `admin_hosts` / `client_hosts`; empty = none added. */
  extra: readonly string[];
  /** Whether every request must carry a credential (admin token, API key) anyway. */
  credentialsRequired: boolean;
}

/**
 * The listener's own bound address, the loopback names, and the configured
 * names. Loopback names are always safe: a rebound DNS name arrives under
 * its own name, never as localhost, and `llmgw up` injects requests as
 * localhost whatever the listener is bound to. A listener on
 * every interface with no names configured accepts any Host, but only when
 * a credential is required: a web page cannot supply the token, so a
 * rebound name gains it nothing.
 */
export function hostAllowlist(input: HostAllowlistInput): HostAllowlist {
  const bound = normaliseHostName(input.boundHost);
  const everyInterface = isWildcardHost(bound);
  if (everyInterface && input.extra.length === 0 && input.credentialsRequired) return null;
  const names = new Set(input.extra.map(normaliseHostName));
  if (!everyInterface) names.add(bound);
  for (const n of LOOPBACK_NAMES) names.add(n);
  return names;
}

/** A Host header's name without its port, lower-case, brackets and a trailing dot dropped; null when it is no name at all. */
export function hostNameOf(hostHeader: string | undefined): string | null {
  if (!hostHeader) return null;
  const h = hostHeader.trim().toLowerCase();
  const bracketed = /^\[([0-9a-f:.]+)\](?::\d{1,5})?$/.exec(h);
  if (bracketed) return bracketed[1]!;
  const plain = /^([a-z0-9._-]+)(?::\d{1,5})?$/.exec(h);
  if (!plain) return null;
  return plain[1]!.replace(/\.$/, '');
}

function normaliseHostName(name: string): string {
  const n = name
    .trim()
    .toLowerCase()
    .replace(/^\[(.*)\]$/, '$1');
  return n.replace(/\.$/, '');
}

/**
 * Throws LLMGW_HOST_NOT_ALLOWED (421) when the request's Host, or the
 * authority of an absolute-form target (`GET http://name/path`, which HTTP
 * says wins over Host), is not one the listener answers to; and
 * LLMGW_BAD_REQUEST (400) when it carries more than one Host header, since
 * this check and whatever sits in front of the listener could each read a
 * different one. `key` is the config key that adds names, so the message
 * says what to set.
 */
export function checkHost(request: FastifyRequest, allowed: HostAllowlist, listener: string, key: string): void {
  // Fastify's inject and the unit tests' stand-ins may have no raw request: then there is only `headers`.
  const raw = request.raw as { rawHeaders?: readonly string[]; url?: string } | undefined;
  const count = raw?.rawHeaders ? hostHeaderCount(raw.rawHeaders) : 1;
  if (count > 1) {
    throw new LlmgwError('LLMGW_BAD_REQUEST', `the request carries ${count} Host headers; send exactly one`);
  }
  if (allowed === null) return;
  const host = request.headers.host;
  if (!answersTo(hostNameOf(host), allowed)) {
    throw new LlmgwError(
      'LLMGW_HOST_NOT_ALLOWED',
      `the ${listener} listener does not answer to Host "${shown(host)}"; if that name is yours, add it to ${key} (LLMGW_${key.toUpperCase()})`,
    );
  }
  const target = raw?.url;
  if (target === undefined || target.startsWith('/') || target === '*') return;
  const authority = authorityOf(target);
  if (!answersTo(authority === null ? null : hostNameOf(authority), allowed)) {
    throw new LlmgwError(
      'LLMGW_HOST_NOT_ALLOWED',
      `the ${listener} listener does not answer to "${shown(authority ?? target)}", which the request target names; send the path alone (GET /path), or if that name is yours, add it to ${key} (LLMGW_${key.toUpperCase()})`,
    );
  }
}

function answersTo(name: string | null, allowed: ReadonlySet<string>): boolean {
  return (
    name !== null && (allowed.has(name) || (isIP(name) === 4 && name.startsWith('127.') && allowed.has('127.0.0.1')))
  );
}

/** Printable ASCII only, at most 100 characters: what a client sent, fit for a message and a log line. */
function shown(text: string | undefined): string {
  return (text ?? '').replace(/[^\x21-\x7e]/g, '').slice(0, 100);
}

/** Host headers among Node's raw header list (names and values alternate). */
function hostHeaderCount(rawHeaders: readonly string[]): number {
  let n = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!;
    if (name.length === 4 && name.toLowerCase() === 'host') n++;
  }
  return n;
}

/** The authority (`name[:port]`) of an absolute-form request target; null when it is not an http(s) URL with one. */
function authorityOf(target: string): string | null {
  try {
    const url = new URL(target);
    if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.host === '') return null;
    return url.host;
  } catch {
    return null;
  }
}

/** Whether an Origin names the Host a request was sent to, default ports normalised (`http://h:80` is `h`). */
export function originMatchesHost(origin: string, host: string): boolean {
  try {
    if (origin === 'null') return false;
    const o = new URL(origin);
    return o.host === new URL(`${o.protocol}//${host}`).host;
  } catch {
    return false;
  }
}

/**
 * Why a state-changing call looks sent by another site's page, or null.
 * Headers a client did not send are not held against it: scripts and ctl
 * send neither, and only browsers need stopping here.
 */
export function crossSiteProblem(request: FastifyRequest): string | null {
  const site = headerOf(request, 'sec-fetch-site');
  if (site === 'cross-site' || site === 'same-site') {
    return `a page on another site sent this (Sec-Fetch-Site: ${site}); call the admin API from ctl or a script, not from a web page`;
  }
  const origin = headerOf(request, 'origin');
  if (origin !== undefined && !originMatchesHost(origin, headerOf(request, 'host') ?? '')) {
    return `a page from ${JSON.stringify(origin.slice(0, 100))} sent this, which is not this listener's origin; call the admin API from ctl or a script, not from a web page`;
  }
  return null;
}

/** Whether a request carries a body at all: a length above zero, or a chunked one. */
export function hasBody(request: FastifyRequest): boolean {
  const length = headerOf(request, 'content-length');
  if (length !== undefined && length.trim() !== '0') return true;
  return headerOf(request, 'transfer-encoding') !== undefined;
}

/** Whether a Content-Type is JSON: `application/json`, with or without parameters. */
export function isJsonContentType(value: string | undefined): boolean {
  if (value === undefined) return false;
  return /^application\/json\s*(;|$)/i.test(value.trim());
}

function headerOf(request: FastifyRequest, name: string): string | undefined {
  const v = request.headers[name];
  return Array.isArray(v) ? v[0] : v;
}
