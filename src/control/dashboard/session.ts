// Browser sessions for the dashboard: login with the admin token, a cookie
// that carries only a random session id, and a CSRF token per session. Kept
// apart from the pages because it is the security boundary: every rule about
// who may see or change anything is here, and tested on its own.
//
// The cookie never holds the admin token or anything derived from it alone:
// a random id maps to the session. With a store, sessions live there (the id
// only as an HMAC keyed by the admin token), so a login holds on every
// control plane behind one address and across a restart, and logging out on
// one ends it on all; while the store is unreachable, pages open for
// sessions an instance saw confirmed there lately, and nothing else does.
// Without a store they live in this process's memory, and a restart means
// logging in again.
import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import { LlmgwError } from '../../errors/index.js';
import { isRole, originMatchesHost, type Role } from '../../http/index.js';
import type { SessionBackend } from '../store/index.js';

// The store holds the shape of a shared session, so that it need not import the dashboard.
export type { SessionBackend, StoredSession } from '../store/index.js';

export const SESSION_COOKIE = 'llmgw_session';

export interface Session {
  readonly id: string;
  /** Sent in a hidden field of every form, checked on every POST. */
  readonly csrfToken: string;
  readonly createdMs: number;
  lastSeenMs: number;
  /** Where the person logged in from, `dashboard:<remote address>`: the label beside the session's audit identity (dashboard/routes.tsx sessionIdentity). */
  readonly actor: string;
  /** Who signed in: a person and their role at sign-in; null = the admin token (the admin role, no person). */
  readonly who: SessionPerson | null;
}

/** The person a session belongs to, as fixed at sign-in. */
export interface SessionPerson {
  readonly name: string;
  readonly role: Role;
  readonly teams: readonly string[];
}

export interface SessionOptions {
  /** Null: this control plane needs no admin token (loopback admin address only); a session is issued without one. */
  adminToken: string | null;
  now: () => number;
  /** A session unused this long is forgotten, ms. Absent = 8 hours. */
  idleTimeoutMs?: number;
  /** A session older than this is forgotten however busy, ms. Absent = 7 days. */
  maxAgeMs?: number;
  /** Sessions kept at most; the oldest goes first. Bounds memory against a script that logs in in a loop. Absent = 1000. */
  maxSessions?: number;
  /** Where sessions are shared; absent = this process's memory only. */
  backend?: SessionBackend;
  /** Told when the backend failed; absent = silent. */
  onBackendError?: (err: unknown, doing: string) => void;
  /** How long a session read may take before the store counts as away, ms: a page must not hang on it. Absent = 1000. */
  storeReadTimeoutMs?: number;
}

/** What a request wants a session for: a page to read, or a form that changes something. */
export type SessionUse = 'read' | 'change';

/** How stale the stored last-seen may get before a request rewrites it: idle expiry is hours, a page refresh seconds. */
const TOUCH_AFTER_MS = 60_000;

/**
 * While the store is away, a session this instance saw confirmed by the
 * store this recently still opens pages (not forms): a logout on another
 * instance that this one could not hear of holds at most this long.
 */
const UNCONFIRMED_READS_MS = 5 * 60_000;

export class Sessions {
  /**
   * Without a backend, every session; with one, those this instance has
   * seen, with when the store last confirmed each (for pages while the
   * store is away; null without a backend).
   */
  private readonly sessions = new Map<string, { session: Session; confirmedMs: number | null }>();
  private readonly tokenHash: Buffer | null;
  /** Keys the stored hash of a session id: a session is found only by control planes with the same admin token (or none, apart). */
  private readonly idKey: Buffer;
  private readonly idleTimeoutMs: number;
  private readonly maxAgeMs: number;
  private readonly maxSessions: number;
  private readonly readTimeoutMs: number;

  constructor(private readonly options: SessionOptions) {
    this.tokenHash = options.adminToken === null ? null : sha256(options.adminToken);
    this.idKey = sha256(
      options.adminToken === null
        ? 'llmgw dashboard, no admin token'
        : `llmgw dashboard session\u0000${options.adminToken}`,
    );
    this.idleTimeoutMs = options.idleTimeoutMs ?? 8 * 3600_000;
    this.maxAgeMs = options.maxAgeMs ?? 7 * 24 * 3600_000;
    this.maxSessions = options.maxSessions ?? 1000;
    this.readTimeoutMs = options.storeReadTimeoutMs ?? 1000;
  }

  /** True when logging in needs no token at all. */
  get open(): boolean {
    return this.tokenHash === null;
  }

  /** Constant-time: both sides are hashed first, so neither length nor content leaks through timing. */
  tokenMatches(given: string): boolean {
    if (this.tokenHash === null) return true;
    return timingSafeEqual(this.tokenHash, sha256(given));
  }

