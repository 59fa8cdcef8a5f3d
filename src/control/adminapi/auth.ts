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
// Then who may do it: every route declares the permission it needs
// (`config: { permission }`, src/http/permissions.ts); one that declares
// none needs `admin`, which only the admin role holds. The admin token is
// the admin role; a person's token (people/) or dashboard session carries
// the person's role. A role without the permission is answered 403, naming
// the permission.
//
// Separate from the routes because it is the security boundary of the
// listener, and from the dashboard's sessions because those are one of the
// credentials it accepts, not the rule of who needs one.
import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { LlmgwError } from '../../errors/index.js';
import {
  allows,
  bearerToken,
  checkHost,
  crossSiteProblem,
  hasBody,
  type HostAllowlist,
  isJsonContentType,
  isPermission,
  PERSON_TOKEN_PREFIX,
  type Permission,
  type Principal,
  rolesHolding,
  setIdentity,
  setPrincipal,
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
  /** What the caller's role must hold; absent = `admin` (deny by default). Ignored on `public` routes. */
  permission?: Permission;
}

/** The identity an admin-token caller is recorded under in the audit log. */
export const ADMIN_TOKEN_IDENTITY = 'admin-token';
/** The identity recorded when the control plane has no admin token (a loopback admin listener). */
export const NO_TOKEN_IDENTITY = 'loopback-no-token';

/** The dashboard's sessions, as the guard asks about them. */
export interface SessionCheck {
  /** Who the live dashboard session the request carries belongs to, or null. `change` for a state-changing method. */
  verify(request: FastifyRequest, use: 'read' | 'change'): Promise<Principal | null>;
  /** Answers a request that carries neither a session nor the admin token (a redirect to the login page, a refusal page). */
  refuse(request: FastifyRequest, reply: FastifyReply): Promise<unknown>;
}

/** People's own tokens (src/control/people), as the guard asks about them. */
export interface PersonTokenCheck {
  /** The person a live token belongs to, or null (unknown, expired, the person deleted). */
  principalFor(token: string): Promise<Principal | null>;
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
  /** What it needs; `admin` also when it declared nothing (see `declared`). */
  readonly permission: Permission;
  /** False: the route declared no permission and is admin-only by default. */
  readonly declared: boolean;
}

const ACCESS: ReadonlySet<string> = new Set<RouteAccess>(['admin', 'session', 'public']);
const CHANGING = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

export class AdminGuard {
  private sessions: SessionCheck | null = null;
  private people: PersonTokenCheck | null = null;
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
      const config = route.config as AccessConfig | undefined;
      const declared = config?.access;
      // A misspelt access or permission would otherwise read as the default; refuse it at start-up instead.
      if (declared !== undefined && !ACCESS.has(declared)) {
        throw new Error(`route ${route.url} declares access "${String(declared)}"; want admin, session or public`);
      }
      const permission = config?.permission;
      if (permission !== undefined && !isPermission(permission)) {
        throw new Error(`route ${route.url} declares permission "${String(permission)}", which is no permission`);
      }
      const methods = Array.isArray(route.method) ? route.method : [route.method];
      for (const method of methods)
        guard.known.push({
          method,
          url: route.url,
          access: declared ?? 'admin',
          permission: permission ?? 'admin',
          declared: permission !== undefined,
        });
    });
    app.addHook('onRequest', async (request, reply) => guard.check(request, reply));
    return guard;
  }

  /** Lets dashboard sessions in on `session` routes. Until called, those routes take only the admin token. */
  acceptSessions(check: SessionCheck): void {
    this.sessions = check;
  }

  /** Lets people in with their own tokens. Until called, only the admin token (and sessions) work. */
  acceptPeople(check: PersonTokenCheck): void {
    this.people = check;
  }

  /** The person a token belongs to (for the dashboard's login form), or null: not a live person's token, or no people here. */
  async personFor(token: string): Promise<Principal | null> {
    return this.people ? this.people.principalFor(token) : null;
  }

  /** Every route registered on the admin app since install, with its access: what the "every route is protected" test walks. */
  routes(): readonly GuardedRoute[] {
    return this.known;
  }

  private async check(request: FastifyRequest, reply: FastifyReply): Promise<unknown> {
    checkHost(request, this.options.hosts, 'admin', 'admin_hosts');
    const config = request.is404 ? undefined : (request.routeOptions.config as AccessConfig | undefined);
    const access: RouteAccess = config?.access ?? 'admin';
    if (access === 'public') return undefined;
    const permission: Permission = config?.permission ?? 'admin';
    const principal = await this.authenticate(request, reply, access);
    if (principal === 'answered') return reply;
    setIdentity(request, principal.identity);
    setPrincipal(request, principal);
    if (!allows(principal.role, permission)) {
      const who = principal.person === null ? principal.identity : `${principal.person}`;
      throw new LlmgwError(
        'LLMGW_FORBIDDEN',
        `${who} (role ${principal.role}) may not ${request.method} ${request.is404 ? 'this path' : request.routeOptions.url}: it needs the permission "${permission}", which roles ${rolesHolding(permission).join(', ')} hold`,
      );
    }
    return undefined;
  }

  /** Who the request is: the admin token, a person's token, or a dashboard session; 'answered' after the session refusal page. */
  private async authenticate(
    request: FastifyRequest,
    reply: FastifyReply,
    access: RouteAccess,
  ): Promise<Principal | 'answered'> {
    const bearer = bearerOf(request);
    const byToken = async (): Promise<Principal | null> => {
      if (this.tokenHash !== null && bearer !== null && timingSafeEqual(this.tokenHash, sha256(bearer)))
        return ADMIN_PRINCIPAL;
      if (bearer !== null && this.people) {
        const person = await this.people.principalFor(bearer);
        if (person) return person;
      }
      // No admin token configured (a loopback listener): whoever is not a known person is the admin, as before people.
      return this.tokenHash === null ? NO_TOKEN_PRINCIPAL : null;
    };
    const token = await byToken();
    if (token) {
      // The dashboard's forms carry their own CSRF token and origin checks (dashboard/session.ts).
      if (access === 'admin' && CHANGING.has(request.method)) checkSameOriginJson(request);
      return token;
    }
    if (access === 'session' && this.sessions) {
      const session = await this.sessions.verify(request, CHANGING.has(request.method) ? 'change' : 'read');
      if (session !== null) return session;
      await this.sessions.refuse(request, reply);
      return 'answered';
    }
    throw new LlmgwError(
      'LLMGW_UNAUTHORIZED',
      bearer === null
        ? 'this admin API needs Authorization: Bearer <admin token> (set LLMGW_ADMIN_TOKEN for ctl)'
        : bearer.startsWith(PERSON_TOKEN_PREFIX)
          ? "that person's token is wrong, expired or rotated, or the person was deleted; `llmgw ctl login` gets a new one"
          : 'the admin token is wrong',
    );
  }
}

const ADMIN_PRINCIPAL: Principal = { identity: ADMIN_TOKEN_IDENTITY, person: null, role: 'admin', teams: [] };
const NO_TOKEN_PRINCIPAL: Principal = { identity: NO_TOKEN_IDENTITY, person: null, role: 'admin', teams: [] };

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
