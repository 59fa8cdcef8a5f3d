// The dashboard's routes on the admin listener, in their own Fastify scope:
// the form-body parser, the HTML error page and the session check apply to
// the dashboard's paths only, so the admin API under /api/v1 keeps answering
// JSON exactly as before. Every page is rendered on the server; every change
// is a POST form checked for its session's CSRF token, and goes through the
// same function the admin API calls, with the logged-in person as the actor.
import { createHash, randomBytes } from 'node:crypto';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { VNode } from 'preact';
import type { Registry } from 'prom-client';
import { isLlmgwError } from '../../errors/index.js';
import {
  type AdminGuard,
  type AuditSource,
  changeNodeState,
  parseNodeQuery,
  type RequestsApiDeps,
} from '../adminapi/index.js';
import { allows, type AuditActor, type Permission, type Principal, principalOf } from '../../http/index.js';
import { collectAndAudit } from '../weights/index.js';
import type { PageContext } from './components.js';
import {
  type DashboardSources,
  endpointUsageData,
  modelData,
  modelsData,
  nodeData,
  nodesData,
  orphansAndLastCollect,
  orphansData,
  overviewData,
  replicasData,
} from './data.js';
import { Layout, renderDocument, renderFragment } from './layout.js';
import { ModelPage, ModelsPage } from './pages/models.js';
import { NodePage } from './pages/nodes.js';
import { NODES_PAGE, NodeListPage } from './pages/node-list.js';
import { LoginPage, MessagePage } from './pages/login.js';
import { OverviewPage } from './pages/overview.js';
import { ReplicasPage } from './pages/replicas.js';
import { TrafficPage } from './pages/traffic.js';
import { CollectConfirmPage, CollectResultPage, WeightsPage } from './pages/weights.js';
import { csrfProblem, LoginThrottle, type Session, type SessionBackend, sessionCookie, Sessions } from './session.js';
import { TrafficSampler, trafficView } from './traffic.js';
import { registerWhyPages } from './why-routes.js';
import { registerShadowPages } from './shadows-routes.js';
import { registerBatchPages } from './batches-routes.js';
import { registerMoneyPages, type MoneyPagesDeps } from './money-routes.js';
import type { BatchesAdminDeps } from '../batches/admin-api.js';
import type { ShadowsApiDeps } from '../adminapi/shadows.js';
import { registerSsoPages } from './sso-routes.js';
import type { People } from '../people/people.js';
import type { OidcSignIn } from '../people/oidc.js';

export interface DashboardOptions extends DashboardSources {
  /** The admin listener's guard: the dashboard's pages let in its sessions through it. Absent = pages take only the admin token. */
  guard?: AdminGuard;
  /** Null: no token needed (the control plane allows that only on a loopback admin address); a session is issued on the first visit. */
  adminToken: string | null;
  /** The registry the router's metrics live in: the traffic page reads it. */
  registry: Registry;
  /** Where sessions are shared between control planes and kept across restarts (the store); absent = memory. */
  sessionBackend?: SessionBackend;
  now: () => number;
  /** How often the panels refresh in the browser, ms. Absent = 5000. */
  refreshMs?: number;
  /** How often traffic is sampled, ms. Absent = 5000. */
  trafficSampleMs?: number;
  /** The window the traffic page's rates and percentiles cover, ms. Absent = 5 minutes. */
  trafficWindowMs?: number;
  /** The store's audit log, for the audit page; absent = no store. */
  audit?: AuditSource;
  /** The router's request log, for the requests pages; absent = none is kept. */
  requestLog?: RequestsApiDeps;
  /** The gateway's shadow comparison, for the shadows page; absent = the page says none is kept. */
  shadows?: ShadowsApiDeps;
  /** Batches and their pace, for the batches page; absent = no store: the page says there are none. */
  batches?: BatchesAdminDeps;
  /** Teams, budgets and spend, for their pages; absent = those pages are not served. */
  money?: MoneyPagesDeps;
  /** People, for signing in through the identity provider and tokens for ctl; absent = no store, no people. */
  people?: People;
  /** Single sign-on through an OpenID Connect provider; absent = none. */
  sso?: OidcSignIn;
}