  /** A new session. With a store it must be written there (to hold on every instance), or this throws LLMGW_STORE_UNAVAILABLE. */
  async create(actor: string, who: SessionPerson | null = null): Promise<Session> {
    const now = this.options.now();
    const session: Session = {
      id: randomToken(),
      csrfToken: randomToken(),
      createdMs: now,
      lastSeenMs: now,
      actor,
      who,
    };
    const backend = this.options.backend;
    if (backend) {
      try {
        await backend.prune(now - this.idleTimeoutMs, now - this.maxAgeMs, this.maxSessions - 1);
      } catch (err) {
        this.options.onBackendError?.(err, 'pruning expired dashboard sessions');
      }
      try {
        await backend.put({
          idHash: this.rowKey(session.id),
          csrfToken: session.csrfToken,
          actor,
          createdMs: now,
          lastSeenMs: now,
          person: who?.name ?? null,
          role: who?.role ?? null,
          teams: who?.teams ?? [],
        });
      } catch (err) {
        this.options.onBackendError?.(err, 'saving a new dashboard session');
        throw new LlmgwError(
          'LLMGW_STORE_UNAVAILABLE',
          'logging in needs the store, which is unreachable now; try again once it is back',
          { cause: err },
        );
      }
    }
    this.remember(session, backend ? now : null);
    return session;
  }

  /**
   * The live session a request's cookie names, or null (no cookie, unknown
   * id, ended, expired). With a store, the store decides: a session ended or
   * expired on another instance is gone here too. While the store is away,
   * a page (`read`) may still use a session this instance saw confirmed
   * within the last few minutes; a form (`change`) throws
   * LLMGW_STORE_UNAVAILABLE, since only the store can say it was not ended.
   */
  async fromRequest(request: FastifyRequest, use: SessionUse = 'read'): Promise<Session | null> {
    const id = cookieValue(request.headers.cookie, SESSION_COOKIE);
    if (!id) return null;
    const known = this.sessions.get(id);
    let session = known?.session ?? null;
    let storedSeenMs: number | null = null;
    const backend = this.options.backend;
    if (backend) {
      const stored = await this.withReadTimeout(backend.get(this.rowKey(id))).catch((err: unknown) => {
        this.options.onBackendError?.(err, 'reading a dashboard session');
        if (use === 'change') {
          throw new LlmgwError(
            'LLMGW_STORE_UNAVAILABLE',
            'the store is unreachable, so this control plane cannot confirm the dashboard session for a change; try again once it is back',
            { cause: err },
          );
        }
        return 'away' as const;
      });
      if (stored === 'away') {
        const confirmed = known?.confirmedMs ?? null;
        if (confirmed === null || this.options.now() - confirmed > UNCONFIRMED_READS_MS) return null;
      } else if (stored === null) {
        this.sessions.delete(id);
        return null;
      } else {
        storedSeenMs = stored.lastSeenMs;
        if (known) known.confirmedMs = this.options.now();
        session ??= this.remember(
          {
            id,
            csrfToken: stored.csrfToken,
            actor: stored.actor,
            createdMs: stored.createdMs,
            lastSeenMs: stored.lastSeenMs,
            // A stored role this version does not know reads as the least: viewer.
            who:
              stored.person == null
                ? null
                : {
                    name: stored.person,
                    role: isRole(stored.role) ? stored.role : 'viewer',
                    teams: stored.teams ?? [],
                  },
          },
          this.options.now(),
        );
        session.lastSeenMs = Math.max(session.lastSeenMs, stored.lastSeenMs);
      }
    }
    if (!session) return null;
    const now = this.options.now();
    if (now - session.lastSeenMs > this.idleTimeoutMs || now - session.createdMs > this.maxAgeMs) {
      this.sessions.delete(id);
      if (backend)
        void backend
          .delete(this.rowKey(id))
          .catch((err: unknown) => this.options.onBackendError?.(err, 'deleting an expired dashboard session'));
      return null;
    }
    session.lastSeenMs = now;
    if (backend && storedSeenMs !== null && now - storedSeenMs >= TOUCH_AFTER_MS) {
      void backend
        .touch(this.rowKey(id), now)
        .catch((err: unknown) => this.options.onBackendError?.(err, "recording a dashboard session's use"));
    }
    return session;
  }

  /**
   * Logs out, everywhere. With a store, only once it is deleted there:
   * otherwise this throws LLMGW_STORE_UNAVAILABLE and the session stays, as
   * it does on every other instance, rather than seeming to end.
   */
  async end(session: Session): Promise<void> {
    const backend = this.options.backend;
    if (backend) {
      try {
        await backend.delete(this.rowKey(session.id));
      } catch (err) {
        this.options.onBackendError?.(err, 'ending a dashboard session');
        throw new LlmgwError(
          'LLMGW_STORE_UNAVAILABLE',
          'logging out needs the store (to end the session on every control plane), which is unreachable now; the session is still valid, so log out again once it is back',
          { cause: err },
        );
      }
    }
    this.sessions.delete(session.id);
  }

