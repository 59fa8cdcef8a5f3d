// Who may use the admin listener, decided in one place for every route on
// it. Installed on the admin app before any route is registered, it checks
// each request against the route that matched (never the raw URL, which a
// client may spell with escapes, dot segments or an absolute-form target),
// so a route added later by anyone is protected without anyone remembering
// to: a route is admin-only unless it declares `config: { access: 'public' }`
// or `'session'` (the dashboard's pages). A path that matched no route is
// refused like an admin route, so without a token nobody can tell a missing
// route from a protected one.
//
// Separate from the routes because it is the security boundary of the
// listener, and from the dashboard's sessions because those are one of the
// credentials it accepts, not the rule of who needs one.
import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { LlmgwError } from '../../errors/index.js';
import {
  bearerToken,
  checkHost,
  crossSiteProblem,
  hasBody,
  type HostAllowlist,
  isJsonContentType,
  setIdentity,
} from '../../http/index.js';

/**
 * Who a route lets in. `admin` (the default, also when absent): the admin
 * token. `session`: a dashboard session or the admin token. `public`:
 * anyone who reaches the listener under an allowed Host (the login page).
 */
export type RouteAccess = 'admin' | 'session' | 'public';

/** A route's `config` as this guard reads it. */
export interface AccessConfig {
  access?: RouteAccess;
}

/** The identity an admin-token caller is recorded under in the audit log. */
export const ADMIN_TOKEN_IDENTITY = 'admin-token';
/** The identity recorded when the control plane has no admin token (a loopback admin listener). */
export const NO_TOKEN_IDENTITY = 'loopback-no-token';

/** The dashboard's sessions, as the guard asks about them. */
export interface SessionCheck {
  /** The identity of the live dashboard session the request carries (`dashboard:…`), or null. `change` for a state-changing method. */
  verify(request: FastifyRequest, use: 'read' | 'change'): Promise<string | null>;
  /** Answers a request that carries neither a session nor the admin token (a redirect to the login page, a refusal page). */
  refuse(request: FastifyRequest, reply: FastifyReply): Promise<unknown>;
}

export interface AdminGuardOptions {
  /** Null: no token is needed (the control plane allows that only on a loopback admin address); the Host and origin checks still hold. */
  adminToken: string | null;
  /** Host names the admin listener answers to; null = any. */
  hosts: HostAllowlist;
}

/** A route as registered on the admin app, with the access it declared. */
export interface GuardedRoute {
  readonly method: string;
  readonly url: string;
  readonly access: RouteAccess;
}

const ACCESS: ReadonlySet<string> = new Set<RouteAccess>(['admin', 'session', 'public']);
const CHANGING = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

export class AdminGuard {
  private sessions: SessionCheck | null = null;
  private readonly known: GuardedRoute[] = [];
  private readonly tokenHash: Buffer | null;

  private constructor(private readonly options: AdminGuardOptions) {
    this.tokenHash = options.adminToken === null ? null : sha256(options.adminToken);
  }

  /**
   * Installs the guard on `app`. Call right after creating the app, before
   * any route or plugin: Fastify gives hooks only to what is registered
   * after them.
   */
  static install(app: FastifyInstance, options: AdminGuardOptions): AdminGuard {
    const guard = new AdminGuard(options);
    app.addHook('onRoute', (route) => {
      const declared = (route.config as AccessConfig | undefined)?.access;
      // A misspelt access would otherwise read as the default; refuse it at start-up instead.
      if (declared !== undefined && !ACCESS.has(declared)) {
        throw new Error(`route ${route.url} declares access "${String(declared)}"; want admin, session or public`);
      }
      const methods = Array.isArray(route.method) ? route.method : [route.method];
      for (const method of methods) guard.known.push({ method, url: route.url, access: declared ?? 'admin' });
    });
    app.addHook('onRequest', async (request, reply) => guard.check(request, reply));
    return guard;
  }

  /** Lets dashboard sessions in on `session` routes. Until called, those routes take only the admin token. */
  acceptSessions(check: SessionCheck): void {
    this.sessions = check;
  }

  /** Every route registered on the admin app since install, with its access: what the "every route is protected" test walks. */
  routes(): readonly GuardedRoute[] {
    return this.known;
  }

  private async check(request: FastifyRequest, reply: FastifyReply): Promise<unknown> {
    checkHost(request, this.options.hosts, 'admin', 'admin_hosts');
    const access: RouteAccess = request.is404
      ? 'admin'
      : ((request.routeOptions.config as AccessConfig | undefined)?.access ?? 'admin');
    if (access === 'public') return undefined;
    const bearer = bearerOf(request);
    if (this.tokenHash === null || (bearer !== null && timingSafeEqual(this.tokenHash, sha256(bearer)))) {
      setIdentity(request, this.tokenHash === null ? NO_TOKEN_IDENTITY : ADMIN_TOKEN_IDENTITY);
      // The dashboard's forms carry their own CSRF token and origin checks (dashboard/session.ts).
      if (access === 'admin' && CHANGING.has(request.method)) checkSameOriginJson(request);
      return undefined;
    }
    if (access === 'session' && this.sessions) {
      const identity = await this.sessions.verify(request, CHANGING.has(request.method) ? 'change' : 'read');
      if (identity !== null) {
        setIdentity(request, identity);
        return undefined;
      }
      await this.sessions.refuse(request, reply);
      return reply;
    }
    throw new LlmgwError(
      'LLMGW_UNAUTHORIZED',
      bearer === null
        ? 'this admin API needs Authorization: Bearer <admin token> (set LLMGW_ADMIN_TOKEN for ctl)'
        : 'the admin token is wrong',
    );
  }
}

/**
 * A state-changing call must say its body is JSON (a cross-site form or a
 * `text/plain` fetch cannot, without a CORS preflight this listener never
 * answers) and must not come from another origin's page. A call with no
 * body at all (DELETE, a bare collect) needs no type: there is nothing to
 * misread, and the origin check still holds.
 */
function checkSameOriginJson(request: FastifyRequest): void {
  const type = request.headers['content-type'];
  if ((type !== undefined || hasBody(request)) && !isJsonContentType(type)) {
    throw new LlmgwError(
      'LLMGW_UNSUPPORTED_MEDIA_TYPE',
      `a ${request.method} to the admin API must send its body as JSON with Content-Type: application/json${type ? `, not ${type.slice(0, 80)}` : ''}`,
    );
  }
  const problem = crossSiteProblem(request);
  if (problem) throw new LlmgwError('LLMGW_CROSS_SITE', problem);
}

/** The token of an `Authorization: Bearer …` header, or null when there is none. */
function bearerOf(request: FastifyRequest): string | null {
  return bearerToken(request.headers.authorization);
}

/** Both sides are hashed before comparing, so neither length nor content leaks through timing. */
function sha256(s: string): Buffer {
  return createHash('sha256').update(s).digest();
}