type Form = Record<string, string | undefined>;

/**
 * The guard's route options for the dashboard: the login page is for
 * anyone, everything else needs a session or a token, and the permission
 * it names: pages read the fleet (a viewer sees them), each form names
 * what it changes (a viewer's press is refused 403).
 */
const PUBLIC = { config: { access: 'public' } } as const;
const SESSION = { config: { access: 'session', permission: 'fleet.read' } } as const;
const SIGNED_IN = { config: { access: 'session', permission: 'self' } } as const;
const changes = (permission: Permission) => ({ config: { access: 'session', permission } }) as const;

export interface PageSpec {
  title: string;
  /** The nav entry to mark current. */
  section?: string;
  /** False: never refreshed (forms, confirmations, results), so nothing changes under a reader about to confirm. */
  refresh: boolean;
  body: VNode;
  status?: number;
  notice?: string;
}

export function registerDashboard(app: FastifyInstance, options: DashboardOptions): void {
  void app.register((scope, _opts, done) => {
    dashboardScope(scope, options);
    done();
  });
}

function dashboardScope(scope: FastifyInstance, options: DashboardOptions): void {
  const sessions = new Sessions({
    adminToken: options.adminToken,
    now: options.now,
    ...(options.sessionBackend ? { backend: options.sessionBackend } : {}),
    onBackendError: (err, doing) => scope.log.warn({ err }, `${doing} in the store failed`),
  });
  const throttle = new LoginThrottle(options.now);
  // The session the guard found for a request, so a page does not read the store for it twice.
  const verified = new WeakMap<FastifyRequest, Session>();
  options.guard?.acceptSessions({
    verify: async (request, use) => {
      const session = await sessions.fromRequest(request, use);
      if (!session) return null;
      verified.set(request, session);
      return sessionPrincipal(session);
    },
    refuse: async (request, reply) => {
      if (request.method === 'GET' || request.method === 'HEAD') return loginRedirect(request, reply);
      return send(request, reply, null, {
        title: 'Not logged in',
        refresh: false,
        status: 403,
        body: <MessagePage message="This form needs a dashboard session; log in and send it again." back="/login" />,
      });
    },
  });
  const refreshMs = options.refreshMs ?? 5000;
  const sampler = new TrafficSampler({
    registry: options.registry,
    now: options.now,
    intervalMs: options.trafficSampleMs ?? 5000,
  });
  scope.addHook('onReady', async () => sampler.start());
  scope.addHook('onClose', async () => sampler.stop());

  // Forms post application/x-www-form-urlencoded; the admin listener's body limit still holds.
  scope.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, (_request, body, done) => {
    const form: Form = Object.create(null) as Form;
    for (const [k, v] of new URLSearchParams(body as string)) form[k] = v;
    done(null, form);
  });

  const send = (
    request: FastifyRequest,
    reply: FastifyReply,
    ctx: PageContext | null,
    spec: PageSpec,
  ): FastifyReply => {
    const nonce = randomBytes(16).toString('base64');
    void reply
      .code(spec.status ?? 200)
      .header('content-type', 'text/html; charset=utf-8')
      .header('cache-control', 'no-store')
      .header('x-content-type-options', 'nosniff')
      .header('x-frame-options', 'DENY')
      .header('referrer-policy', 'same-origin')
      .header(
        'content-security-policy',
        `default-src 'none'; script-src 'nonce-${nonce}'; style-src 'unsafe-inline'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'`,
      );
    const partial = (request.query as { partial?: string } | undefined)?.partial === '1';
    if (partial && spec.refresh) return reply.send(renderFragment(spec.body));
    return reply.send(
      renderDocument(
        <Layout
          title={spec.title}
          ctx={ctx}
          section={spec.section}
          refreshMs={spec.refresh ? refreshMs : null}
          nonce={nonce}
          notice={spec.notice}
        >
          {spec.body}
        </Layout>,
      ),
    );
  };

  const loginRedirect = (request: FastifyRequest, reply: FastifyReply): FastifyReply => {
    const here = request.url;
    return reply.redirect(here === '/' ? '/login' : `/login?next=${encodeURIComponent(here)}`, 303);
  };

  /**
   * The session of a page request; 'token' for a caller that sent the admin
   * token instead (a script reading a page: no session, so its forms carry no
   * CSRF token and would be refused); null after answering with a redirect
   * to the login page.
   */
  const sessionOf = async (request: FastifyRequest, reply: FastifyReply): Promise<Session | 'token' | null> => {
    const session = verified.get(request) ?? (await sessions.fromRequest(request));
    if (session) return session;
    if (sessions.open) {
      const fresh = await sessions.create(actorFor(request));
      void reply.header('set-cookie', sessionCookie(fresh, request.protocol === 'https'));
      return fresh;
    }
    // A token (the admin token or a person's) the guard already let in: a script reading a page.
    if (principalOf(request) !== null) return 'token';
    loginRedirect(request, reply);
    return null;
  };

  const ctxOf = (request: FastifyRequest, session: Session | 'token'): PageContext => {
    const who = session === 'token' ? principalOf(request) : sessionPrincipal(session);
    return {
      csrfToken: session === 'token' ? '' : session.csrfToken,
      here: localPath(request.url.replace(/([?&])partial=1(&|$)/, '$1').replace(/[?&]$/, '')) ?? '/',
      ...(who?.person ? { person: { name: who.person, role: who.role } } : {}),
      ...(who ? { may: (permission: Permission) => allows(who.role, permission) } : {}),
    };
  };

  /** A page behind the login: renders `build` with the session's context. */
  const page =
    (build: (request: FastifyRequest, ctx: PageContext) => PageSpec | Promise<PageSpec>) =>
    async (request: FastifyRequest, reply: FastifyReply) => {
      const session = await sessionOf(request, reply);
      if (!session) return reply;
      const ctx = ctxOf(request, session);
      return send(request, reply, ctx, await build(request, ctx));
    };

  /** A state-changing form: session and CSRF checked before `act` runs. */
  const action =
    (
      act: (
        request: FastifyRequest,
        form: Form,
        session: Session,
        ctx: PageContext,
      ) => Promise<PageSpec | { redirect: string; setCookie?: string }>,
    ) =>
    async (request: FastifyRequest, reply: FastifyReply) => {
      const form = formOf(request);
      const session = verified.get(request) ?? (await sessions.fromRequest(request, 'change'));
      if (!session && !sessions.open) {
        return send(request, reply, null, {
          title: 'Not logged in',
          refresh: false,
          status: 403,
          body: <MessagePage message="This form needs a dashboard session; log in and send it again." back="/login" />,
        });
      }
      const problem = csrfProblem(request, session, form.csrf);
      if (problem || !session) {
        request.log.info({ url: request.url.split('?')[0] }, `dashboard form refused: ${problem ?? 'no session'}`);
        return send(request, reply, session ? ctxOf(request, session) : null, {
          title: 'Refused',
          refresh: false,
          status: 403,
          body: (
            <MessagePage
              message={problem ?? 'This form needs a dashboard session; reload the page and send it again.'}
            />
          ),
        });
      }
      const ctx = ctxOf(request, session);
      const result = await act(request, form, session, ctx);
      if ('redirect' in result) {
        if (result.setCookie) void reply.header('set-cookie', result.setCookie);
        return reply.redirect(result.redirect, 303);
      }
      return send(request, reply, ctx, result);
    };

  scope.setErrorHandler(async (error: FastifyError, request, reply) => {
    const session = await sessions.fromRequest(request);
    const ctx = session ? ctxOf(request, session) : null;
    let status = 500;
    let message = 'Something failed inside the control plane; its log has the details.';
    // An unreachable store is worth saying as it is: what was refused, and that it passes.
    if (isLlmgwError(error) && (error.status < 500 || error.code === 'LLMGW_STORE_UNAVAILABLE')) {
      status = error.status;
      message = error.message;
    } else if (
      !isLlmgwError(error) &&
      typeof error.statusCode === 'number' &&
      error.statusCode >= 400 &&
      error.statusCode < 500
    ) {
      status = error.statusCode;
      message = error.statusCode === 413 ? 'The form is larger than this listener accepts.' : error.message;
    }
    if (status >= 500) request.log.error({ err: error, url: request.url.split('?')[0] }, 'dashboard request failed');
    else request.log.info({ status, url: request.url.split('?')[0] }, message);
    return send(request, reply, ctx, {
      title: status >= 500 ? 'Error' : 'Could not do that',
      refresh: false,
      status,
      body: <MessagePage message={message} />,
    });
  });

  // Login and logout.
  scope.get('/login', PUBLIC, async (request, reply) => {
    if (await sessions.fromRequest(request)) return reply.redirect('/', 303);
    const next = localPath((request.query as { next?: string }).next);
    return send(request, reply, null, {
      title: 'llmgw dashboard',
      refresh: false,
      body: (
        <LoginPage open={sessions.open} next={next} sso={options.sso !== undefined && options.people !== undefined} />
      ),
    });
  });

  scope.post('/login', PUBLIC, async (request, reply) => {
    const form = formOf(request);
    const next = localPath(form.next);
    const problem = csrfProblem(request, null, undefined);
    if (problem) {
      return send(request, reply, null, {
        title: 'llmgw dashboard',
        refresh: false,
        status: 403,
        body: <LoginPage open={sessions.open} problem={problem} next={next} />,
      });
    }
    const wait = throttle.retryAfterSeconds(request.ip);
    if (wait > 0) {
      void reply.header('retry-after', String(wait));
      return send(request, reply, null, {
        title: 'llmgw dashboard',
        refresh: false,
        status: 429,
        body: (
          <LoginPage
            open={sessions.open}
            problem={`Too many wrong admin tokens from this address; try again in ${wait} s.`}
            next={next}
          />
        ),
      });
    }
    const token = form.token ?? '';
    // Not the admin token: perhaps a person's own token, which signs in as that person with their role.
    const person = sessions.tokenMatches(token) ? null : ((await options.guard?.personFor(token)) ?? null);
    if (!sessions.tokenMatches(token) && person?.person == null) {
      throttle.fail(request.ip);
      // Logged without what was typed: a near-miss of the token is still a secret.
      request.log.info({ remote: request.ip }, 'dashboard login with a wrong admin token');
      return send(request, reply, null, {
        title: 'llmgw dashboard',
        refresh: false,
        status: 401,
        body: (
          <LoginPage
            open={sessions.open}
            problem="That admin token is wrong. Use the token the control plane was started with (--admin-token or LLMGW_ADMIN_TOKEN)."
            next={next}
          />
        ),
      });
    }
    const who = person?.person == null ? null : { name: person.person, role: person.role, teams: person.teams };
    const session = await sessions.create(actorFor(request), who);
    void reply.header('set-cookie', sessionCookie(session, request.protocol === 'https'));
    return reply.redirect(next ?? '/', 303);
  });

  scope.post(
    '/logout',
    SIGNED_IN,
    action(async (request, _form, session) => {
      await sessions.end(session);
      return { redirect: '/login', setCookie: sessionCookie(null, request.protocol === 'https') };
    }),
  );

  // Pages.
  scope.get(
    '/',
    SESSION,
    page(() => ({
      title: 'Overview',
      section: '/',
      refresh: true,
      body: <OverviewPage data={overviewData(options)} />,
    })),
  );
  scope.get(
    '/nodes',
    SESSION,
    page((request, ctx) => {
      const filter = nodeListFilter(request.url);
      return {
        title: 'Nodes',
        section: '/nodes',
        refresh: true,
        body: <NodeListPage page={nodesData(options, parseNodeQuery(filter))} filter={filter} ctx={ctx} />,
      };
    }),
  );
  scope.get<{ Params: { id: string } }>(
    '/nodes/:id',
    SESSION,
    page(async (request, ctx) => {
      const id = (request.params as { id: string }).id;
      const data = await nodeData(options, id);
      if (!data)
        return {
          title: 'No such node',
          section: '/nodes',
          refresh: false,
          status: 404,
          body: <MessagePage message={`No node "${id}" has joined this control plane.`} back="/nodes" />,
        };
      return { title: `Node ${id}`, section: '/nodes', refresh: true, body: <NodePage data={data} ctx={ctx} /> };
    }),
  );
  scope.get(
    '/models',
    SESSION,
    page(() => ({
      title: 'Models',
      section: '/models',
      refresh: true,
      body: <ModelsPage models={modelsData(options)} />,
    })),
  );
  scope.get<{ Params: { name: string } }>(
    '/models/:name',
    SESSION,
    page(async (request) => {
      const name = (request.params as { name: string }).name;
      const data = await modelData(options, name);
      if (!data)
        return {
          title: 'No such model',
          section: '/models',
          refresh: false,
          status: 404,
          body: <MessagePage message={`The catalog has no model or alias "${name}".`} back="/models" />,
        };
      return { title: `Model ${data.model.name}`, section: '/models', refresh: true, body: <ModelPage data={data} /> };
    }),
  );
  scope.get(
    '/replicas',
    SESSION,
    page(() => ({
      title: 'Replicas',
      section: '/replicas',
      refresh: true,
      body: <ReplicasPage replicas={replicasData(options)} />,
    })),
  );
  scope.get(
    '/traffic',
    SESSION,
    page(async () => ({
      title: 'Traffic',
      section: '/traffic',
      refresh: true,
      body: (
        <TrafficPage
          view={trafficView(sampler.samples(), options.trafficWindowMs ?? 5 * 60_000, sampler.intervalMs)}
          usage={await endpointUsageData(options)}
        />
      ),
    })),
  );
  scope.get(
    '/weights',
    SESSION,
    page(async () => ({
      title: 'Weights',
      section: '/weights',
      refresh: true,
      body: <WeightsPage view={await orphansAndLastCollect(options)} />,
    })),
  );
  scope.get(
    '/weights/collect',
    SESSION,
    page((request, ctx) => {
      const node = (request.query as { node?: string }).node || undefined;
      return {
        title: node ? `Collect orphaned weights on ${node}?` : 'Collect orphaned weights on every node?',
        section: '/weights',
        refresh: false,
        body: <CollectConfirmPage view={orphansData(options, node)} node={node} ctx={ctx} />,
      };
    }),
  );

  // Signing in through the identity provider, and a token for ctl login.
  registerSsoPages(scope, {
    sso: options.sso ?? null,
    people: options.people ?? null,
    sessions,
    send,
    page,
    action,
    localPath,
    sessionActor,
    now: options.now,
  });

  // Requests, a node's disks, the audit log and a plan: questions 5-8 of the README's "Asking why".
  registerWhyPages(scope, options, page, action, SESSION);
  // Each shadowed model against its candidate (docs/splits-and-shadows.md).
  registerShadowPages(scope, options.shadows, page, SESSION);
  // Batches: progress, estimated finish and pace (docs/batches.md).
  registerBatchPages(scope, options.batches, page);
  // Teams, budgets and spend (docs/teams-and-budgets.md), cut to a team-admin's teams.
  registerMoneyPages(scope, options.money, page);

  // Actions: the admin API's own functions, with the dashboard session as the actor.
  scope.post(
    '/nodes/:id/state',
    changes('nodes.write'),
    action(async (request, form, session) => {
      const id = (request.params as { id: string }).id;
      await changeNodeState(options.admin, id, form.state, sessionActor(session));
      return { redirect: localPath(form.back) ?? `/nodes/${encodeURIComponent(id)}` };
    }),
  );
  scope.post(
    '/weights/collect',
    changes('weights.collect'),
    action(async (_request, form, session) => {
      const summary = await collectAndAudit(options.weights, form.node || undefined, sessionActor(session));
      return {
        title: 'Collect: what each node did',
        section: '/weights',
        refresh: false,
        body: <CollectResultPage summary={summary} />,
      };
    }),
  );
}