  /** Sessions this instance holds in memory. */
  get size(): number {
    return this.sessions.size;
  }

  /** The stored hash of a session id. */
  private rowKey(id: string): string {
    return createHmac('sha256', this.idKey).update(id).digest('hex');
  }

  private withReadTimeout<T>(read: Promise<T>): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`the store did not answer within ${this.readTimeoutMs} ms`)),
        this.readTimeoutMs,
      );
    });
    return Promise.race([read, late]).finally(() => clearTimeout(timer));
  }

  private remember(session: Session, confirmedMs: number | null): Session {
    while (this.sessions.size >= this.maxSessions) {
      const oldest = this.sessions.keys().next();
      if (oldest.done) break;
      this.sessions.delete(oldest.value);
    }
    this.sessions.set(session.id, { session, confirmedMs });
    return session;
  }
}

/**
 * Wrong admin tokens per remote address: after `maxFailures` within
 * `windowMs`, logins from that address are refused until the window has
 * passed, so a login form cannot be used to guess the token at network speed.
 * A right token does not clear the count: it would let a guesser reset it.
 */
export class LoginThrottle {
  private readonly failures = new Map<string, number[]>();

  constructor(
    private readonly now: () => number,
    private readonly maxFailures = 10,
    private readonly windowMs = 5 * 60_000,
  ) {}

  /** Seconds until this address may try again; 0 = it may now. */
  retryAfterSeconds(remote: string): number {
    const recent = this.recent(remote);
    if (recent.length < this.maxFailures) return 0;
    return Math.max(1, Math.ceil((recent[0]! + this.windowMs - this.now()) / 1000));
  }

  fail(remote: string): void {
    const recent = this.recent(remote);
    recent.push(this.now());
    this.failures.set(remote, recent);
    // Bound memory under a spray from many addresses: forget the oldest address.
    if (this.failures.size > 10_000) {
      const oldest = this.failures.keys().next();
      if (!oldest.done) this.failures.delete(oldest.value);
    }
  }

  private recent(remote: string): number[] {
    const since = this.now() - this.windowMs;
    const kept = (this.failures.get(remote) ?? []).filter((t) => t > since);
    if (kept.length) this.failures.set(remote, kept);
    else this.failures.delete(remote);
    return kept;
  }
}

/**
 * The Set-Cookie value for a session: HttpOnly (no script reads it),
 * SameSite=Strict (no other site's page sends it), Secure when the request
 * came over TLS. `null` clears the cookie.
 */
export function sessionCookie(session: Session | null, secure: boolean): string {
  const attrs = ['Path=/', 'HttpOnly', 'SameSite=Strict'];
  if (secure) attrs.push('Secure');
  if (session === null) return [`${SESSION_COOKIE}=`, 'Max-Age=0', ...attrs].join('; ');
  return [`${SESSION_COOKIE}=${session.id}`, ...attrs].join('; ');
}

/**
 * Why a state-changing request must be refused, or null when it may go on.
 * Three checks, each enough on its own in some browser: the per-session token
 * in the form (absent `session` = a login, which has no session yet), the
 * Origin header (must be this host), and Fetch Metadata (same-origin or a
 * person typing the URL). Headers a browser did not send are not held against
 * it: older browsers send neither, and the token still holds.
 */
export function csrfProblem(request: FastifyRequest, session: Session | null, formToken: unknown): string | null {
  const site = header(request, 'sec-fetch-site');
  if (site !== undefined && site !== 'same-origin' && site !== 'none') {
    return `the form was sent from another site (Sec-Fetch-Site: ${site}); use the dashboard's own pages`;
  }
  const origin = header(request, 'origin');
  if (origin !== undefined) {
    const host = header(request, 'host');
    if (!host || !originMatchesHost(origin, host))
      return "the form was sent from another origin; use the dashboard's own pages";
  }
  if (session !== null) {
    if (typeof formToken !== 'string' || formToken.length === 0)
      return 'the form carried no CSRF token; reload the page and try again';
    if (!timingSafeEqual(sha256(formToken), sha256(session.csrfToken)))
      return "the form's CSRF token is not this session's; reload the page and try again";
  }
  return null;
}

/** One cookie's value from a Cookie header; undefined when absent. */
export function cookieValue(header: string | undefined, name: string): string | undefined {
  if (!header) return undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0) continue;
    if (part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

function header(request: FastifyRequest, name: string): string | undefined {
  const v = request.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

function randomToken(): string {
  return randomBytes(32).toString('base64url');
}

function sha256(s: string): Buffer {
  return createHash('sha256').update(s).digest();
}