/**
 * A session's identity in the audit log: `dashboard:` and the first 12 hex
 * digits of the SHA-256 of its id, which names one login without letting a
 * reader of the log use it.
 */
export function sessionIdentity(session: Session): string {
  return `dashboard:${createHash('sha256').update(session.id).digest('hex').slice(0, 12)}`;
}

/** Who acts in a dashboard form: the person (or the admin token's session), labelled with where it logged in from. */
function sessionActor(session: Session): AuditActor {
  return { identity: sessionPrincipal(session).identity, label: session.actor };
}

/** Who a session is, for the guard and the audit log: the person signed in, or the admin token's login (admin, named by its hash). */
export function sessionPrincipal(session: Session): Principal {
  const who = session.who;
  if (who === null) return { identity: sessionIdentity(session), person: null, role: 'admin', teams: [] };
  return { identity: `person:${who.name}`, person: who.name, role: who.role, teams: who.teams };
}

/** The label of a new session, for audit records: the dashboard and the address the person logged in from. */
function actorFor(request: FastifyRequest): string {
  return `dashboard:${request.ip}`;
}

/**
 * The node list's filter from the page's URL: the form's empty fields (a
 * search box left blank) and the refresh script's `partial` dropped, and a
 * page of NODES_PAGE unless the URL says otherwise. What stays is what the
 * admin API's node list takes, so a bad value is refused with its words.
 */
export function nodeListFilter(url: string): URLSearchParams {
  const out = new URLSearchParams();
  for (const [k, v] of new URLSearchParams(url.split('?')[1] ?? ''))
    if (k !== 'partial' && v.trim() !== '') out.append(k, v);
  if (!out.has('limit')) out.set('limit', String(NODES_PAGE));
  return out;
}

function formOf(request: FastifyRequest): Form {
  const body = request.body;
  return body && typeof body === 'object' && !Array.isArray(body) ? (body as Form) : {};
}

/**
 * A path on this site to go back to, or undefined: never another host
 * (`//evil`, `/\evil`, `https://…`, `/<tab>/evil`). Browsers drop tabs and
 * newlines and read `\` as `/` before they resolve a Location, so the text as
 * sent proves nothing: it is resolved the way a browser does (WHATWG `URL`)
 * and must stay on this origin with a path that begins with one slash.
 */
export function localPath(p: string | undefined): string | undefined {
  // C0, DEL and C1 controls and backslashes: none belongs in a path, and each is a way to make a browser read it differently.
  // eslint-disable-next-line no-control-regex -- finding control characters is the point
  if (!p || !p.startsWith('/') || p.startsWith('//') || /[\u0000-\u001f\u007f-\u009f\\]/.test(p)) return undefined;
  let url: URL;
  try {
    url = new URL(p, HERE);
  } catch {
    return undefined;
  }
  // Dot segments can still make the path begin with `//` (`/.//evil`), which a later reader may take for a host.
  if (url.origin !== HERE || url.pathname.startsWith('//')) return undefined;
  return p;
}

/** Stands in for the listener's origin when a path is resolved: a name nobody can register, so only a path resolves to it. */
const HERE = 'http://dashboard.invalid';
